//! Memory in a session: the model's memory_save / memory_search / session_search /
//! memory_forget calls and what it is sent back, the refusal to write shared memory without
//! the capability, and `MEMORY.md` in the system prompt (capped, with a request to compact, and
//! never read through a link).

use crate::{options, until};
use reef_agent::{Session, SessionOptions, ToolRegistry};
use reef_core::{EventMsg, Op, WireApi};
use reef_llm::ProviderSettings;
use reef_store::{Chunking, Fusion, Memory, Store};
use reef_test_support::{MockLlm, MockReply};
use serde_json::json;
use std::sync::Arc;

async fn session_with_memory(mock: &MockLlm, store: &Store, opts: SessionOptions) -> Session {
    let model = reef_llm::build_client(ProviderSettings {
        name: "mock".into(),
        wire_api: WireApi::OpenaiChat,
        base_url: mock.base_url(),
        model: "mock-model".into(),
        max_retries: 0,
        ..ProviderSettings::default()
    })
    .unwrap();
    let memory = Memory::new(
        store.clone(),
        Err("no embedder in this test".into()),
        Chunking::default(),
        Fusion::default(),
    );
    let mut registry = ToolRegistry::new();
    reef_agent::add_memory_tools(&mut registry, memory, &opts.agent, false);
    Session::create(model, Arc::new(registry), store.clone(), opts)
        .await
        .unwrap()
}

#[tokio::test]
async fn the_model_saves_searches_and_forgets_memories_and_searches_its_sessions() {
    let mock = MockLlm::start(vec![
        MockReply::tool_call(
            "memory_save",
            json!({"text": "The release train leaves on Tuesdays.", "tags": ["release"]}),
        ),
        MockReply::tool_call(
            "memory_search",
            json!({"query": "release train", "tags": ["release"]}),
        ),
        MockReply::tool_call("session_search", json!({"query": "departure"})),
        MockReply::tool_call(
            "memory_save",
            json!({"text": "for everyone", "shared": true}),
        ),
        MockReply::tool_call("memory_forget", json!({"id": 1})),
        MockReply::tool_call("memory_search", json!({"query": "release train"})),
        MockReply::text("done"),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_in_memory().unwrap();
    let mut opts = options(dir.path());
    opts.agent = "alice".into();
    let mut handle = reef_agent::spawn(session_with_memory(&mock, &store, opts).await);
    handle.submit(Op::UserInput {
        text: "Note the departure day of the release train.".into(),
    });
    until(&mut handle, |m| matches!(m, EventMsg::TurnEnded { .. })).await;

    let requests = mock.requests();
    assert_eq!(requests.len(), 7);
    let names = requests[0].tool_names();
    for tool in [
        "memory_save",
        "memory_search",
        "memory_forget",
        "session_search",
    ] {
        assert!(names.contains(&tool.to_owned()), "{names:?}");
    }
    let result = |i: usize| requests[i].tool_results().last().cloned().unwrap();
    assert!(
        result(1).starts_with("saved memory #1 in agent:alice (1 chunk)"),
        "{}",
        result(1)
    );
    assert!(result(1).contains("keyword search only: no embedder in this test"));
    let found = result(2);
    assert!(
        found.contains("#1 [agent:alice]") && found.contains("tags: release"),
        "{found}"
    );
    assert!(
        found.contains("The release train leaves on Tuesdays."),
        "{found}"
    );
    let said = result(3);
    assert!(
        said.contains("user: Note the [departure] day"),
        "this session's words: {said}"
    );
    assert!(
        result(4).contains("may not write to shared memory"),
        "{}",
        result(4)
    );
    assert_eq!(result(5), "forgot memory #1");
    assert!(result(6).contains("no matching memories"), "{}", result(6));
}

#[tokio::test]
async fn memory_md_is_injected_capped_and_an_overlong_file_asks_for_compaction() {
    let mock = MockLlm::start(vec![MockReply::text("ok"), MockReply::text("ok")]).await;
    let dir = tempfile::tempdir().unwrap();
    let notes = format!("- deploys happen on Fridays\n{}", "x".repeat(300));
    std::fs::write(dir.path().join("MEMORY.md"), &notes).unwrap();
    let store = Store::open_in_memory().unwrap();
    let mut opts = options(dir.path());
    opts.notes_max_chars = 100;
    let mut handle = reef_agent::spawn(session_with_memory(&mock, &store, opts).await);
    handle.submit(Op::UserInput { text: "hi".into() });
    until(&mut handle, |m| matches!(m, EventMsg::TurnEnded { .. })).await;
    let system = mock.requests()[0].system_text();
    assert!(system.contains("- deploys happen on Fridays"), "{system}");
    assert!(system.contains(&notes[..100]));
    assert!(!system.contains(&notes[..101]), "capped at 100 characters");
    assert!(
        system.contains("MEMORY.md is 328 characters, over the limit of 100"),
        "{system}"
    );
    assert!(system.contains("Compact it now"));

    // The agent compacted its notes: the next request shows them whole, with no request.
    std::fs::write(dir.path().join("MEMORY.md"), "- deploys: Fridays\n").unwrap();
    handle.submit(Op::UserInput {
        text: "again".into(),
    });
    until(&mut handle, |m| matches!(m, EventMsg::TurnEnded { .. })).await;
    let system = mock.requests()[1].system_text();
    assert!(system.contains("- deploys: Fridays"), "{system}");
    assert!(!system.contains("Compact"), "{system}");
}

#[tokio::test]
async fn a_memory_md_linked_to_a_host_secret_is_not_sent_to_the_model() {
    let mock = MockLlm::start(vec![MockReply::text("ok")]).await;
    let root = tempfile::tempdir().unwrap();
    let workspace = root.path().join("a/b/work");
    std::fs::create_dir_all(&workspace).unwrap();
    std::fs::write(root.path().join("api-token"), "sk-host-secret-42").unwrap();
    std::os::unix::fs::symlink("../../../api-token", workspace.join("MEMORY.md")).unwrap();
    // Positive control: following the link does reach the secret.
    assert_eq!(
        std::fs::read_to_string(workspace.join("MEMORY.md")).unwrap(),
        "sk-host-secret-42"
    );
    let store = Store::open_in_memory().unwrap();
    let mut opts = options(&workspace);
    opts.notes_max_chars = 1000;
    let mut handle = reef_agent::spawn(session_with_memory(&mock, &store, opts).await);
    handle.submit(Op::UserInput { text: "hi".into() });
    until(&mut handle, |m| matches!(m, EventMsg::TurnEnded { .. })).await;
    let system = mock.requests()[0].system_text();
    assert!(!system.contains("sk-host-secret-42"), "{system}");
    assert!(
        system.contains("Your MEMORY.md was not read because it is a symbolic link"),
        "{system}"
    );
}
