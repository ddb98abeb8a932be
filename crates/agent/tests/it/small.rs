//! The small-model profile, seen from the model's side: what it is sent (a compact prompt, few
//! tools, a required call after an answer given without looking, hints after failed calls)
//! with tools running in the real default sandbox.

use crate::{options, session, until};
use reef_core::{AgentProfile, Event, EventMsg, Op, TurnOutcome};
use reef_store::Store;
use reef_test_support::{MockLlm, MockReply, RecordedRequest};
use serde_json::json;

/// Runs one turn of `input` under `profile` against `script`; returns the requests the model
/// received, the turn's events and its outcome.
async fn turn(
    workspace: &std::path::Path,
    profile: AgentProfile,
    input: &str,
    script: Vec<MockReply>,
) -> (Vec<RecordedRequest>, Vec<Event>, TurnOutcome) {
    let mock = MockLlm::start(script).await;
    let store = Store::open_in_memory().unwrap();
    let mut opts = options(workspace);
    opts.profile = profile;
    let mut handle = reef_agent::spawn(session(&mock, &store, opts).await);
    handle.submit(Op::UserInput { text: input.into() });
    let events = until(&mut handle, |m| matches!(m, EventMsg::TurnEnded { .. })).await;
    let outcome = events
        .iter()
        .find_map(|e| match &e.msg {
            EventMsg::TurnEnded { outcome, .. } => Some(outcome.clone()),
            _ => None,
        })
        .unwrap();
    (mock.requests(), events, outcome)
}

fn completed(text: &str) -> TurnOutcome {
    TurnOutcome::Completed { text: text.into() }
}

#[tokio::test]
async fn an_answer_given_without_looking_is_sent_back_with_a_call_required() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("data.csv"), "a\nb\nc\n").unwrap();
    let (requests, events, outcome) = turn(
        dir.path(),
        AgentProfile::Small,
        "How many lines does data.csv have?",
        vec![
            MockReply::text("10"),
            MockReply::tool_call("shell", json!({"command": "wc -l data.csv"})),
            MockReply::text("data.csv has 3 lines."),
        ],
    )
    .await;
    assert_eq!(outcome, completed("data.csv has 3 lines."));
    assert_eq!(requests.len(), 3);

    // The compact prompt with its worked example, and only the tools a small model needs.
    let first = &requests[0];
    let system = first.system_text();
    assert!(system.contains("Never guess what a file holds"), "{system}");
    assert!(
        system.contains(r#""command": "wc -l notes.txt""#),
        "{system}"
    );
    assert!(
        !system.contains("MEMORY.md"),
        "no notes section without notes"
    );
    assert_eq!(
        first.tool_names(),
        ["edit_file", "read_file", "shell", "write_file"]
    );
    let shell = first.body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "shell")
        .unwrap();
    assert!(
        shell["function"]["description"]
            .as_str()
            .unwrap()
            .contains("renaming or moving (mv OLD NEW)")
    );
    assert_eq!(
        shell["function"]["parameters"]["required"],
        json!(["command"])
    );
    assert!(first.body.get("tool_choice").is_none());
    assert_eq!(
        first.body["parallel_tool_calls"], false,
        "one call per reply"
    );

    // The bare "10" is sent back once, and that request must call a tool.
    let second = &requests[1];
    let note = second.last_user_text().unwrap();
    assert!(
        note.starts_with("[reef] You answered without looking"),
        "{note}"
    );
    assert_eq!(second.body["tool_choice"], "required");
    assert!(events.iter().any(|e| matches!(&e.msg,
        EventMsg::Warning { message } if message.contains("sent back"))));

    // The real command ran in the sandbox and its output reached the model.
    let third = &requests[2];
    let results = third.tool_results();
    assert!(results[0].contains("3 data.csv"), "{results:?}");
    assert!(
        third.body.get("tool_choice").is_none(),
        "required once only"
    );
}

