//! Turns protocol events into terminal output: streamed text on stdout, tool activity and
//! summaries on stderr, or one JSON object per line with `--json`; and the one-line forms of
//! a compaction and a token count that other commands share.

use reef_core::{CompactionStrategy, Event, EventMsg, TurnOutcome};
use std::io::Write;

/// How events are shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Human,
    Json,
}

/// Renders a stream of events. Write errors (a closed pipe) are ignored: output is best effort,
/// the transcript in the store is the record.
pub struct Renderer {
    mode: Mode,
    /// Text of the current round already streamed as deltas.
    streamed: bool,
    /// Whether the cursor sits after text without a trailing newline.
    open_line: bool,
}

impl Renderer {
    pub fn new(mode: Mode) -> Self {
        Self {
            mode,
            streamed: false,
            open_line: false,
        }
    }

    pub fn event(&mut self, event: &Event) {
        match self.mode {
            Mode::Json => {
                if let Ok(line) = serde_json::to_string(event) {
                    let mut out = std::io::stdout().lock();
                    let _ = writeln!(out, "{line}");
                    let _ = out.flush();
                }
            }
            Mode::Human => self.human(&event.msg),
        }
    }

    fn human(&mut self, msg: &EventMsg) {
        match msg {
            EventMsg::ModelDelta { text } => {
                let mut out = std::io::stdout().lock();
                let _ = write!(out, "{text}");
                let _ = out.flush();
                self.streamed = true;
                self.open_line = !text.ends_with('\n');
            }
            EventMsg::AssistantMessage { text } => {
                if !self.streamed {
                    let mut out = std::io::stdout().lock();
                    let _ = write!(out, "{text}");
                    self.open_line = !text.ends_with('\n');
                }
                self.close_line();
                self.streamed = false;
            }
            EventMsg::ToolCallBegin {
                name, arguments, ..
            } => {
                self.close_line();
                self.streamed = false;
                eprintln!("▸ {name} {}", clip(arguments, 200));
            }
            EventMsg::ToolCallEnd {
                output,
                is_error,
                saved_to,
                ..
            } => {
                let mark = if *is_error { "✗" } else { "✓" };
                let more = saved_to
                    .as_ref()
                    .map(|p| format!(" (full output in {p})"))
                    .unwrap_or_default();
                eprintln!("  {mark} {}{more}", clip(output.trim(), 160));
            }
            EventMsg::ModelRetry { attempt, error } => {
                self.close_line();
                self.streamed = false;
                eprintln!(
                    "warning: {error}; retrying (attempt {attempt}), the reply restarts below"
                );
            }
            EventMsg::Warning { message } => {
                self.close_line();
                eprintln!("warning: {message}");
            }
            EventMsg::Error { message } => {
                self.close_line();
                eprintln!("error: {message}");
            }
            EventMsg::ContextCompacted {
                strategy,
                from_seq,
                to_seq,
                tokens_before,
                tokens_after,
                window,
                ..
            } => {
                self.close_line();
                self.streamed = false;
                eprintln!(
                    "[{}]",
                    compaction_line(
                        *strategy,
                        (*from_seq, *to_seq),
                        (*tokens_before, *tokens_after, *window)
                    )
                );
            }
            EventMsg::Steered { text, .. } => {
                self.close_line();
                self.streamed = false;
                eprintln!("[steered: {}]", clip(text, 200));
            }
            EventMsg::SteerReturned { text } => {
                self.close_line();
                eprintln!("[not steered in (no round followed): {}]", clip(text, 200));
            }
            EventMsg::ModelChanged { provider, model } => {
                self.close_line();
                eprintln!("[model: {provider} ({model})]");
            }
            EventMsg::TurnEnded {
                outcome,
                rounds,
                usage,
            } => {
                self.close_line();
                let status = match outcome {
                    TurnOutcome::Completed { .. } => "done".to_owned(),
                    TurnOutcome::MaxRounds { limit } => {
                        format!("stopped: reached the limit of {limit} rounds")
                    }
                    TurnOutcome::TimedOut { limit_secs } => {
                        format!("stopped: the turn exceeded its {limit_secs} s budget")
                    }
                    TurnOutcome::BudgetExceeded { limit, used } => {
                        format!("stopped: used {used} of a {limit}-token budget")
                    }
                    TurnOutcome::CostExceeded {
                        limit_micros,
                        used_micros,
                    } => format!(
                        "stopped: spent ${:.4} of a ${:.4} budget",
                        *used_micros as f64 / 1e6,
                        *limit_micros as f64 / 1e6
                    ),
                    TurnOutcome::LoopDetected { tool, repeats } => {
                        format!(
                            "stopped: `{tool}` was called {repeats} times with the same arguments"
                        )
                    }
                    TurnOutcome::ContextOverflow { tokens, window } => format!(
                        "stopped: with this message the request needs {} tokens, more than the \
                         model's {}-token window; the message was left out of the context and \
                         the session goes on",
                        thousands(*tokens),
                        thousands(*window)
                    ),
                    TurnOutcome::Interrupted => "interrupted".to_owned(),
                    TurnOutcome::Failed { .. } => "failed".to_owned(),
                };
                eprintln!(
                    "[{status} · {rounds} round(s) · {} input / {} output tokens]",
                    usage.input_tokens, usage.output_tokens
                );
            }
            EventMsg::SessionConfigured { .. }
            | EventMsg::TurnStarted { .. }
            | EventMsg::Usage { .. }
            | EventMsg::ShutdownComplete => {}
        }
    }

