//! Long conversations stay inside the model's window: compaction by summary, truncation and
//! archive, the retry after a provider's context-length error, a message too large on its
//! own, manual compaction, steering, and resuming a compacted session.

use crate::{options, until};
use reef_agent::{Session, SessionOptions};
use reef_core::{CompactionStrategy, EventMsg, Op, TurnOutcome};
use reef_store::Store;
use reef_test_support::{MockLlm, MockReply, RecordedRequest};
use std::path::Path;
use std::sync::Arc;

/// Marks the summarizer's request (its system prompt).
const SUMMARIZER: &str = "You compact the history";

fn is_summary_request(r: &RecordedRequest) -> bool {
    r.system_text().contains(SUMMARIZER)
}

/// A mock that answers the summarizer with a summary carrying the code word, and every other
/// request with "ok"; when `limit` is set it refuses prompts over that many tokens with
/// OpenAI's context-length error, as a provider does.
fn mock(limit: Option<u64>) -> MockLlm {
    MockLlm::start_responder_blocking(Arc::new(move |r: &RecordedRequest| {
        if let Some(limit) = limit
            && r.prompt_tokens() > limit
        {
            return MockReply::status(
                400,
                r#"{"error":{"message":"This model's maximum context length is exceeded","code":"context_length_exceeded"}}"#,
            );
        }
        if is_summary_request(r) {
            MockReply::text("Earlier: the user said the code word is PELICAN.")
        } else {
            MockReply::text("ok")
        }
    }))
}

async fn session_with_window(
    mock: &MockLlm,
    store: &Store,
    opts: SessionOptions,
    window: u32,
) -> Session {
    let model = crate::mock_model(mock, 0, window);
    let tools = Arc::new(reef_tools::ToolRegistry::default());
    Session::create(model, tools, store.clone(), opts)
        .await
        .unwrap()
}

/// About 500 tokens of text, numbered.
fn filler(n: usize) -> String {
    format!("message {n}: {}", "lorem ipsum dolor sit amet ".repeat(74))
}

/// Sends `inputs` as turns and returns every event.
async fn converse(session: Session, inputs: Vec<String>) -> (Session, Vec<EventMsg>) {
    let mut handle = reef_agent::spawn(session);
    let mut events = Vec::new();
    for input in inputs {
        handle.submit(Op::UserInput { text: input });
        let seen = until(&mut handle, |m| matches!(m, EventMsg::TurnEnded { .. })).await;
        events.extend(seen.into_iter().map(|e| e.msg));
    }
    handle.submit(Op::Shutdown);
    until(&mut handle, |m| matches!(m, EventMsg::ShutdownComplete)).await;
    (handle.join().await.unwrap(), events)
}

fn outcomes(events: &[EventMsg]) -> Vec<TurnOutcome> {
    events
        .iter()
        .filter_map(|m| match m {
            EventMsg::TurnEnded { outcome, .. } => Some(outcome.clone()),
            _ => None,
        })
        .collect()
}

fn assert_all_completed(events: &[EventMsg]) {
    let outcomes = outcomes(events);
    assert!(
        outcomes
            .iter()
            .all(|o| matches!(o, TurnOutcome::Completed { .. })),
        "{outcomes:?}"
    );
}

fn store_in(dir: &Path) -> Store {
    Store::open(&dir.join("reef.db")).unwrap()
}

#[tokio::test]
async fn a_long_conversation_is_summarized_and_never_passes_the_window() {
    let mock = mock(None);
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(dir.path());
    let session = session_with_window(&mock, &store, options(dir.path()), 4096).await;
    let mut inputs = vec!["Remember this: the code word is PELICAN.".to_owned()];
    inputs.extend((2..=40).map(filler));
    let (session, events) = converse(session, inputs).await;

    assert_all_completed(&events);
    let requests = mock.requests();
    for r in &requests {
        assert!(r.prompt_tokens() <= 4096, "{} tokens", r.prompt_tokens());
    }
    let summaries: Vec<&RecordedRequest> =
        requests.iter().filter(|r| is_summary_request(r)).collect();
    assert!(!summaries.is_empty(), "no summary was asked for");
    // The summarizer is sent the middle of the conversation, not the recent turns.
    let first = summaries[0].last_user_text().unwrap();
    assert!(first.contains("message 2:"), "{first}");
    assert!(!first.contains("message 40:"));

    let last = requests
        .iter()
        .rev()
        .find(|r| !is_summary_request(r))
        .unwrap();
    let sent = serde_json::to_string(&last.body).unwrap();
    assert!(sent.contains("the code word is PELICAN"), "the head stays");
    assert!(
        sent.contains("Summary of the earlier conversation"),
        "{sent}"
    );
    assert!(sent.contains("message 40:"));
    assert!(!sent.contains("message 3:"), "the middle was replaced");

    let compacted: Vec<&EventMsg> = events
        .iter()
        .filter(|m| matches!(m, EventMsg::ContextCompacted { .. }))
        .collect();
    let stored = store.compactions(session.id()).await.unwrap();
    assert_eq!(stored.len(), compacted.len());
    assert!(
        stored
            .iter()
            .all(|c| c.strategy == CompactionStrategy::Summarize
                && c.tokens_after < c.tokens_before
                && c.summary.as_deref()
                    == Some("Earlier: the user said the code word is PELICAN."))
    );
    // The transcript keeps every message.
    assert_eq!(store.messages(session.id()).await.unwrap().len(), 80);

    // Resuming rebuilds the compacted history, not the whole transcript.
    let resumed = Session::resume(
        session.id().clone(),
        session.model().clone(),
        Arc::new(reef_tools::ToolRegistry::default()),
        store.clone(),
        options(dir.path()),
    )
    .await
    .unwrap();
    assert_eq!(resumed.history(), session.history());
}

