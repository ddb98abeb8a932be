//! `reef mcp`: reef as an MCP server driven by the official Python SDK's client (over HTTP at
//! `/mcp` and over stdio through `reef mcp serve`), the commands that debug a configured
//! server by hand, and `reef mcp add/rm` editing reef.toml without losing its comments.

use crate::daemon::Daemon;
use crate::{config_for, reef};
use reef_test_support::mcp::{mcp_python, mcp_script, python_server_toml};
use reef_test_support::{MockLlm, MockReply, RecordedRequest, TestHome};
use serde_json::Value;
use std::process::Command;
use std::sync::Arc;

/// The mock model answers every message with what it was told.
fn echo_model(req: &RecordedRequest) -> MockReply {
    let said = req.last_user_text().unwrap_or_default();
    let line = said.lines().last().unwrap_or_default().to_owned();
    MockReply::text(format!("you said: {line}"))
}

/// Runs the Python SDK client with `args`; its JSON report.
fn py_client(home: &TestHome, args: &[&str]) -> Value {
    let out = Command::new(mcp_python())
        .arg(mcp_script("py_client.py"))
        .args(args)
        .env("HOME", home.path())
        .env("REEF_HOME", home.reef_home())
        .current_dir(home.workspace())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
        panic!(
            "py_client printed no JSON ({e}): {stdout}\nstderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn assert_scenario(report: &Value, agent: &str) {
    assert!(report.get("error").is_none(), "{report:#}");
    let tools: Vec<&str> = report["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for name in [
        "agent_status",
        "answer_question",
        "list_agents",
        "list_questions",
        "memory_save",
        "memory_search",
        "send_message",
        "spawn_agent",
    ] {
        assert!(tools.contains(&name), "{name} in {tools:?}");
    }
    assert_eq!(report["spawn_error"], false, "{report:#}");
    assert_eq!(report["reply_error"], false, "{report:#}");
    assert_eq!(report["reply"], "you said: hello from mcp", "{report:#}");
    let transcript_uri = format!("reef://agents/{agent}/transcript");
    assert!(
        report["resources"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r == transcript_uri.as_str()),
        "{report:#}"
    );
    assert!(
        report["transcript"]
            .as_str()
            .unwrap()
            .contains("you said: hello from mcp")
    );
    assert!(
        report["status"]
            .as_str()
            .unwrap()
            .contains("\"template\":\"worker\"")
    );
    assert_eq!(report["missing_error"], true);
    assert!(report["missing"].as_str().unwrap().contains("nobody-here"));
    assert!(
        report["resource_changes"].as_u64().unwrap() >= 1,
        "{report:#}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_client_drives_reef_over_http_and_stdio() {
    let mock = MockLlm::start_responder(Arc::new(echo_model)).await;
    let home = TestHome::new();
    home.write_config(&format!(
        "{}\n{}\n[daemon]\nlisten = \"127.0.0.1:0\"\n",
        config_for(&mock, "openai-chat", false),
        python_server_toml("py", &[])
    ));
    let daemon = Daemon::start(&home).await;
    let url = format!("{}/mcp", daemon.base());

    let over_http = py_client(
        &home,
        &["http", &url, "--token", daemon.token(), "--agent", "ada"],
    );
    assert_scenario(&over_http, "ada");

    let reef_bin = env!("CARGO_BIN_EXE_reef");
    let over_stdio = py_client(
        &home,
        &["stdio", "--agent", "bob", "--", reef_bin, "mcp", "serve"],
    );
    assert_scenario(&over_stdio, "bob");

    let anonymous = py_client(&home, &["http", &url, "--agent", "eve"]);
    assert_eq!(anonymous["status"], 401, "{anonymous:#}");
    let foreign = py_client(
        &home,
        &[
            "http",
            &url,
            "--token",
            daemon.token(),
            "--origin",
            "http://evil.example",
            "--agent",
            "eve",
        ],
    );
    assert_eq!(foreign["status"], 403, "{foreign:#}");
    // A page on another name that resolves here (DNS rebinding) sends its own Host.
    let rebound = py_client(
        &home,
        &[
            "http",
            &url,
            "--token",
            daemon.token(),
            "--host",
            "evil.example:80",
            "--agent",
            "eve",
        ],
    );
    assert_eq!(rebound["status"], 403, "{rebound:#}");
    // Neither refused client reached the runtime.
    let agents = daemon.get("/v1/agents").await;
    let names: Vec<&str> = agents
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|a| a["name"].as_str())
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");
    assert!(!names.contains(&"eve"));
    // The list comes from the daemon: the agents' first turns started the server, once.
    let list = reef(&home)
        .args(["mcp", "list", "--json"])
        .assert()
        .success();
    let rows: Value = serde_json::from_slice(&list.get_output().stdout).unwrap();
    assert_eq!(rows[0]["state"], "running", "{rows:#}");
    assert_eq!(rows[0]["starts"], 1, "{rows:#}");
    assert!(rows[0]["tools"].as_u64().unwrap() >= 8, "{rows:#}");
    daemon.kill();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_configured_server_is_debugged_by_hand() {
    let mock = MockLlm::start(Vec::new()).await;
    let home = TestHome::new();
    home.write_config(&format!(
        "{}\n{}",
        config_for(&mock, "openai-chat", false),
        python_server_toml("py", &[])
    ));
    let tools = reef(&home).args(["mcp", "tools", "py"]).assert().success();
    let listed = String::from_utf8_lossy(&tools.get_output().stdout).into_owned();
    assert!(listed.contains("py__add  Add two integers."), "{listed}");

    let sum = reef(&home)
        .args(["mcp", "call", "py", "add", r#"{"a": 2, "b": 40}"#])
        .assert()
        .success();
    assert_eq!(
        String::from_utf8_lossy(&sum.get_output().stdout).trim(),
        "42"
    );

    let failed = reef(&home)
        .args(["mcp", "call", "py", "fail", r#"{"reason": "on purpose"}"#])
        .assert()
        .code(1);
    assert!(String::from_utf8_lossy(&failed.get_output().stdout).contains("on purpose"));

    let bad = reef(&home)
        .args(["mcp", "call", "py", "add", "[1]"])
        .assert()
        .code(2);
    assert!(
        String::from_utf8_lossy(&bad.get_output().stderr).contains("ARGS must be a JSON object")
    );

    let note = reef(&home)
        .args(["mcp", "resources", "py", "note://hello"])
        .assert()
        .success();
    assert!(String::from_utf8_lossy(&note.get_output().stdout).contains("hello from python"));
    let prompt = reef(&home)
        .args(["mcp", "prompts", "py", "greet", "--arg", "name=Ann"])
        .assert()
        .success();
    assert!(String::from_utf8_lossy(&prompt.get_output().stdout).contains("Hello, Ann!"));

    let list = reef(&home)
        .args(["mcp", "list", "--json"])
        .assert()
        .success();
    let rows: Value = serde_json::from_slice(&list.get_output().stdout).unwrap();
    assert_eq!(rows[0]["name"], "py");
    assert_eq!(rows[0]["transport"], "stdio");
    assert_eq!(rows[0]["state"], "not started");

    let unknown = reef(&home).args(["mcp", "tools", "nope"]).assert().code(2);
    assert!(String::from_utf8_lossy(&unknown.get_output().stderr).contains("configured: py"));
}

#[test]
fn add_and_rm_edit_reef_toml_keeping_its_comments() {
    let home = TestHome::new();
    let original = "# my settings, keep me\n[agent]\nmax_rounds = 7 # inline too\n";
    let path = home.write_config(original);

    reef(&home)
        .args([
            "mcp",
            "add",
            "fs",
            "--env",
            "MODE=ro",
            "--",
            "node",
            "server.js",
            "/data",
        ])
        .assert()
        .success();
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.starts_with(original), "{text}");
    assert!(
        text.contains("[mcp.servers.fs]\ncommand = \"node\"\nargs = [\"server.js\", \"/data\"]"),
        "{text}"
    );
    assert!(text.contains("env = { MODE = \"ro\" }"), "{text}");

    reef(&home)
        .args([
            "mcp",
            "add",
            "hosted",
            "--url",
            "https://mcp.example.com/mcp",
            "--template",
            "coder",
        ])
        .assert()
        .success();
    let list = reef(&home)
        .args(["mcp", "list", "--json"])
        .assert()
        .success();
    let rows: Value = serde_json::from_slice(&list.get_output().stdout).unwrap();
    let names: Vec<&str> = rows
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["name"].as_str())
        .collect();
    assert_eq!(names, ["fs", "hosted"]);

    let twice = reef(&home)
        .args(["mcp", "add", "fs", "--", "node"])
        .assert()
        .code(2);
    assert!(String::from_utf8_lossy(&twice.get_output().stderr).contains("configured already"));
    let before = std::fs::read_to_string(&path).unwrap();
    let dangling = reef(&home)
        .args(["mcp", "add", "gh", "--env", "T=secret:NOPE", "--", "gh-mcp"])
        .assert()
        .code(2);
    let stderr = String::from_utf8_lossy(&dangling.get_output().stderr).into_owned();
    assert!(
        stderr.contains("not saved") && stderr.contains("[secrets.NOPE]"),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        before,
        "a refused change leaves the file"
    );

    reef(&home).args(["mcp", "rm", "fs"]).assert().success();
    reef(&home).args(["mcp", "rm", "hosted"]).assert().success();
    let after = std::fs::read_to_string(&path).unwrap();
    assert!(after.starts_with(original), "{after}");
    assert!(!after.contains("servers.fs"), "{after}");
    let gone = reef(&home).args(["mcp", "rm", "fs"]).assert().code(2);
    assert!(String::from_utf8_lossy(&gone.get_output().stderr).contains("no MCP server `fs`"));
}