#[tokio::test]
async fn a_failed_call_gets_a_hint_and_a_claimed_success_is_sent_back() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.md"), "- buy milk\n").unwrap();
    let (requests, _, outcome) = turn(
        dir.path(),
        AgentProfile::Small,
        "Rename notes.md to todo.md.",
        vec![
            MockReply::tool_call(
                "edit_file",
                json!({"path": "notes.md", "old_string": "notes.md", "new_string": "todo.md"}),
            ),
            MockReply::text("Renamed notes.md to todo.md."),
            MockReply::tool_call("shell", json!({"command": "mv notes.md todo.md"})),
            MockReply::text("Renamed notes.md to todo.md."),
        ],
    )
    .await;
    assert_eq!(outcome, completed("Renamed notes.md to todo.md."));
    let error = &requests[1].tool_results()[0];
    assert!(
        error.contains("Hint: edit_file only replaces text inside a file"),
        "{error}"
    );
    let note = requests[2].last_user_text().unwrap();
    assert!(note.starts_with("[reef] Your last call failed"), "{note}");
    assert!(note.contains("It said: old_string not found"), "{note}");
    assert_eq!(requests[2].body["tool_choice"], "required");
    assert!(dir.path().join("todo.md").is_file());
    assert!(!dir.path().join("notes.md").exists());
}

#[tokio::test]
async fn a_number_no_result_shows_is_sent_back_once_then_accepted() {
    // The mock does not have to obey the required call: the second answer is taken as it is.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("n.txt"), "17\n4\n").unwrap();
    let (requests, _, outcome) = turn(
        dir.path(),
        AgentProfile::Small,
        "What is the sum of the numbers in n.txt?",
        vec![
            MockReply::tool_call("read_file", json!({"path": "n.txt"})),
            MockReply::text("The sum is 22."),
            MockReply::text("The sum is 22."),
        ],
    )
    .await;
    assert_eq!(requests.len(), 3, "sent back once, not twice");
    let note = requests[2].last_user_text().unwrap();
    assert!(
        note.contains("No command's output shows the number 22 of your answer"),
        "{note}"
    );
    assert_eq!(
        requests[2].body["tool_choice"], "required",
        "the note asks for a command that prints the number"
    );
    assert_eq!(outcome, completed("The sum is 22."));
}

#[tokio::test]
async fn a_blind_overwrite_is_refused_once_and_the_file_kept() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("shopping.txt"), "bread\nmilk\n").unwrap();
    let write = json!({"path": "shopping.txt", "content": "eggs\n"});
    let (requests, events, outcome) = turn(
        dir.path(),
        AgentProfile::Small,
        "Add the line 'eggs' at the end of shopping.txt.",
        vec![
            MockReply::tool_call("write_file", write.clone()),
            MockReply::tool_call("shell", json!({"command": "echo 'eggs' >> shopping.txt"})),
            MockReply::text("Added eggs."),
        ],
    )
    .await;
    assert_eq!(outcome, completed("Added eggs."));
    let refusal = &requests[1].tool_results()[0];
    assert!(
        refusal.starts_with("Not written: shopping.txt already has text you have not read"),
        "{refusal}"
    );
    assert!(
        !refusal.contains("Hint:"),
        "a refusal carries no generic hint"
    );
    let ended = events
        .iter()
        .filter(|e| matches!(&e.msg, EventMsg::ToolCallEnd { is_error: true, .. }))
        .count();
    assert_eq!(ended, 1, "the refused call ends as an error");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("shopping.txt")).unwrap(),
        "bread\nmilk\neggs\n",
        "the refused write never ran"
    );

    // The same write a second time is the model's choice, and runs.
    let (requests, _, _) = turn(
        dir.path(),
        AgentProfile::Small,
        "Replace shopping.txt with just eggs.",
        vec![
            MockReply::tool_call("write_file", write.clone()),
            MockReply::tool_call("write_file", write),
            MockReply::text("Done."),
        ],
    )
    .await;
    assert!(requests[1].tool_results()[0].starts_with("Not written"));
    let results = requests[2].tool_results();
    assert!(
        !results.last().unwrap().starts_with("Not written"),
        "{results:?}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("shopping.txt")).unwrap(),
        "eggs\n"
    );
}

