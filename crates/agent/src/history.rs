//! The history a session sends, as held in memory: stored messages, and the summaries and
//! markers that replace ranges of them after a compaction; rebuilt from the store on resume;
//! and where a compaction may cut it.

use reef_core::Message;
use reef_store::{CompactionRecord, StoredMessage};
use std::ops::Range;

/// One item of the history: a stored message (`first_seq == last_seq`), or the summary or
/// marker standing for stored messages `first_seq..=last_seq`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Held {
    pub first_seq: u64,
    pub last_seq: u64,
    pub message: Message,
    /// Written by reef in place of a range, not by the user, the model or a tool.
    pub synthetic: bool,
}

impl Held {
    pub fn stored(seq: u64, message: Message) -> Held {
        Held {
            first_seq: seq,
            last_seq: seq,
            message,
            synthetic: false,
        }
    }

    /// A user turn starts here.
    fn starts_turn(&self) -> bool {
        !self.synthetic && matches!(self.message, Message::User { .. })
    }

    /// A compaction may keep everything from here on: a turn or a model round starts (a
    /// round's tool results follow its assistant message, so they stay together).
    fn is_cut_point(&self) -> bool {
        !self.synthetic
            && matches!(
                self.message,
                Message::User { .. } | Message::Assistant { .. }
            )
    }
}

/// The text standing for a compacted range: the summary, or (`None`) a marker saying the
/// messages were dropped.
pub(crate) fn replacement(from_seq: u64, to_seq: u64, summary: Option<&str>) -> Message {
    let (range, verb) = if from_seq == to_seq {
        (format!("message {from_seq}"), "was")
    } else {
        (format!("messages {from_seq}–{to_seq}"), "were")
    };
    Message::user(match summary {
        Some(summary) => format!(
            "[Summary of the earlier conversation ({range}), written by reef when the context \
             filled up]\n{}",
            summary.trim()
        ),
        None => format!(
            "[{range} of this conversation {verb} removed from the context to fit the model's \
             window; reef keeps the full transcript]"
        ),
    })
}

/// The history of a stored session: its messages with each recorded compaction applied in
/// order (a later compaction covering an earlier one replaces it).
pub(crate) fn rebuild(messages: Vec<StoredMessage>, compactions: &[CompactionRecord]) -> Vec<Held> {
    let mut held: Vec<Held> = messages
        .into_iter()
        .filter(|m| !matches!(m.message, Message::System { .. }))
        .map(|m| Held::stored(m.seq, m.message))
        .collect();
    for c in compactions {
        let inside = |h: &Held| h.first_seq >= c.from_seq && h.last_seq <= c.to_seq;
        let Some(start) = held.iter().position(inside) else {
            continue;
        };
        let end = start + held[start..].iter().take_while(|h| inside(h)).count();
        replace(
            &mut held,
            start..end,
            replacement(c.from_seq, c.to_seq, c.summary.as_deref()),
        );
    }
    held
}

/// Replaces `range` of `held` by one synthetic item standing for the same stored messages.
pub(crate) fn replace(held: &mut Vec<Held>, range: Range<usize>, message: Message) {
    let first_seq = held[range.start].first_seq;
    let last_seq = held[range.end - 1].last_seq;
    held.splice(
        range,
        [Held {
            first_seq,
            last_seq,
            message,
            synthetic: true,
        }],
    );
}

/// Which part of the history a compaction replaces: everything between the head (the first
/// user message) and a tail of at most `keep_turns` recent turns that fits in `tail_budget`
/// tokens (`size` gives an item's tokens). The tail always keeps at least the last round, so
/// the task in progress stays; `None` when nothing can be replaced.
pub(crate) fn middle(
    history: &[Held],
    keep_turns: usize,
    tail_budget: u64,
    size: impl Fn(&Held) -> u64,
) -> Option<Range<usize>> {
    let head = usize::from(history.first().is_some_and(Held::starts_turn));
    let cuts: Vec<usize> = (head..history.len())
        .filter(|&i| history[i].is_cut_point())
        .collect();
    let turns: Vec<usize> = cuts
        .iter()
        .copied()
        .filter(|&i| history[i].starts_turn())
        .collect();
    // The oldest turn the tail may keep, else the latest round.
    let mut start = match turns.len().checked_sub(keep_turns.max(1)) {
        Some(first) => turns[first],
        None => *turns.first().or(cuts.first())?,
    };
    let tail_size = |from: usize| history[from..].iter().map(&size).sum::<u64>();
    let later: Vec<usize> = cuts.iter().copied().filter(|&c| c > start).collect();
    for cut in later {
        if tail_size(start) <= tail_budget {
            break;
        }
        start = cut;
    }
    // Keeping the head alone as the middle gains nothing; neither does replacing only a
    // summary by another.
    let range = head..start;
    let gains = range.len() > 1 || range.clone().any(|i| !history[i].synthetic);
    (!range.is_empty() && gains).then_some(range)
}

