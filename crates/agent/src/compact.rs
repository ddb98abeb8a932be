//! Compaction: when the context nears the model's window, the middle of the conversation is
//! replaced by a summary the model writes (or dropped), the head and the recent turns stay,
//! and the replacement is recorded in the store (the transcript keeps every message).

use crate::error::AgentError;
use crate::history::{self, Held};
use crate::meter::{self, Measure};
use crate::session::{Emitter, Session};
use reef_core::{
    CompactionStrategy, CompactionTrigger, EventMsg, Message, ModelRequest, StreamEvent, ToolChoice,
};
use reef_store::NewCompaction;
use std::ops::Range;

/// After a compaction the context should take at most this share of `compact_at`, so that a
/// few more turns fit before the next one.
const TARGET_SHARE: f64 = 0.5;

/// The summary may take this share of the window.
const SUMMARY_SHARE: u64 = 8;

/// How the warning answering `Op::Compact` starts when there was nothing to do.
pub const NOTHING_TO_COMPACT: &str = "nothing to compact";

/// Tokens a compaction must replace to be worth doing.
const MIN_REPLACED: u64 = 128;

/// Characters of one message quoted to the summarizer; longer ones are cut in the middle.
const QUOTE_CHARS: usize = 2000;

const SUMMARIZER: &str = "You compact the history of a conversation between a user and an AI \
agent so that the agent can go on working within its context window. Write a summary of the \
conversation you are given that the agent can rely on instead of it. Keep every fact, name, \
number, identifier, file path, decision and preference stated by the user; what was asked and \
whether it was done; what the agent found and changed; and what is still open. Drop greetings \
and repetition. Write plain notes, no preamble.";

impl Session {
    /// The window of the current model in tokens, when it is known: its configured size, or
    /// less when the provider refused a shorter prompt as too long.
    pub(crate) fn window(&self) -> Option<u64> {
        let configured = self.model.context_tokens().map(u64::from);
        match (configured, self.refused_at) {
            (Some(w), Some(r)) => Some(w.min(r)),
            (w, r) => w.or(r),
        }
    }

    /// The request the next round sends, with its measured size.
    pub(crate) async fn next_request(&self) -> (ModelRequest, Measure) {
        let request = ModelRequest {
            messages: self.context(),
            tools: self.offered_tools(),
            max_output_tokens: None,
            tool_choice: if self.turn.require_call {
                ToolChoice::Required
            } else {
                ToolChoice::Auto
            },
            one_call: self.small(),
        };
        let measure = self.meter.measure(self.model.as_ref(), &request).await;
        (request, measure)
    }

    /// Compacts the history with the configured strategy. `before` is the size of the
    /// context now; without a known window it stands in for one. Returns `None` when nothing
    /// can be replaced, else the size after. A summary that fails or does not fit falls back
    /// to truncation with a warning.
    pub(crate) async fn compact(
        &mut self,
        trigger: CompactionTrigger,
        before: u64,
        emitter: &Emitter,
    ) -> Result<Option<u64>, AgentError> {
        let window = self.window().unwrap_or(before.max(1));
        let fixed = self.fixed_tokens();
        let target = (window as f64 * self.opts.compact_at * TARGET_SHARE) as u64;
        let head = self.history.first().map_or(0, |h| self.held_tokens(h));
        let summary_allowance = window / SUMMARY_SHARE;
        let tail_budget = target.saturating_sub(fixed + head + summary_allowance);
        let Some(range) = history::middle(
            &self.history,
            self.opts.keep_recent_turns as usize,
            tail_budget,
            |h| self.held_tokens(h),
        ) else {
            return Ok(None);
        };
        let replaced: u64 = self.history[range.clone()]
            .iter()
            .map(|h| self.held_tokens(h))
            .sum();
        if replaced < MIN_REPLACED {
            // A summary or marker would take about as much as it replaces.
            return Ok(None);
        }
        let from_seq = self.history[range.start].first_seq;
        let to_seq = self.history[range.end - 1].last_seq;
        let mut strategy = self.opts.compaction;
        let summary = match strategy {
            CompactionStrategy::Truncate => None,
            CompactionStrategy::Summarize | CompactionStrategy::Archive => {
                match self.summarize(range.clone(), window, emitter).await {
                    Ok(summary) => Some(summary),
                    Err(why) => {
                        emitter.emit(EventMsg::Warning {
                            message: format!(
                                "compaction: {why}; messages {from_seq}–{to_seq} were dropped \
                                 from the context instead (truncate)"
                            ),
                        });
                        strategy = CompactionStrategy::Truncate;
                        None
                    }
                }
            }
        };
        if strategy == CompactionStrategy::Archive {
            let text = transcript(&self.history[range.clone()], usize::MAX);
            if let Err(why) = self.archive(&text, from_seq, to_seq).await {
                emitter.emit(EventMsg::Warning {
                    message: format!("compaction: the archive was not written: {why}"),
                });
            }
        }
        // Measured on the compacted history, which is kept only once it is recorded.
        let mut compacted = self.history.clone();
        history::replace(
            &mut compacted,
            range,
            history::replacement(from_seq, to_seq, summary.as_deref()),
        );
        let before_history = std::mem::replace(&mut self.history, compacted);
        self.meter.forget_anchor();
        let (_, after) = self.next_request().await;
        let recorded = self
            .store
            .record_compaction(
                &self.id,
                NewCompaction {
                    from_seq,
                    to_seq,
                    strategy,
                    trigger,
                    summary: summary.clone(),
                    tokens_before: before,
                    tokens_after: after.tokens,
                    window,
                },
            )
            .await;
        if let Err(err) = recorded {
            self.history = before_history;
            return Err(err.into());
        }
        emitter.emit(EventMsg::ContextCompacted {
            strategy,
            trigger,
            from_seq,
            to_seq,
            tokens_before: before,
            tokens_after: after.tokens,
            window,
            summary,
        });
        Ok(Some(after.tokens))
    }