#[tokio::test]
async fn a_context_length_error_compacts_once_and_retries() {
    // The provider accepts 2,500 tokens though reef was told the window is 8,192.
    let mock = mock(Some(2500));
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(dir.path());
    let session = session_with_window(&mock, &store, options(dir.path()), 8192).await;
    let (session, events) = converse(session, (1..=12).map(filler).collect()).await;

    assert_all_completed(&events);
    let refused = mock
        .requests()
        .iter()
        .filter(|r| !is_summary_request(r) && r.prompt_tokens() > 2500)
        .count();
    let stored = store.compactions(session.id()).await.unwrap();
    let by_refusal = stored
        .iter()
        .filter(|c| c.trigger == reef_core::CompactionTrigger::ContextLengthError)
        .count();
    assert!(refused > 0, "the limit was never reached");
    assert_eq!(by_refusal, refused, "one compaction per refusal");
    // The refused size is taken as the window from then on: later compactions come before
    // the provider has to refuse again.
    assert_eq!(refused, 1);
    assert!(stored.len() > 1, "{stored:?}");
}

#[tokio::test]
async fn a_message_larger_than_the_window_ends_its_turn_and_the_next_one_works() {
    let mock = mock(None);
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(dir.path());
    let session = session_with_window(&mock, &store, options(dir.path()), 4096).await;
    let huge = format!("HUGE {}", "word ".repeat(8000));
    let (_, events) = converse(session, vec![huge, "small question".into()]).await;
    let outcomes = outcomes(&events);
    match &outcomes[0] {
        TurnOutcome::ContextOverflow { tokens, window } => {
            assert_eq!(*window, 4096);
            assert!(*tokens > 4096, "{tokens}");
        }
        other => panic!("expected an overflow, got {other:?}"),
    }
    assert_eq!(outcomes[1], TurnOutcome::Completed { text: "ok".into() });
    let requests = mock.requests();
    let last = requests.last().unwrap();
    assert_eq!(last.last_user_text().as_deref(), Some("small question"));
    assert!(!serde_json::to_string(&last.body).unwrap().contains("HUGE"));
}

#[tokio::test]
async fn truncation_drops_the_middle_without_asking_the_model() {
    let mock = mock(None);
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(dir.path());
    let mut opts = options(dir.path());
    opts.compaction = CompactionStrategy::Truncate;
    let session = session_with_window(&mock, &store, opts, 4096).await;
    let (session, events) = converse(session, (1..=20).map(filler).collect()).await;
    assert!(mock.requests().iter().all(|r| !is_summary_request(r)));
    assert!(events.iter().any(|m| matches!(
        m,
        EventMsg::ContextCompacted {
            strategy: CompactionStrategy::Truncate,
            summary: None,
            ..
        }
    )));
    let sent = serde_json::to_string(&mock.requests().last().unwrap().body).unwrap();
    assert!(sent.contains("were removed from the context"), "{sent}");
    assert_eq!(store.messages(session.id()).await.unwrap().len(), 40);
}

#[tokio::test]
async fn a_failing_summarizer_falls_back_to_truncation_with_a_warning() {
    let mock = MockLlm::start_responder_blocking(Arc::new(|r: &RecordedRequest| {
        if is_summary_request(r) {
            MockReply::status(500, "summarizer down")
        } else {
            MockReply::text("ok")
        }
    }));
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(dir.path());
    let session = session_with_window(&mock, &store, options(dir.path()), 4096).await;
    let (_, events) = converse(session, (1..=12).map(filler).collect()).await;
    assert_all_completed(&events);
    assert!(events.iter().any(|m| matches!(
        m,
        EventMsg::Warning { message } if message.contains("could not summarize")
    )));
    assert!(events.iter().any(|m| matches!(
        m,
        EventMsg::ContextCompacted {
            strategy: CompactionStrategy::Truncate,
            ..
        }
    )));
}