#[cfg(test)]
mod tests {
    use super::*;
    use reef_core::{ToolCall, ToolCallId};

    fn user(seq: u64) -> Held {
        Held::stored(seq, Message::user(format!("u{seq}")))
    }

    fn answer(seq: u64) -> Held {
        Held::stored(
            seq,
            Message::Assistant {
                content: format!("a{seq}"),
                tool_calls: vec![],
            },
        )
    }

    fn call(seq: u64) -> Held {
        Held::stored(
            seq,
            Message::Assistant {
                content: String::new(),
                tool_calls: vec![ToolCall {
                    id: ToolCallId::from(format!("c{seq}").as_str()),
                    name: "shell".into(),
                    arguments: "{}".into(),
                }],
            },
        )
    }

    fn result(seq: u64) -> Held {
        Held::stored(
            seq,
            Message::Tool {
                call_id: ToolCallId::from(format!("c{}", seq - 1).as_str()),
                name: "shell".into(),
                content: "out".into(),
                is_error: false,
            },
        )
    }

    #[test]
    fn the_head_and_recent_turns_stay() {
        let history: Vec<Held> = (1..=10)
            .map(|s| if s % 2 == 1 { user(s) } else { answer(s) })
            .collect();
        // Five turns; keep two: the middle is the first answer and turns 2..=3.
        assert_eq!(middle(&history, 2, u64::MAX, |_| 1), Some(1..6));
        // No more turns than kept: only what follows the head in its own turn.
        assert_eq!(middle(&history, 5, u64::MAX, |_| 1), Some(1..2));
        // A middle that is only an earlier summary gains nothing.
        let mut summarized = history.clone();
        replace(&mut summarized, 1..6, Message::user("summary"));
        assert_eq!(middle(&summarized, 2, u64::MAX, |_| 1), None);
    }

    #[test]
    fn a_tail_over_budget_shrinks_to_the_last_round_and_keeps_calls_with_results() {
        // One long turn: user, then three rounds of call + result.
        let history = vec![
            user(1),
            answer(2),
            user(3),
            call(4),
            result(5),
            call(6),
            result(7),
            call(8),
            result(9),
        ];
        let range = middle(&history, 4, 2, |_| 1).unwrap();
        assert_eq!(range, 1..7, "the tail is the last call and its result");
        assert!(matches!(
            history[range.end].message,
            Message::Assistant { .. }
        ));
    }

    #[test]
    fn rebuilding_applies_nested_compactions() {
        let messages: Vec<StoredMessage> = (1..=8)
            .map(|seq| StoredMessage {
                seq,
                created_at: String::new(),
                message: Message::user(format!("m{seq}")),
            })
            .collect();
        let record = |id, from_seq, to_seq, summary: Option<&str>| CompactionRecord {
            id,
            session_id: reef_core::SessionId::from("s"),
            after_seq: 8,
            from_seq,
            to_seq,
            strategy: reef_core::CompactionStrategy::Summarize,
            trigger: reef_core::CompactionTrigger::Threshold,
            summary: summary.map(str::to_owned),
            tokens_before: 0,
            tokens_after: 0,
            window: 0,
            created_at: String::new(),
        };
        let held = rebuild(
            messages,
            &[
                record(1, 2, 3, Some("first")),
                record(2, 2, 5, Some("second")),
            ],
        );
        let texts: Vec<&str> = held.iter().map(|h| h.message.content()).collect();
        assert_eq!(texts.len(), 5, "{texts:?}");
        assert_eq!(texts[0], "m1");
        assert!(texts[1].contains("messages 2–5") && texts[1].ends_with("second"));
        assert_eq!(&texts[2..], ["m6", "m7", "m8"]);
        assert_eq!((held[1].first_seq, held[1].last_seq), (2, 5));
    }
}
