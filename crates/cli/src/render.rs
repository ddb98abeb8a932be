//! Turns protocol events into terminal output: streamed text on stdout, tool activity and
//! summaries on stderr, or one JSON object per line with `--json`.

use reef_core::{Event, EventMsg, TurnOutcome};
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
