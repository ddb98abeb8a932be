//! `reef cap` after a real daemon run in which a manager spawned a worker through its tool:
//! the worker's token shows two blocks in words; revoking the manager reaches the worker;
//! a token edited in the database does not verify; `grant` mints a fresh token; bad names and
//! rights are usage errors that say what is wrong.

use crate::daemon::{Daemon, daemon_home};
use crate::reef;
use reef_test_support::{MockReply, RecordedRequest};
use serde_json::{Value, json};
use std::sync::Arc;

fn model(req: &RecordedRequest) -> MockReply {
    if req.agent() == "boss" && !req.ends_with_tool_result() {
        MockReply::tool_call("spawn_agent", json!({"name": "kid", "template": "worker"}))
    } else {
        MockReply::text("done")
    }
}

fn stdout(home: &reef_test_support::TestHome, args: &[&str]) -> String {
    let out = reef(home).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "reef {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn usage_error(home: &reef_test_support::TestHome, args: &[&str]) -> String {
    let out = reef(home).args(args).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "reef {args:?}");
    String::from_utf8(out.stderr).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cap_shows_revokes_and_grants_tokens_in_words() {
    let mock = reef_test_support::MockLlm::start_responder_blocking(Arc::new(model));
    let home = daemon_home(&mock);
    let d = Daemon::start(&home).await;
    d.post("/v1/agents", json!({"name": "boss", "template": "manager"}))
        .await;
    d.post("/v1/agents/boss/messages", json!({"text": "hire a worker"}))
        .await;
    // Running, not only listed: an agent is listed (pending) before its token is minted, and
    // it turns running after.
    d.wait("kid to run", "/v1/agents", |a| {
        a.as_array().is_some_and(|a| {
            a.iter()
                .any(|x| x["name"] == "kid" && x["state"] == "running")
        })
    })
    .await;
    d.kill();

    let shown = stdout(&home, &["cap", "show", "kid"]);
    println!("{shown}");
    for line in [
        "kid (template worker, running)",
        "token: verifies under the root key; 2 blocks; a call is allowed only when every block allows it",
        "block 1, granted by the operator (revocation id ",
        "block 2, narrowed by boss for kid (revocation id ",
        "  may call: every tool",
        "  may spawn from: any template",
        "  may spawn: no",
        "  memory: its own namespace (read, write), shared (read, write)",
        "  budget: 400,000 tokens, 40 rounds a turn, 1800 s a turn",
        "status: in force",
    ] {
        assert!(shown.contains(line), "{line:?} missing from:\n{shown}");
    }
    let json: Value =
        serde_json::from_str(&stdout(&home, &["cap", "show", "kid", "--json"])).unwrap();
    assert_eq!(json["verified"], true);
    assert_eq!(json["blocks"].as_array().unwrap().len(), 2);
    assert_eq!(json["blocks"][1]["by"], "boss");
    // People see the first 16 of an id's 128 hex digits.
    let boss_id = json["blocks"][0]["revocation_id"].as_str().unwrap()[..16].to_owned();
    let kid_id = json["blocks"][1]["revocation_id"].as_str().unwrap()[..16].to_owned();

    // Any 8 or more of an id's first characters name it: kid's own block alone.
    assert_eq!(
        stdout(&home, &["cap", "revoke", "kid", "--id", &kid_id[..10]]).trim(),
        format!("revoked {kid_id}; these agents fail their next check: kid")
    );
    // Revoking boss revokes its block and its descendants' own: boss and kid fail.
    let revoked = stdout(&home, &["cap", "revoke", "boss"]);
    assert_eq!(
        revoked.trim(),
        format!("revoked {boss_id}, {kid_id}; these agents fail their next check: boss, kid")
    );
    let shown = stdout(&home, &["cap", "show", "kid"]);
    assert!(
        shown.contains(&format!("status: REVOKED ({boss_id}, {kid_id})")),
        "{shown}"
    );

    // Bad input says what is wrong, with exit code 2.
    assert!(usage_error(&home, &["cap", "show", "ghost"]).contains("no agent named `ghost`"));
    assert!(usage_error(&home, &["cap", "grant", "kid", "fly"]).contains("`fly` is not a right"));
    assert!(
        usage_error(&home, &["cap", "revoke", "kid", "--id", "abc"])
            .contains("`abc` is not a revocation id of `kid`'s token")
    );
    // A token edited in the database does not verify.
    let db = rusqlite::Connection::open(home.reef_home().join("reef.db")).unwrap();
    let token: String = db
        .query_row("SELECT token FROM agents WHERE name = 'kid'", [], |r| {
            r.get(0)
        })
        .unwrap();
    let mid = token.len() / 2;
    let flipped = if &token[mid..=mid] == "A" { "B" } else { "A" };
    let edited = format!("{}{flipped}{}", &token[..mid], &token[mid + 1..]);
    db.execute("UPDATE agents SET token = ?1 WHERE name = 'kid'", [&edited])
        .unwrap();
    let shown = stdout(&home, &["cap", "show", "kid"]);
    assert!(
        shown.contains("the capability token does not verify"),
        "{shown}"
    );

    // The operator mints a fresh token, wider by one right, that descends from no other.
    let granted = stdout(&home, &["cap", "grant", "kid", "schedule"]);
    assert!(
        granted.starts_with("granted kid schedule: a new token from the root key"),
        "{granted}"
    );
    let shown = stdout(&home, &["cap", "show", "kid"]);
    assert!(
        shown.contains("1 block;") && shown.contains("status: in force"),
        "{shown}"
    );
    assert!(shown.contains("may schedule routines: yes"), "{shown}");

    let kinds = stdout(&home, &["audit", "query", "--kind", "cap.", "--json"]);
    let records: Vec<Value> = serde_json::from_str(&kinds).unwrap();
    let seen: Vec<String> = records
        .iter()
        .map(|r| {
            format!(
                "{} {}",
                r["kind"].as_str().unwrap(),
                r["agent"].as_str().unwrap_or("")
            )
        })
        .collect();
    for expected in [
        "cap.minted boss",
        "cap.minted kid",
        "cap.revoked boss",
        "cap.granted kid",
    ] {
        assert!(seen.iter().any(|s| s == expected), "{expected}: {seen:?}");
    }
    assert!(stdout(&home, &["audit", "verify"]).starts_with("audit log verified"));
}