#[tokio::test]
async fn archive_writes_the_replaced_turns_to_the_workspace() {
    let mock = mock(None);
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(dir.path());
    let mut opts = options(dir.path());
    opts.compaction = CompactionStrategy::Archive;
    let session = session_with_window(&mock, &store, opts, 4096).await;
    converse(session, (1..=12).map(filler).collect()).await;
    let archive = std::fs::read_dir(dir.path().join(reef_agent::ARCHIVE_DIR))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect::<Vec<_>>();
    assert_eq!(archive.len(), 1, "{archive:?}");
    let name = archive[0]
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    assert!(
        name.len() == "2026-01-01.md".len() && name.ends_with(".md"),
        "{name}"
    );
    let text = std::fs::read_to_string(&archive[0]).unwrap();
    assert!(text.contains("user: message 2: lorem"), "{text}");
}

#[tokio::test]
async fn manual_compaction_reports_what_it_did() {
    let mock = mock(None);
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(dir.path());
    let session = session_with_window(&mock, &store, options(dir.path()), 200_000).await;
    let (session, _) = converse(session, (1..=8).map(filler).collect()).await;
    let mut handle = reef_agent::spawn(session);
    handle.submit(Op::Compact);
    let seen = until(&mut handle, |m| {
        matches!(
            m,
            EventMsg::ContextCompacted { .. } | EventMsg::Warning { .. }
        )
    })
    .await;
    match &seen.last().unwrap().msg {
        EventMsg::ContextCompacted {
            trigger,
            from_seq,
            to_seq,
            ..
        } => {
            assert_eq!(*trigger, reef_core::CompactionTrigger::Manual);
            // Head (1) and the last four turns (9..=16) stay.
            assert_eq!((*from_seq, *to_seq), (2, 8));
        }
        other => panic!("{other:?}"),
    }
    // Again: only the summary would be replaced, so there is nothing to do.
    handle.submit(Op::Compact);
    let seen = until(&mut handle, |m| {
        matches!(
            m,
            EventMsg::ContextCompacted { .. } | EventMsg::Warning { .. }
        )
    })
    .await;
    assert!(
        matches!(&seen.last().unwrap().msg, EventMsg::Warning { message } if message.contains("nothing to compact")),
        "{seen:?}"
    );
}

#[tokio::test]
async fn a_new_session_starts_empty_in_the_same_workspace() {
    let mock = mock(None);
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(dir.path());
    let session = session_with_window(&mock, &store, options(dir.path()), 8192).await;
    let first = session.id().clone();
    let (session, _) = converse(session, vec!["hello".into()]).await;
    let mut handle = reef_agent::spawn(session);
    handle.submit(Op::NewSession);
    let seen = until(&mut handle, |m| {
        matches!(m, EventMsg::SessionConfigured { .. })
    })
    .await;
    let EventMsg::SessionConfigured { session_id, .. } = &seen.last().unwrap().msg else {
        unreachable!()
    };
    assert_ne!(session_id, &first);
    handle.submit(Op::UserInput {
        text: "again".into(),
    });
    until(&mut handle, |m| matches!(m, EventMsg::TurnEnded { .. })).await;
    let last = mock.requests().last().unwrap().clone();
    assert_eq!(
        last.message_count(),
        2,
        "system prompt and the new message only"
    );
    assert_eq!(store.messages(session_id).await.unwrap().len(), 2);
    assert_eq!(store.messages(&first).await.unwrap().len(), 2);
}

#[tokio::test]
async fn after_a_refusal_ordinary_messages_fit_and_only_an_oversized_one_overflows() {
    // reef thinks the window is large; the provider refuses past 2,000 tokens.
    let mock = mock(Some(2000));
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(dir.path());
    let session = session_with_window(&mock, &store, options(dir.path()), 200_000).await;
    let mut inputs = vec!["The code word is PELICAN.".to_owned()];
    inputs.extend((2..=7).map(filler));
    inputs.push(format!("HUGE {}", "word ".repeat(2000)));
    inputs.push("small question".into());
    let (_, events) = converse(session, inputs).await;
    let outcomes = outcomes(&events);
    assert!(
        outcomes[..7]
            .iter()
            .all(|o| matches!(o, TurnOutcome::Completed { .. })),
        "{outcomes:?}"
    );
    assert!(
        matches!(outcomes[7], TurnOutcome::ContextOverflow { .. }),
        "{outcomes:?}"
    );
    assert_eq!(outcomes[8], TurnOutcome::Completed { text: "ok".into() });
    let last = mock.requests().last().unwrap().clone();
    let sent = serde_json::to_string(&last.body).unwrap();
    assert!(!sent.contains("HUGE"), "the refused message is left out");
    assert!(sent.contains("PELICAN"), "the head is kept");
}