    /// Compacts now, between turns (`Op::Compact`), reporting to `emitter`: a
    /// `ContextCompacted` event, or a warning when there is nothing to compact.
    pub(crate) async fn compact_now(&mut self, emitter: &Emitter) -> Result<(), AgentError> {
        self.turn = crate::session::TurnState::default();
        let (_, measure) = self.next_request().await;
        if self
            .compact(CompactionTrigger::Manual, measure.tokens, emitter)
            .await?
            .is_none()
        {
            emitter.emit(EventMsg::Warning {
                message: format!(
                    "{NOTHING_TO_COMPACT}: the context ({} tokens) is the first message and the \
                     turns compaction keeps",
                    measure.tokens
                ),
            });
        }
        Ok(())
    }

    /// Drops everything of the turn in progress from the context (its messages stay in the
    /// transcript): what is left after a message too large for the window, so the next turn
    /// starts clean.
    pub(crate) async fn drop_current_turn(&mut self, window: u64) -> Result<(), AgentError> {
        // Only what the turn added: never the head or a summary of earlier turns, even when a
        // compaction in this turn summarized its first message.
        let first = self.turn.first_seq;
        let Some(start) = self.history.iter().position(|h| h.first_seq >= first) else {
            return Ok(());
        };
        let from_seq = self.history[start].first_seq;
        let to_seq = self.history[self.history.len() - 1].last_seq;
        let end = self.history.len();
        self.store
            .record_compaction(
                &self.id,
                NewCompaction {
                    from_seq,
                    to_seq,
                    strategy: CompactionStrategy::Truncate,
                    trigger: CompactionTrigger::ContextLengthError,
                    summary: None,
                    tokens_before: 0,
                    tokens_after: 0,
                    window,
                },
            )
            .await?;
        // Recorded first, so a resumed session leaves the same messages out.
        history::replace(
            &mut self.history,
            start..end,
            history::replacement(from_seq, to_seq, None),
        );
        self.meter.forget_anchor();
        Ok(())
    }

