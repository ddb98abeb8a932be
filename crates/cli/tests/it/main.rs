//! End-to-end tests of the `reef` binary against the scripted mock model server.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "test code")]

mod audit;
mod browser;
mod caps;
mod channels;
mod cluster;
mod cluster_faults;
mod commands;
mod compaction;
mod cost;
mod crash;
mod daemon;
mod dashboard;
mod debug;
mod discord;
mod e2e;
mod escapes;
mod failures;
mod leaks;
mod mcp;
mod memory;
mod models;
mod openai;
mod quic;
mod replay;
mod routines;
mod safety;
mod sandbox;
mod secrets;
mod skills;
mod slack;
mod telegram;
mod tokens;
mod trust;

use reef_test_support::{MockLlm, TestHome};
use serde_json::Value;

/// A `reef` command with a hermetic environment: its own home, the workspace as cwd.
pub(crate) fn reef(home: &TestHome) -> assert_cmd::Command {
    let mut cmd = assert_cmd::Command::new(env!("CARGO_BIN_EXE_reef"));
    cmd.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home.path())
        .env("REEF_HOME", home.reef_home())
        .current_dir(home.workspace());
    cmd
}

/// A config whose default provider is the mock server, with fast retries.
pub(crate) fn config_for(mock: &MockLlm, wire: &str, stream: bool) -> String {
    format!(
        r#"
[model]
default = "main"

[providers.main]
wire_api = "{wire}"
base_url = "{url}"
model = "mock-model"
api_key_env = "MOCK_API_KEY"
stream = {stream}
max_retries = 2
retry_base_ms = 1
"#,
        url = mock.base_url()
    )
}

/// A home whose config points at `mock`.
pub(crate) fn home_for(mock: &MockLlm, wire: &str, stream: bool) -> TestHome {
    let home = TestHome::new();
    home.write_config(&config_for(mock, wire, stream));
    home
}

/// Parses `reef run --json` output into events.
pub(crate) fn json_lines(stdout: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(stdout)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad JSON line {l:?}: {e}")))
        .collect()
}

/// The id of the most recent session in `home`.
pub(crate) fn last_session(home: &TestHome) -> String {
    let out = reef(home)
        .args(["sessions", "list", "--json"])
        .assert()
        .success();
    let list: Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    list[0]["id"].as_str().unwrap().to_owned()
}

/// The transcript of the most recent session in `home`, as `reef sessions show --json` prints it.
pub(crate) fn last_transcript(home: &TestHome) -> Value {
    let id = last_session(home);
    let out = reef(home)
        .args(["sessions", "show", &id, "--json"])
        .assert()
        .success();
    serde_json::from_slice(&out.get_output().stdout).unwrap()
}
