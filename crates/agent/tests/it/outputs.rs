//! What leaves the engine: saved large outputs stay in the workspace, retried streams are marked.

use crate::{options, session, session_with_retries, until};
use reef_core::{EventMsg, Op, TurnOutcome};
use reef_store::Store;
use reef_test_support::{MockLlm, MockReply};
use serde_json::json;
use sha2::Digest as _;

#[tokio::test]
async fn a_hostile_tool_name_cannot_place_saved_output_outside_the_workspace() {
    let mock = MockLlm::start(vec![
        MockReply::tool_call("../../../../../../escaped", json!({})),
        MockReply::text("ok"),
    ])
    .await;
    let root = tempfile::tempdir().unwrap();
    let workspace = root.path().join("a/b/c/work");
    std::fs::create_dir_all(&workspace).unwrap();
    let store = Store::open_in_memory().unwrap();
    let mut opts = options(&workspace);
    opts.inline_output_chars = 20; // the unknown-tool error is longer: it gets saved
    let mut handle = reef_agent::spawn(session(&mock, &store, opts).await);
    handle.submit(Op::UserInput { text: "go".into() });
    let events = until(&mut handle, |m| matches!(m, EventMsg::TurnEnded { .. })).await;
    let saved = events
        .iter()
        .find_map(|e| match &e.msg {
            EventMsg::ToolCallEnd { saved_to, .. } => saved_to.clone(),
            _ => None,
        })
        .expect("the long error output was saved");
    assert!(saved.starts_with(".reef/tool-outputs/"), "{saved}");
    assert!(!saved.contains(".."), "{saved}");
    let path = workspace.join(&saved);
    assert!(path.is_file());
    assert!(
        path.canonicalize()
            .unwrap()
            .starts_with(workspace.canonicalize().unwrap())
    );
    let stray: Vec<_> = walk(root.path())
        .into_iter()
        .filter(|p| p.to_string_lossy().contains("escaped") && !p.starts_with(&workspace))
        .collect();
    assert!(stray.is_empty(), "files outside the workspace: {stray:?}");
}

/// Runs one `read_file` of a 3000-character file in `workspace` (over the 2000-character
/// inline limit) and returns where the output was saved and what the model was sent back.
async fn read_a_large_file(workspace: &std::path::Path) -> (Option<String>, String) {
    std::fs::write(workspace.join("big.txt"), "0123456789".repeat(300)).unwrap();
    let mock = MockLlm::start(vec![
        MockReply::tool_call("read_file", json!({"path": "big.txt"})),
        MockReply::text("ok"),
    ])
    .await;
    let store = Store::open_in_memory().unwrap();
    let mut handle = reef_agent::spawn(session(&mock, &store, options(workspace)).await);
    handle.submit(Op::UserInput { text: "go".into() });
    let events = until(&mut handle, |m| matches!(m, EventMsg::TurnEnded { .. })).await;
    let saved = events.iter().find_map(|e| match &e.msg {
        EventMsg::ToolCallEnd { saved_to, .. } => Some(saved_to.clone()),
        _ => None,
    });
    let sent = mock.requests()[1].tool_results().last().cloned().unwrap();
    // The call is in the audit log, with the hash of its arguments.
    let arguments = events
        .iter()
        .find_map(|e| match &e.msg {
            EventMsg::ToolCallBegin { arguments, .. } => Some(arguments.clone()),
            _ => None,
        })
        .unwrap();
    let audited = store
        .audit_records(reef_store::AuditFilter {
            kind: Some("tool.call".into()),
            limit: 10,
            ..reef_store::AuditFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(audited.len(), 1);
    assert_eq!(audited[0].agent.as_deref(), Some("main"));
    assert_eq!(audited[0].data["name"], "read_file");
    let digest: String = sha2::Sha256::digest(arguments.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(audited[0].data["arguments_sha256"], digest);
    assert_eq!(audited[0].data["arguments_bytes"], arguments.len());
    (saved.expect("a tool call ended"), sent)
}

#[tokio::test]
async fn a_large_output_is_saved_and_the_model_is_sent_its_path() {
    let dir = tempfile::tempdir().unwrap();
    let (saved, sent) = read_a_large_file(dir.path()).await;
    let saved = saved.expect("the output was saved");
    assert!(saved.starts_with(".reef/tool-outputs/"), "{saved}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join(&saved)).unwrap(),
        "0123456789".repeat(300)
    );
    assert!(
        sent.contains(&format!(
            "the full output was saved to {saved} in the workspace"
        )),
        "{sent}"
    );
    assert!(
        sent.chars().count() < 2000,
        "a preview, not the whole output"
    );
}

#[tokio::test]
async fn a_planted_reef_link_gets_the_truncated_output_inline_and_nothing_outside() {
    let root = tempfile::tempdir().unwrap();
    let workspace = root.path().join("work");
    let outside = root.path().join("host-dir");
    std::fs::create_dir_all(&workspace).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::os::unix::fs::symlink(&outside, workspace.join(".reef")).unwrap();
    // Positive control: writing through the link would land outside.
    assert!(workspace.join(".reef").canonicalize().unwrap() == outside.canonicalize().unwrap());

    let (saved, sent) = read_a_large_file(&workspace).await;
    assert_eq!(saved, None);
    let entries: Vec<_> = std::fs::read_dir(&outside).unwrap().collect();
    assert!(entries.is_empty(), "written outside: {entries:?}");
    assert!(
        sent.starts_with("<untrusted source=\"file read_file ")
            && sent.contains(&format!(">\n{}", "0123456789".repeat(200))),
        "the head of the output, fenced: {sent}"
    );
    assert!(
        sent.contains("output truncated at 2000 characters; saving the full output failed"),
        "{sent}"
    );
    assert!(sent.contains("symbolic link .reef"), "{sent}");
}

#[tokio::test]
async fn a_stream_retried_mid_way_is_announced_and_its_text_is_not_doubled() {
    let mock = MockLlm::start(vec![
        MockReply::StreamCut("Half an ans".into()),
        MockReply::text("The whole answer."),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_in_memory().unwrap();
    let mut handle =
        reef_agent::spawn(session_with_retries(&mock, &store, options(dir.path()), 2).await);
    handle.submit(Op::UserInput { text: "go".into() });
    let events = until(&mut handle, |m| matches!(m, EventMsg::TurnEnded { .. })).await;
    let retry_at = events
        .iter()
        .position(|e| matches!(e.msg, EventMsg::ModelRetry { attempt: 1, .. }))
        .expect("a model_retry event");
    let before: String = deltas(&events[..retry_at]);
    let after: String = deltas(&events[retry_at..]);
    assert_eq!(
        before, "Half an ans",
        "the failed attempt's text came first"
    );
    assert_eq!(
        after, "The whole answer.",
        "after the retry marker, only the new attempt"
    );
    assert!(matches!(
        events.last().map(|e| &e.msg),
        Some(EventMsg::TurnEnded { outcome: TurnOutcome::Completed { text }, .. }) if text == "The whole answer."
    ));
}

fn deltas(events: &[reef_core::Event]) -> String {
    events
        .iter()
        .filter_map(|e| match &e.msg {
            EventMsg::ModelDelta { text } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(walk(&path));
        }
        out.push(path);
    }
    out
}
