//! Capability tokens in a running daemon: a child a manager spawned through its tool is refused
//! a tool, a path, a host and a secret its parent lacks, each with the reason; revoking the
//! parent fails the child's next call; a token forged in the database fails verification; a
//! `with-approval` secret waits for the operator.
//! Tools run in the real default sandbox.

use crate::daemon::{Daemon, daemon_at, spawn, wait_for};
use reef_core::Capabilities;
use reef_runtime::Sender;
use reef_security::cap::{Grant, OPERATOR, RootKey, Token};
use reef_store::AuditFilter;
use reef_test_support::{MockReply, RecordedRequest};
use serde_json::json;
use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;

const LEAD: &str = r#"description = "a manager with narrow rights"
persona = "You lead."
[capabilities]
tools = ["read_file", "http_fetch", "spawn_agent"]
spawn = true
templates = ["worker"]
read = ["notes/**"]
write = ["notes/**"]
domains = ["allowed.test"]
"#;

const KEEPER: &str = r#"description = "a manager that may use one secret"
persona = "You keep secrets."
[capabilities]
tools = ["shell", "spawn_agent"]
spawn = true
secrets = ["A"]
"#;

/// Whether the newest input `req` answers is the operator's `text`.
fn told(req: &RecordedRequest, text: &str) -> bool {
    !req.ends_with_tool_result() && req.last_user_text().is_some_and(|t| t.ends_with(text))
}

/// What the kid (lead's child) does, by how many of its calls have come back.
fn kid(req: &RecordedRequest) -> MockReply {
    if told(req, "again") {
        return MockReply::tool_call("read_file", json!({"path": "notes/a.md"}));
    }
    match req.tool_results().len() {
        0 => MockReply::tool_call("write_file", json!({"path": "notes/x.md", "content": "x"})),
        1 => MockReply::tool_call("read_file", json!({"path": "notes/../secret.txt"})),
        2 => MockReply::tool_call("http_fetch", json!({"url": "http://denied.test/"})),
        3 => MockReply::tool_call("read_file", json!({"path": "notes/a.md"})),
        _ => MockReply::text("done"),
    }
}

/// What the holder (keeper's child) does.
fn holder(req: &RecordedRequest) -> MockReply {
    if told(req, "forged") {
        return MockReply::tool_call("shell", json!({"command": "echo forged"}));
    }
    match req.tool_results().len() {
        0 => MockReply::tool_call("shell", json!({"command": "echo used-b", "secrets": ["B"]})),
        1 => MockReply::tool_call(
            "shell",
            json!({"command": "printf %s \"$A\" | wc -c", "secrets": ["A"]}),
        ),
        _ => MockReply::text("done"),
    }
}

async fn start() -> Daemon {
    daemon_at(
        Arc::new(|req: &RecordedRequest| match req.agent().as_str() {
            "lead" | "keeper" if !req.ends_with_tool_result() => {
                let (name, task) = if req.agent() == "lead" {
                    ("kid", "go")
                } else {
                    ("holder", "go")
                };
                MockReply::tool_call(
                    "spawn_agent",
                    json!({"name": name, "template": "worker", "task": task}),
                )
            }
            "kid" => kid(req),
            "holder" => holder(req),
            "asker" if !req.ends_with_tool_result() => {
                MockReply::tool_call("shell", json!({"command": "rm -rf build"}))
            }
            "approver" if !req.ends_with_tool_result() => MockReply::tool_call(
                "shell",
                json!({"command": "printf %s \"$C\" | wc -c", "secrets": ["C"]}),
            ),
            _ => MockReply::text("ok"),
        }),
        "",
        "[secrets.A]\nfile = \"a.secret\"\n[secrets.B]\nfile = \"b.secret\"\n\
         [secrets.C]\nfile = \"c.secret\"\npolicy = \"with-approval\"\n",
        None,
        |home| {
            let templates = home.path().join("templates");
            std::fs::create_dir_all(&templates).unwrap();
            std::fs::write(templates.join("lead.toml"), LEAD).unwrap();
            std::fs::write(templates.join("keeper.toml"), KEEPER).unwrap();
            for (file, value) in [
                ("a.secret", "alpha-value-1"),
                ("b.secret", "bravo-value-2"),
                ("c.secret", "charlie-value-33"),
            ] {
                let path = home.reef_home().join(file);
                std::fs::write(&path, value).unwrap();
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
            }
        },
    )
    .await
}