    /// The model's summary of `range`, or why there is none.
    async fn summarize(
        &mut self,
        range: Range<usize>,
        window: u64,
        emitter: &Emitter,
    ) -> Result<String, String> {
        let limit = (window / SUMMARY_SHARE).clamp(64, 2048);
        let request = ModelRequest {
            messages: vec![
                Message::system(SUMMARIZER),
                Message::user(format!(
                    "The conversation to summarize (at most {} words):\n\n{}",
                    limit * 2 / 3,
                    transcript(&self.history[range], QUOTE_CHARS)
                )),
            ],
            tools: Vec::new(),
            max_output_tokens: Some(limit as u32),
            ..Default::default()
        };
        let size = self.meter.measure(self.model.as_ref(), &request).await;
        if size.tokens + limit > window {
            return Err(format!(
                "the part to summarize ({} tokens) does not fit in one request to a \
                 {window}-token window",
                size.tokens
            ));
        }
        let retry_sink = emitter.clone();
        let on_event = move |event: StreamEvent<'_>| {
            if let StreamEvent::Retrying { attempt, error } = event {
                retry_sink.emit(EventMsg::ModelRetry {
                    attempt,
                    error: error.to_string(),
                });
            }
        };
        let response = self
            .model
            .complete(&request, &on_event)
            .await
            .map_err(|e| format!("the model could not summarize ({e})"))?;
        self.account(&response, emitter)
            .await
            .map_err(|e| e.to_string())?;
        let summary = response.content.trim().to_owned();
        if summary.is_empty() {
            return Err("the model returned an empty summary".into());
        }
        let tokens = self.meter.tokens_of(summary.len());
        if tokens > window / 4 {
            return Err(format!(
                "the summary ({tokens} tokens) is too long for a {window}-token window"
            ));
        }
        Ok(summary)
    }

    /// Appends the replaced messages to `memory/YYYY-MM-DD.md` in the workspace and saves
    /// them to the agent's long-term memory.
    async fn archive(&self, text: &str, from_seq: u64, to_seq: u64) -> Result<(), String> {
        let heading = format!(
            "## Session {} — messages {from_seq}–{to_seq} (archived {})\n\n",
            self.id,
            reef_store::timestamp_ago(std::time::Duration::ZERO)
        );
        let entry = format!("{heading}{text}\n\n");
        crate::archive::append_to_day_file(&self.opts.workspace, &entry)?;
        let Some(memory) = &self.memory else {
            return Ok(());
        };
        memory
            .save(reef_store::NewMemory {
                namespace: format!("agent:{}", self.opts.agent),
                text: format!("{heading}{text}"),
                tags: vec!["archive".into()],
                source: Some(format!("session {} messages {from_seq}-{to_seq}", self.id)),
            })
            .await
            .map_err(|e| format!("long-term memory: {e}"))?;
        Ok(())
    }

    /// Tokens every request takes besides the history: the system prompt and the tools.
    fn fixed_tokens(&self) -> u64 {
        let request = ModelRequest {
            messages: vec![self.system_message()],
            tools: self.offered_tools(),
            max_output_tokens: None,
            ..Default::default()
        };
        self.meter.tokens_of(meter::request_chars(&request))
    }

    fn held_tokens(&self, held: &Held) -> u64 {
        self.meter.tokens_of(meter::message_chars(&held.message))
    }
}

/// The messages as plain text for the summarizer or the archive, each cut to `quote` chars.
fn transcript(held: &[Held], quote: usize) -> String {
    let mut out = String::new();
    for h in held {
        let (who, text) = match &h.message {
            Message::System { content } => ("system", content.clone()),
            Message::User { content } => ("user", content.clone()),
            Message::Assistant {
                content,
                tool_calls,
            } => {
                let mut text = content.clone();
                for call in tool_calls {
                    text.push_str(&format!("\n[calls {}({})]", call.name, call.arguments));
                }
                ("assistant", text)
            }
            Message::Tool {
                name,
                content,
                is_error,
                ..
            } => (
                if *is_error { "tool error" } else { "tool" },
                format!("[{name}] {content}"),
            ),
        };
        out.push_str(&format!("{who}: {}\n", cut_middle(text.trim(), quote)));
    }
    out
}

/// `text` with its middle replaced by a marker when it is longer than `max` characters.
fn cut_middle(text: &str, max: usize) -> String {
    let count = text.chars().count();
    if count <= max {
        return text.to_owned();
    }
    let half = max / 2;
    let head: String = text.chars().take(half).collect();
    let tail: String = text.chars().skip(count - half).collect();
    format!("{head} […{} characters…] {tail}", count - 2 * half)
}

#[cfg(test)]
mod tests {
    use super::cut_middle;

    #[test]
    fn long_quotes_keep_their_ends() {
        assert_eq!(cut_middle("short", 10), "short");
        let cut = cut_middle(&"ab".repeat(50), 10);
        assert!(
            cut.starts_with("ababa [") && cut.ends_with("] babab"),
            "{cut}"
        );
        assert!(cut.contains("90 characters"), "{cut}");
    }
}
