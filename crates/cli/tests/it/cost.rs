//! A failover chain in config, the cost of what it served, and `reef cost`.

use crate::{json_lines, reef};
use reef_test_support::{MockLlm, MockReply, TestHome};
use serde_json::Value;

#[test]
fn the_backup_serves_after_a_429_and_its_cost_is_reported_under_its_name() {
    let main = MockLlm::start_blocking(vec![MockReply::status(429, "slow down")]);
    let backup = MockLlm::start_blocking(vec![MockReply::text("hello from backup")]);
    let home = TestHome::new();
    home.write_config(&format!(
        r#"
[model]
default = ["main", "backup"]

[providers.main]
base_url = "{}"
model = "gpt-4o"
stream = false
max_retries = 0

[providers.backup]
base_url = "{}"
model = "gpt-4o-mini"
stream = false
max_retries = 0

[prices."gpt-4o-mini"]
input = 1000.0
output = 2000.0
"#,
        main.base_url(),
        backup.base_url()
    ));
    let out = reef(&home).args(["run", "--json", "hi"]).assert().success();
    let events = json_lines(&out.get_output().stdout);
    let usage = events
        .iter()
        .find(|e| e["msg"]["type"] == "usage")
        .expect("a usage event");
    assert_eq!(usage["msg"]["provider"], "backup");
    let input = usage["msg"]["usage"]["input_tokens"].as_u64().unwrap();
    let output = usage["msg"]["usage"]["output_tokens"].as_u64().unwrap();
    // The configured price: $1000 / $2000 per million tokens = 1000 / 2000 micro-dollars each.
    let expected = input * 1000 + output * 2000;
    assert_eq!(usage["msg"]["cost_micros"].as_u64(), Some(expected));
    assert_eq!((main.requests().len(), backup.requests().len()), (1, 1));

    let out = reef(&home).args(["cost", "--json"]).assert().success();
    let report: Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let rows = report["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{report}");
    assert_eq!(rows[0]["provider"], "backup");
    assert_eq!(rows[0]["model"], "gpt-4o-mini");
    assert_eq!(rows[0]["cost_micros"].as_u64(), Some(expected));
    assert_eq!(report["total_cost_micros"].as_u64(), Some(expected));
    assert_eq!(report["unpriced_requests"], 0);

    let out = reef(&home)
        .args(["cost", "--since", "1h"])
        .assert()
        .success();
    let text = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(
        text.contains("backup") && text.contains(&format!("${:.4}", expected as f64 / 1e6)),
        "{text}"
    );
    reef(&home)
        .args(["cost", "--since", "3x"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("the unit must be"));
}

#[test]
fn a_chain_naming_an_unknown_provider_is_a_config_error() {
    let home = TestHome::new();
    home.write_config(
        "[model]\ndefault = [\"main\", \"nope\"]\n\n[providers.main]\nbase_url = \"http://127.0.0.1:9/v1\"\nmodel = \"m\"\n",
    );
    reef(&home)
        .args(["run", "hi"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("model.default"))
        .stderr(predicates::str::contains("`nope`"));
}