/// The tool results in the newest request `agent` sent the model.
fn results_of(d: &Daemon, agent: &str) -> Vec<String> {
    d.mock
        .requests()
        .iter()
        .rev()
        .find(|r| r.agent() == agent)
        .map(RecordedRequest::tool_results)
        .unwrap_or_default()
}

async fn turns_ended(d: &Daemon, what: &str, n: usize) {
    wait_for(&d.runtime, what, |e| {
        e.iter().filter(|e| e.kind == "turn.ended").count() >= n
    })
    .await;
}

#[tokio::test]
async fn a_child_gets_no_right_its_manager_lacks_and_revoking_the_manager_stops_it() {
    let d = start().await;
    let rt = &d.runtime;
    rt.spawn_agent(spawn("lead", "lead"), None).await.unwrap();
    rt.send_message("lead", Sender::Operator, "start", "k1", None)
        .await
        .unwrap();
    // lead's turn and kid's turn.
    turns_ended(&d, "lead and kid to finish", 2).await;
    wait_for(rt, "kid's four calls", |_| results_of(&d, "kid").len() >= 4).await;
    let results = results_of(&d, "kid");
    let expect = [
        "denied: `kid` may not call the tool `write_file`: its token descends from `lead`'s, \
         and the rights the operator gave `lead` do not include that",
        "denied: `kid` may not read `secret.txt`",
        "denied: `kid` may not reach the host `denied.test`",
    ];
    for (result, expected) in results.iter().zip(expect) {
        assert!(result.starts_with(expected), "{result:?} vs {expected:?}");
    }
    // What the parent holds, the child may do: the read runs (the file is simply missing).
    assert!(!results[3].starts_with("denied"), "{results:?}");
    // A template lead's token does not name is refused, whoever asks (a routine, the API).
    let lead = rt.get_agent("lead").await.unwrap();
    let refused = rt
        .spawn_agent(spawn("coder1", "coder"), Some(&lead))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        refused.contains("`lead` may not spawn from the template `coder`"),
        "{refused}"
    );
    let kid_record = rt.get_agent("kid").await.unwrap();
    assert!(!kid_record.capabilities.allows_tool("write_file"));

    let denied = rt
        .store()
        .audit_records(AuditFilter {
            agent: Some("kid".into()),
            kind: Some("cap.denied".into()),
            ..AuditFilter::default()
        })
        .await
        .unwrap();
    let rights: Vec<&str> = denied
        .iter()
        .rev()
        .map(|r| r.data["right"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(rights, ["tool", "read", "domain"]);

    // Revoking lead's token fails kid at its next call, though kid's own block is untouched.
    let ids = reef_runtime::caps::revoke(rt.store(), "lead", None)
        .await
        .unwrap();
    let kid_report = reef_runtime::caps::show(rt.store(), "kid").await.unwrap();
    assert_eq!(kid_report.revoked, ids);
    rt.send_message("kid", Sender::Operator, "again", "k2", None)
        .await
        .unwrap();
    wait_for(rt, "kid's call after the revocation", |_| {
        results_of(&d, "kid")
            .last()
            .is_some_and(|r| r.contains("is revoked"))
    })
    .await;
    let last = results_of(&d, "kid").pop().unwrap();
    assert!(
        last.starts_with(&format!(
            "denied: the capability token of `kid` is revoked (revocation id {})",
            ids[0]
        )),
        "{last}"
    );
    let kinds: Vec<String> = rt
        .store()
        .audit_records(AuditFilter {
            kind: Some("cap.".into()),
            ..AuditFilter::default()
        })
        .await
        .unwrap()
        .into_iter()
        .map(|r| format!("{} {}", r.kind, r.agent.unwrap_or_default()))
        .collect();
    for expected in ["cap.minted lead", "cap.minted kid", "cap.revoked lead"] {
        assert!(kinds.iter().any(|k| k == expected), "{expected}: {kinds:?}");
    }
    rt.shutdown().await;
}

#[tokio::test]
async fn a_child_uses_only_its_parents_secrets_and_a_forged_token_verifies_nothing() {
    let d = start().await;
    let rt = &d.runtime;
    rt.spawn_agent(spawn("keeper", "keeper"), None)
        .await
        .unwrap();
    rt.send_message("keeper", Sender::Operator, "start", "k1", None)
        .await
        .unwrap();
    wait_for(rt, "holder's two calls", |_| {
        results_of(&d, "holder").len() >= 2
    })
    .await;
    let results = results_of(&d, "holder");
    assert!(
        results[0].starts_with(
            "denied: `holder` may not use the secret `B`: its token descends from `keeper`'s"
        ),
        "{results:?}"
    );
    // Secret A is keeper's to hand on: the command ran in the sandbox with it (13 bytes).
    assert!(results[1].contains("13"), "{results:?}");
    assert!(!results[1].starts_with("denied"), "{results:?}");
    for request in d.mock.requests() {
        let body = request.body.to_string();
        assert!(!body.contains("alpha-value-1") && !body.contains("bravo-value-2"));
    }

    // A token minted under another key, granting everything, written over holder's.
    let forger = RootKey::from_secret(&[9; 32]).unwrap();
    let forged = Token::mint(
        &forger,
        &Grant {
            agent: "holder".into(),
            by: OPERATOR.into(),
            capabilities: Capabilities::default(),
            budget: reef_core::Budget::default(),
        },
    )
    .unwrap();
    let db = rusqlite::Connection::open(rt.store().path().unwrap()).unwrap();
    db.execute(
        "UPDATE agents SET token = ?1 WHERE name = 'holder'",
        [forged.text()],
    )
    .unwrap();
    rt.send_message("holder", Sender::Operator, "forged", "k2", None)
        .await
        .unwrap();
    wait_for(rt, "holder's call with the forged token", |_| {
        results_of(&d, "holder")
            .last()
            .is_some_and(|r| r.contains("does not verify"))
    })
    .await;
    let report = reef_runtime::caps::show(rt.store(), "holder")
        .await
        .unwrap();
    assert!(matches!(report.token, Some(Err(_))));
    rt.shutdown().await;
}

#[tokio::test]
async fn a_command_approved_after_its_agent_was_revoked_does_not_run() {
    let d = start().await;
    let rt = &d.runtime;
    rt.spawn_agent(spawn("asker", "worker"), None)
        .await
        .unwrap();
    rt.send_message("asker", Sender::Operator, "clean", "k1", None)
        .await
        .unwrap();
    wait_for(rt, "the approval", |e| {
        e.iter().any(|e| e.kind == "approval.created")
    })
    .await;
    reef_runtime::caps::revoke(rt.store(), "asker", None)
        .await
        .unwrap();
    let pending = rt.list_pending(false).await.unwrap().remove(0);
    let answered = rt.approve(&pending.id).await.unwrap();
    let answer = answered.answer.unwrap();
    assert!(
        answer.contains("the command did not run: the capability token of `asker` is revoked"),
        "{answer}"
    );
    let denied = rt
        .store()
        .audit_records(AuditFilter {
            kind: Some("cap.denied".into()),
            ..AuditFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(denied[0].data["at_approval"], true, "{denied:?}");
    rt.shutdown().await;
}

#[tokio::test]
async fn a_with_approval_secret_waits_for_the_operator_and_is_given_once_approved() {
    let d = start().await;
    let rt = &d.runtime;
    rt.spawn_agent(spawn("approver", "worker"), None)
        .await
        .unwrap();
    rt.send_message("approver", Sender::Operator, "count", "k1", None)
        .await
        .unwrap();
    wait_for(rt, "the approval", |e| {
        e.iter().any(|e| e.kind == "approval.created")
    })
    .await;
    turns_ended(&d, "the turn", 1).await;
    // The model was told it waits, and why; nothing ran.
    let told = results_of(&d, "approver");
    assert!(
        told[0].contains("NOT RUN")
            && told[0].contains("asks for C, given only with the operator's approval"),
        "{told:?}"
    );
    let pending = rt.list_pending(false).await.unwrap().remove(0);
    assert_eq!(pending.payload["pattern"], "secret: C");
    let answered = rt.approve(&pending.id).await.unwrap();
    let answer = answered.answer.unwrap();
    // The command had the value (16 bytes); the output is the count, not the value.
    assert!(
        answer.contains("exit_code: 0") && answer.contains("16"),
        "{answer}"
    );
    assert!(!answer.contains("charlie-value-33"), "{answer}");
    let used = rt
        .store()
        .audit_records(AuditFilter {
            kind: Some("secret.used".into()),
            ..AuditFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(used.len(), 1, "{used:?}");
    assert_eq!(used[0].data["names"], json!(["C"]));
    rt.shutdown().await;
}
