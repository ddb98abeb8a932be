//! `reef audit` after a real daemon run: an agent uses a secret in a `shell` command (in the
//! default sandbox), runs a command that waits for approval and is approved over the API;
//! the log holds each of those (arguments hashed, the secret by name only), `reef audit
//! verify` passes, and editing any one record in the database makes it fail naming that
//! record.

use crate::daemon::{Daemon, daemon_home};
use crate::reef;
use reef_test_support::{MockReply, RecordedRequest};
use serde_json::{Value, json};
use std::sync::Arc;

const SECRET: &str = "s3cr3t-deploy-value-8841";

fn model(req: &RecordedRequest) -> MockReply {
    let input = req.last_user_text().unwrap_or_default();
    if req.ends_with_tool_result() || input.contains("approv") {
        MockReply::text("done")
    } else if input.contains("deploy") {
        MockReply::tool_call(
            "shell",
            json!({"command": "printf %s \"$DEPLOY_TOKEN\" | wc -c", "secrets": ["DEPLOY_TOKEN"]}),
        )
    } else {
        MockReply::tool_call("shell", json!({"command": "rm -rf build"}))
    }
}

fn turns_ended(events: &Value) -> usize {
    events.as_array().map_or(0, |a| {
        a.iter().filter(|e| e["kind"] == "turn.ended").count()
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_verifies_and_an_edited_record_is_named() {
    let mock = reef_test_support::MockLlm::start_responder_blocking(Arc::new(model));
    let home = daemon_home(&mock);
    std::fs::write(home.reef_home().join("deploy.token"), format!("{SECRET}\n")).unwrap();
    let config = std::fs::read_to_string(home.config_path()).unwrap();
    home.write_config(&format!(
        "{config}\n[secrets.DEPLOY_TOKEN]\nfile = \"deploy.token\"\n"
    ));
    let d = Daemon::start(&home).await;

    d.post("/v1/agents", json!({"name": "ada", "template": "worker"}))
        .await;
    d.post(
        "/v1/agents/ada/messages",
        json!({"text": "deploy the site"}),
    )
    .await;
    d.wait(
        "the deploy turn",
        "/v1/events?agent=ada&kind=turn.ended",
        |e| turns_ended(e) == 1,
    )
    .await;
    d.post("/v1/agents/ada/messages", json!({"text": "clean up"}))
        .await;
    let pending = d
        .wait("the approval", "/v1/questions", |q| {
            q.as_array().is_some_and(|a| !a.is_empty())
        })
        .await;
    let id = pending[0]["id"].as_str().unwrap().to_owned();
    d.post(&format!("/v1/questions/{id}/approve"), json!({}))
        .await;
    d.wait(
        "the approval's turn",
        "/v1/events?agent=ada&kind=turn.ended",
        |e| turns_ended(e) == 3,
    )
    .await;
    // The secret reached the command: its length came back.
    let results: Vec<String> = mock
        .requests()
        .iter()
        .flat_map(RecordedRequest::tool_results)
        .collect();
    assert!(
        results
            .iter()
            .any(|r| r.contains(&SECRET.len().to_string())),
        "{results:?}"
    );
    // Requests nobody authenticated leave nothing in the log.
    let http = reef_llm::http_client(Some(std::time::Duration::from_secs(30))).unwrap();
    for path in ["/v1/agents", "/no/such/page", "/agents/ada/pause"] {
        let status = http
            .post(format!("{}{path}", d.base()))
            .json(&json!({"name": "intruder"}))
            .send()
            .await
            .unwrap()
            .status();
        assert!(status.is_client_error(), "{path}: {status}");
    }
    d.kill();

    let out = reef(&home)
        .args(["audit", "query", "--limit", "1000", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(!text.contains(SECRET), "the secret's value is in the log");
    let records: Vec<Value> = serde_json::from_str(&text).unwrap();
    let of = |kind: &str| -> Vec<&Value> { records.iter().filter(|r| r["kind"] == kind).collect() };

    let config_loaded = of("config.loaded");
    assert_eq!(config_loaded.len(), 1, "{text}");
    assert_eq!(
        config_loaded[0]["data"]["config_sha256"]
            .as_str()
            .unwrap()
            .len(),
        64
    );
    assert!(config_loaded[0]["data"]["templates"]["worker"].is_string());

    let calls = of("tool.call");
    assert_eq!(calls.len(), 2, "{text}");
    // Both reached their tools (the second one's tool asked for approval, recorded below).
    assert!(
        calls.iter().all(|c| c["data"]["skipped"].is_null()),
        "{text}"
    );
    for call in &calls {
        assert_eq!(call["agent"], "ada");
        assert_eq!(call["data"]["name"], "shell");
        assert_eq!(call["data"]["arguments_sha256"].as_str().unwrap().len(), 64);
        assert!(call["data"].get("arguments").is_none());
    }
    let used = of("secret.used");
    assert_eq!(used.len(), 1, "{text}");
    assert_eq!(used[0]["agent"], "ada");
    assert_eq!(used[0]["data"]["names"], json!(["DEPLOY_TOKEN"]));
    assert_eq!(used[0]["data"]["tool"], "shell");
    assert_eq!(of("approval.created").len(), 1, "{text}");
    let approved = of("approval.answered");
    assert_eq!(approved.len(), 1, "{text}");
    assert_eq!(approved[0]["data"]["id"], id.as_str());
    assert!(
        approved[0]["data"]["answer"]
            .as_str()
            .unwrap()
            .starts_with("approved")
    );
    assert_eq!(of("agent.spawned")[0]["agent"], "ada");
    assert!(
        of("api.request")
            .iter()
            .all(|r| r["data"]["by"] == "api token"),
        "{text}"
    );
    let requests: Vec<(String, String)> = of("api.request")
        .iter()
        .map(|r| {
            (
                r["data"]["method"].as_str().unwrap().to_owned(),
                r["data"]["path"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    for expected in [
        ("POST", "/v1/agents".to_owned()),
        ("POST", "/v1/agents/ada/messages".to_owned()),
        ("POST", format!("/v1/questions/{id}/approve")),
    ] {
        assert!(
            requests.contains(&(expected.0.to_owned(), expected.1.clone())),
            "{expected:?} not in {requests:?}"
        );
    }
    assert_eq!(
        requests.len(),
        4,
        "only the authenticated ones: {requests:?}"
    );
    // A filter by agent and kind prefix.
    let out = reef(&home)
        .args(["audit", "query", "--agent", "ada", "--kind", "approval."])
        .output()
        .unwrap();
    let lines = String::from_utf8(out.stdout).unwrap();
    assert_eq!(lines.lines().count(), 2, "{lines}");

    let verified = reef(&home).args(["audit", "verify"]).output().unwrap();
    let stdout = String::from_utf8_lossy(&verified.stdout);
    assert!(
        verified.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&verified.stderr)
    );
    assert!(
        stdout.contains(&format!("audit log verified: {} records", records.len())),
        "{stdout}"
    );

    // Any one record changed in the database: verification fails at that record.
    let db = rusqlite::Connection::open(home.reef_home().join("reef.db")).unwrap();
    for record in &records {
        let seq = record["seq"].as_i64().unwrap();
        let original: String = db
            .query_row("SELECT data FROM audit WHERE seq = ?1", [seq], |r| r.get(0))
            .unwrap();
        db.execute(
            "UPDATE audit SET data = ?1 WHERE seq = ?2",
            rusqlite::params![original.replacen('{', "{\"x\":1,", 1), seq],
        )
        .unwrap();
        let failed = reef(&home).args(["audit", "verify"]).output().unwrap();
        assert_eq!(failed.status.code(), Some(1), "record {seq} edited");
        let stderr = String::from_utf8_lossy(&failed.stderr);
        assert!(
            stderr.contains(&format!("does not verify at record {seq}:")),
            "record {seq}: {stderr}"
        );
        db.execute(
            "UPDATE audit SET data = ?1 WHERE seq = ?2",
            rusqlite::params![original, seq],
        )
        .unwrap();
    }
    assert!(
        reef(&home)
            .args(["audit", "verify"])
            .output()
            .unwrap()
            .status
            .success()
    );
}