    fn close_line(&mut self) {
        if self.open_line {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out);
            let _ = out.flush();
            self.open_line = false;
        }
    }
}

/// "context compacted (summarize): messages 2–40, 3,900 → 1,200 of 4,096 tokens".
pub fn compaction_line(
    strategy: CompactionStrategy,
    (from_seq, to_seq): (u64, u64),
    (before, after, window): (u64, u64, u64),
) -> String {
    let range = if from_seq == to_seq {
        format!("message {from_seq}")
    } else {
        format!("messages {from_seq}–{to_seq}")
    };
    format!(
        "context compacted ({}): {range}, {} → {} of {} tokens",
        strategy.as_str(),
        thousands(before),
        thousands(after),
        thousands(window)
    )
}

/// `n` with a comma every three digits: 1234567 → "1,234,567".
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The first `max` characters of `text` on one line.
pub fn clip(text: &str, max: usize) -> String {
    let one_line = text.replace('\n', " ⏎ ");
    if one_line.chars().count() <= max {
        one_line
    } else {
        let head: String = one_line.chars().take(max).collect();
        format!("{head}…")
    }
}

/// `text` with control characters other than newline and tab shown as escapes, so text from
/// elsewhere (a skill's files, an MCP server's answers) cannot move the cursor or rewrite what
/// the terminal shows.
pub fn clean(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_control() && c != '\n' && c != '\t' {
                c.escape_unicode().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// A duration in seconds as a person reads it: `45s`, `12m`, `3h 05m`.
pub fn duration_words(secs: f64) -> String {
    let secs = secs.max(0.0).round() as u64;
    match secs {
        0..60 => format!("{secs}s"),
        60..3600 => format!("{}m", secs.div_ceil(60)),
        _ => format!("{}h {:02}m", secs / 3600, (secs % 3600) / 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_groups_digits() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(4096), "4,096");
        assert_eq!(thousands(1_234_567), "1,234,567");
    }

    #[test]
    fn a_compaction_reads_as_one_line() {
        assert_eq!(
            compaction_line(CompactionStrategy::Summarize, (2, 40), (3900, 1200, 4096)),
            "context compacted (summarize): messages 2–40, 3,900 → 1,200 of 4,096 tokens"
        );
        assert_eq!(
            compaction_line(CompactionStrategy::Truncate, (5, 5), (10, 2, 512)),
            "context compacted (truncate): message 5, 10 → 2 of 512 tokens"
        );
    }

    #[test]
    fn durations_read_as_people_say_them() {
        assert_eq!(super::duration_words(42.4), "42s");
        assert_eq!(super::duration_words(61.0), "2m");
        assert_eq!(super::duration_words(3.0 * 3600.0 + 300.0), "3h 05m");
    }
}
