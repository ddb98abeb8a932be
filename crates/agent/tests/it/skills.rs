//! Skills in a session, with the mock model: the model is sent names and descriptions only,
//! loads a skill with `skill`, runs its script with `shell` in the real sandbox (reef's home
//! hidden, the skill's folder read-only), calls a parameter skill as its own tool, and an
//! agent that may write skills creates one in a turn and uses it in the next.

use crate::{mock_model, options, until};
use reef_agent::Session;
use reef_core::{Capabilities, EventMsg, Op};
use reef_sandbox::{HelperCommand, Sandbox, SandboxBackend, SandboxPolicy};
use reef_skills::{SkillSet, SkillSettings};
use reef_store::Store;
use reef_test_support::{MockLlm, MockReply};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn sandbox(hidden: &Path) -> Arc<Sandbox> {
    Arc::new(Sandbox::new(SandboxPolicy {
        backend: SandboxBackend::Landlock,
        helper: Some(HelperCommand {
            program: reef_test_support::sandbox_helper(),
            args: Vec::new(),
        }),
        hidden: vec![hidden.to_path_buf()],
        ..SandboxPolicy::default()
    }))
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

struct Setup {
    _dir: tempfile::TempDir,
    ws: PathBuf,
    home: PathBuf,
}

fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    let home = dir.path().join("home");
    std::fs::create_dir_all(&ws).unwrap();
    write(&home.join("reef.db"), "the store");
    Setup {
        ws,
        home,
        _dir: dir,
    }
}

async fn session_with_skills(mock: &MockLlm, s: &Setup, caps: Capabilities) -> Session {
    let model = mock_model(mock, 0, 128_000);
    let tools = Arc::new(reef_tools::builtin_registry(
        sandbox(&s.home),
        reef_tools::BuiltinConfig::default(),
    ));
    let store = Store::open_in_memory().unwrap();
    let mut session = Session::create(model, tools, store, options(&s.ws))
        .await
        .unwrap();
    let set = SkillSet::new(
        s.home.clone(),
        Vec::new(),
        SkillSettings::default(),
        sandbox(&s.home),
    )
    .with_capabilities(caps);
    session.set_skills(Arc::new(set));
    session
}

#[tokio::test]
async fn the_model_sees_names_loads_a_skill_runs_its_script_and_calls_a_parameter_skill() {
    let s = setup();
    let report = s.home.join("skills/csv-report");
    write(
        &report.join("SKILL.md"),
        "---\nname: csv-report\ndescription: >-\n  Summarise a CSV file: how many\n  rows it has.\nmetadata:\n  author: ops\n---\n# CSV report\n\nRun `sh scripts/count.sh FILE` from the workspace and report the number.\n",
    );
    write(
        &report.join("scripts/count.sh"),
        "echo \"rows: $(wc -l < \"$1\")\"\ncat ../../reef.db 2>/dev/null; cat \"$(dirname \"$0\")/../../../reef.db\" 2>/dev/null || echo store-hidden\n",
    );
    write(
        &s.home.join("skills/weather/SKILL.md"),
        "---\nname: weather\ndescription: Weather for a city.\nparameters:\n  city:\n    type: string\n    description: City name\n---\nUse it.\n",
    );
    write(
        &s.home.join("skills/weather/run.sh"),
        "echo \"sunny in $REEF_ARG_CITY\"\n",
    );
    write(&s.ws.join("data.csv"), "a,b\n1,2\n3,4\n");
    let script = format!("sh {}/scripts/count.sh data.csv", report.display());
    let mock = MockLlm::start(vec![
        MockReply::tool_call("skill", json!({"name": "csv-report"})),
        MockReply::tool_call("shell", json!({"command": script})),
        MockReply::tool_call("weather", json!({"city": "Oslo"})),
        MockReply::text("data.csv has 3 rows; it is sunny in Oslo."),
    ])
    .await;
    let mut handle =
        reef_agent::spawn(session_with_skills(&mock, &s, Capabilities::default()).await);
    handle.submit(Op::UserInput {
        text: "How many rows does data.csv have, and what is the weather in Oslo?".into(),
    });
    let events = until(&mut handle, |m| matches!(m, EventMsg::TurnEnded { .. })).await;
    let ended = events.last().unwrap();
    assert!(
        matches!(&ended.msg, EventMsg::TurnEnded { outcome: reef_core::TurnOutcome::Completed { text }, .. } if text.contains("3 rows")),
        "{ended:?}"
    );

    let requests = mock.requests();
    let first = &requests[0];
    let system = first.system_text();
    assert!(system.contains("## Skills"), "{system}");
    assert!(
        system.contains("- csv-report: Summarise a CSV file: how many rows it has."),
        "{system}"
    );
    assert!(
        system.contains("- weather: Weather for a city."),
        "{system}"
    );
    assert!(
        !system.contains("Run `sh scripts/count.sh"),
        "instructions only on demand: {system}"
    );
    let tools = first.tool_names();
    assert!(
        tools.contains(&"skill".to_owned()) && tools.contains(&"weather".to_owned()),
        "{tools:?}"
    );
    let weather = first.body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "weather")
        .unwrap();
    assert_eq!(
        weather["function"]["parameters"],
        json!({"type": "object", "properties": {"city": {"type": "string", "description": "City name"}}, "required": ["city"], "additionalProperties": false})
    );

    let loaded = requests[1].tool_results().last().cloned().unwrap();
    assert!(loaded.contains("# Skill `csv-report`"), "{loaded}");
    assert!(
        loaded.contains("Run `sh scripts/count.sh FILE`"),
        "{loaded}"
    );
    let ran = requests[2].tool_results().last().cloned().unwrap();
    assert!(ran.starts_with("exit_code: 0"), "{ran}");
    assert!(ran.contains("rows: 3"), "{ran}");
    assert!(
        ran.contains("store-hidden") && !ran.contains("the store"),
        "{ran}"
    );
    let called = requests[3].tool_results().last().cloned().unwrap();
    // A skill's result reaches the model fenced, labelled with its source.
    assert!(
        called.starts_with("<untrusted source=\"skill ") && called.contains(">\nsunny in Oslo\n"),
        "{called}"
    );
}

