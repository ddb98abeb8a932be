//! Skills in the daemon: an agent's template decides which skills it gets and whether it may
//! write them, and a skill in reef's (hidden) home runs in the agent's real sandbox.

use crate::daemon::{count, daemon_at, spawn, wait_for};
use reef_test_support::{MockReply, RecordedRequest};
use std::sync::Arc;

fn with_task(name: &str, template: &str, task: &str) -> reef_runtime::SpawnRequest {
    reef_runtime::SpawnRequest {
        task: Some(task.into()),
        ..spawn(name, template)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_coder_gets_the_home_skills_and_skill_create_and_runs_a_skill_script() {
    let d = daemon_at(
        Arc::new(|req: &RecordedRequest| {
            if req.ends_with_tool_result() {
                let result = req.tool_results().last().cloned().unwrap_or_default();
                return MockReply::text(format!("done: {result}"));
            }
            // The skill's folder, as the `skill` tool would tell it.
            let system = req.system_text();
            let folder = system
                .lines()
                .find_map(|l| l.strip_prefix("HOME-SKILLS="))
                .unwrap_or_default()
                .to_owned();
            MockReply::tool_call(
                "shell",
                serde_json::json!({"command": format!("sh {folder}/greet/scripts/hi.sh")}),
            )
        }),
        "",
        "",
        None,
        |home| {
            let skill = home.reef_home().join("skills/greet");
            std::fs::create_dir_all(skill.join("scripts")).unwrap();
            std::fs::write(
                skill.join("SKILL.md"),
                "---\nname: greet\ndescription: Greet the operator.\n---\nRun scripts/hi.sh.\n",
            )
            .unwrap();
            std::fs::write(
                skill.join("scripts/hi.sh"),
                "echo hi from greet; ls \"$(dirname \"$0\")/../../..\" | grep -c reef.db || true\n",
            )
            .unwrap();
            // The mock learns the folder from the persona of a template written for the test.
            std::fs::create_dir_all(home.path().join("templates")).unwrap();
            std::fs::write(
                home.path().join("templates/skilled.toml"),
                format!(
                    "description = \"d\"\npersona = \"HOME-SKILLS={}\"\nskills = [\"gr*\"]\n\
                     [capabilities]\ntools = [\"*\"]\nskill_write = true\n",
                    home.reef_home().join("skills").display()
                ),
            )
            .unwrap();
        },
    )
    .await;
    let rt = &d.runtime;
    rt.spawn_agent(with_task("c1", "skilled", "greet"), None)
        .await
        .unwrap();
    wait_for(rt, "c1's turn", |e| count(e, "turn.ended") >= 1).await;
    rt.spawn_agent(with_task("w1", "worker", "hello"), None)
        .await
        .unwrap();
    wait_for(rt, "w1's turn", |e| count(e, "turn.ended") >= 2).await;

    let requests = d.mock.requests();
    let of = |agent: &str| -> Vec<&RecordedRequest> {
        requests.iter().filter(|r| r.agent() == agent).collect()
    };
    let c1 = of("c1");
    assert!(c1[0].system_text().contains("- greet: Greet the operator."));
    let tools = c1[0].tool_names();
    assert!(
        tools.contains(&"skill".to_owned()) && tools.contains(&"skill_create".to_owned()),
        "{tools:?}"
    );
    let result = c1[1].tool_results().last().cloned().unwrap();
    assert!(result.starts_with("exit_code: 0"), "{result}");
    assert!(result.contains("hi from greet"), "{result}");
    assert!(
        result.contains("\n0\n"),
        "reef's home stays hidden beside the skill: {result}"
    );
    let w1 = of("w1");
    assert!(
        !w1[0].tool_names().contains(&"skill_create".to_owned()),
        "the worker may not write skills"
    );
    assert!(
        w1[0].system_text().contains("- greet:"),
        "the worker's template selects every skill"
    );
}
