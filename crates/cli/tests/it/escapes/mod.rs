//! The escape suite through reef's own entry points: each way out of the sandbox that reef's
//! own (unconfined) code once opened, tried for real with `reef run` against the mock model,
//! `reef sandbox run`, or a daemon agent (`daemon.rs` and reef-runtime's tests), each asserting
//! the refusal that is observed now, with a positive control so the case can fail.
//!
//! The sandbox's own escape suite (23 classic escapes and the layers) lives in reef-sandbox's
//! tests; these cases are about what reef does around it.

mod config;
mod files;
mod kernel;
mod network;
mod secrets;
mod terminal;

use crate::{config_for, reef};
use reef_test_support::{MockLlm, MockReply, TestHome};

/// A home whose model is `script` and whose tools must be confined (`sandbox.required`), so a
/// sandbox that does not work fails the case instead of passing it for the wrong reason.
pub(crate) fn confined_home(script: Vec<MockReply>) -> (MockLlm, TestHome) {
    let mock = MockLlm::start_blocking(script);
    let home = TestHome::new();
    home.write_config(&format!(
        "{}\n[sandbox]\nrequired = true\n",
        config_for(&mock, "openai-chat", false)
    ));
    (mock, home)
}

/// `reef run PROMPT` in the home's workspace; returns (stdout, stderr) and asserts success.
pub(crate) fn run_ok(home: &TestHome, prompt: &str) -> (String, String) {
    let out = reef(home)
        .env("MOCK_API_KEY", "k")
        .args(["run", prompt])
        .assert()
        .success();
    let o = out.get_output();
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}