#[tokio::test]
async fn an_agent_creates_a_skill_in_one_turn_and_uses_it_in_the_next() {
    let s = setup();
    let mock = MockLlm::start(vec![
        MockReply::tool_call(
            "skill_create",
            json!({
                "name": "greet",
                "description": "Greet someone by name.",
                "instructions": "Run scripts/greet.sh NAME with shell.",
                "files": {"scripts/greet.sh": "echo \"hello, $1\"\n"}
            }),
        ),
        MockReply::text("Saved the greet skill."),
        MockReply::tool_call("skill", json!({"name": "greet"})),
        MockReply::tool_call(
            "shell",
            json!({"command": "sh skills/greet/scripts/greet.sh Ada"}),
        ),
        MockReply::text("hello, Ada"),
    ])
    .await;
    let writer = Capabilities {
        skill_write: true,
        ..Capabilities::default()
    };
    let mut handle = reef_agent::spawn(session_with_skills(&mock, &s, writer).await);
    handle.submit(Op::UserInput {
        text: "Make a greeting skill.".into(),
    });
    until(&mut handle, |m| matches!(m, EventMsg::TurnEnded { .. })).await;
    handle.submit(Op::UserInput {
        text: "Greet Ada.".into(),
    });
    until(&mut handle, |m| matches!(m, EventMsg::TurnEnded { .. })).await;

    let requests = mock.requests();
    assert!(
        requests[0]
            .tool_names()
            .contains(&"skill_create".to_owned())
    );
    assert!(
        !requests[0].tool_names().contains(&"skill".to_owned()),
        "no skills yet"
    );
    assert!(
        !requests[1].system_text().contains("- greet:"),
        "not within the same turn"
    );
    let next = &requests[2];
    assert!(
        next.system_text()
            .contains("- greet: Greet someone by name."),
        "{}",
        next.system_text()
    );
    assert!(next.tool_names().contains(&"skill".to_owned()));
    let loaded = requests[3].tool_results().last().cloned().unwrap();
    assert!(
        loaded.contains("(workspace (skills/))") && loaded.contains("Run scripts/greet.sh"),
        "{loaded}"
    );
    let ran = requests[4].tool_results().last().cloned().unwrap();
    assert!(ran.contains("hello, Ada"), "{ran}");
    assert!(s.ws.join("skills/greet/SKILL.md").is_file());
}