#[tokio::test]
async fn a_change_claimed_but_not_made_is_sent_back() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("emails.txt"), "a@x\nb@y\na@x\n").unwrap();
    let (requests, _, outcome) = turn(
        dir.path(),
        AgentProfile::Small,
        "Remove the duplicate lines from emails.txt.",
        vec![
            MockReply::tool_call("shell", json!({"command": "sort emails.txt | uniq"})),
            MockReply::text("The duplicates have been removed."),
            MockReply::tool_call(
                "shell",
                json!({"command": "awk '!seen[$0]++' emails.txt > t && mv t emails.txt"}),
            ),
            MockReply::text("Removed."),
        ],
    )
    .await;
    assert_eq!(outcome, completed("Removed."));
    let note = requests[2].last_user_text().unwrap();
    assert!(note.starts_with("[reef] Nothing has changed yet"), "{note}");
    assert_eq!(requests[2].body["tool_choice"], "required");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("emails.txt")).unwrap(),
        "a@x\nb@y\n"
    );
}

#[tokio::test]
async fn the_standard_profile_offers_every_tool_and_takes_the_first_answer() {
    let dir = tempfile::tempdir().unwrap();
    // Auto with an HTTP provider is the standard profile.
    let (requests, _, outcome) = turn(
        dir.path(),
        AgentProfile::Auto,
        "How many lines does data.csv have?",
        vec![MockReply::text("10")],
    )
    .await;
    assert_eq!(outcome, completed("10"));
    assert_eq!(requests.len(), 1);
    let names = requests[0].tool_names();
    assert!(names.contains(&"list_dir".to_owned()), "{names:?}");
    assert!(!requests[0].system_text().contains("Never guess"));
    assert!(requests[0].body.get("parallel_tool_calls").is_none());
}

#[tokio::test]
async fn calls_written_as_text_run_one_per_reply() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "alpha\n").unwrap();
    let call = r#"<tool_call>{"name": "shell", "arguments": {"command": "cat a.txt"}}</tool_call>"#;
    let (requests, events, outcome) = turn(
        dir.path(),
        AgentProfile::Small,
        "What does a.txt say?",
        vec![
            MockReply::text(format!("{call}\n{call}\n{call}")),
            MockReply::text("a.txt says alpha."),
        ],
    )
    .await;
    assert_eq!(outcome, completed("a.txt says alpha."));
    let results = requests[1].tool_results();
    assert_eq!(results.len(), 1, "{results:?}");
    assert!(results[0].contains("alpha"), "{results:?}");
    assert!(events.iter().any(|e| matches!(&e.msg,
        EventMsg::Warning { message } if message.ends_with("wrote 3 tool call(s) as text; reef parsed them and ran 1"))));
}

#[tokio::test]
async fn a_model_offered_no_tools_is_not_sent_back() {
    let dir = tempfile::tempdir().unwrap();
    let mock = MockLlm::start(vec![MockReply::text("10")]).await;
    let store = Store::open_in_memory().unwrap();
    let mut opts = options(dir.path());
    opts.profile = AgentProfile::Small;
    let model = crate::mock_model(&mock, 0, 8192);
    let tools = std::sync::Arc::new(reef_agent::ToolRegistry::default());
    let session = reef_agent::Session::create(model, tools, store, opts)
        .await
        .unwrap();
    let mut handle = reef_agent::spawn(session);
    handle.submit(Op::UserInput {
        text: "How many lines does data.csv have?".into(),
    });
    let events = until(&mut handle, |m| matches!(m, EventMsg::TurnEnded { .. })).await;
    assert!(events.iter().any(|e| matches!(&e.msg,
        EventMsg::TurnEnded { outcome, .. } if *outcome == completed("10"))));
    assert_eq!(mock.requests().len(), 1, "it could not act on a note");
}
