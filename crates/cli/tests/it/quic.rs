//! The QUIC gateway end to end: `reef connect` talks with an agent of a daemon through the
//! certificate it pinned (and refuses another certificate), a hundred conversations on one
//! connection each get their own answer, bad frames and tokens end only their stream, a
//! revoked token ends the connection, and aioquic (a second QUIC implementation) speaks the
//! documented framing to the same gateway.

use crate::daemon::{Daemon, daemon_home};
use crate::reef;
use reef_core::{Event, EventMsg};
use reef_quic::protocol::close;
use reef_quic::{Client, ClientError, ErrorCode, ServerFrame};
use reef_test_support::{MockLlm, MockReply, RecordedRequest, TestHome, venv_python};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

/// A model that answers `answer to q-N` to a message holding `q-N`.
async fn answering_mock() -> MockLlm {
    MockLlm::start_responder(Arc::new(|req: &RecordedRequest| {
        let asked = req.last_user_text().unwrap_or_default();
        let word = asked
            .split(|c: char| c.is_whitespace() || c == '"')
            .find(|w| w.starts_with("q-"))
            .unwrap_or("nothing")
            .to_owned();
        MockReply::text(format!("answer to {word}"))
    }))
    .await
}

/// A daemon with the QUIC gateway on a free loopback port; its address and fingerprint.
async fn quic_daemon(mock: &MockLlm) -> (TestHome, Daemon, String, String) {
    let home = daemon_home(mock);
    let config = std::fs::read_to_string(home.config_path()).unwrap();
    home.write_config(&format!(
        "{config}\n[gateway.quic]\nlisten = \"127.0.0.1:0\"\nrecheck_secs = 1\n"
    ));
    let daemon = Daemon::start(&home).await;
    let addr = std::fs::read_to_string(home.reef_home().join("quic.addr"))
        .unwrap()
        .trim()
        .to_owned();
    let cert = reef_server::tls::client_pin(&reef_config::TlsSource::SelfSigned, &home.reef_home())
        .unwrap();
    let fingerprint = reef_server::tls::fingerprint(cert.as_ref());
    let log = std::fs::read_to_string(home.path().join("serve.log")).unwrap();
    assert!(
        log.contains(&format!("QUIC gateway on {addr}")) && log.contains(&fingerprint),
        "{log}"
    );
    (home, daemon, addr, fingerprint)
}

fn spawn(home: &TestHome, name: &str) {
    reef(home)
        .args(["agent", "spawn", name, "--template", "quick"])
        .assert()
        .success();
}

fn make_token(home: &TestHome, name: &str, scope: &str) -> String {
    let out = reef(home)
        .args(["gateway", "token", "create", name, "--scope", scope])
        .assert()
        .success();
    String::from_utf8_lossy(&out.get_output().stdout)
        .trim()
        .to_owned()
}

/// `reef connect` to `agent` at the gateway `addr`, pinned to `fingerprint`.
fn connect(home: &TestHome, addr: &str, fingerprint: &str, agent: &str) -> assert_cmd::Command {
    let mut cmd = reef(home);
    cmd.args([
        "connect",
        addr,
        "--fingerprint",
        fingerprint,
        "--agent",
        agent,
    ]);
    cmd
}

fn stderr(out: &assert_cmd::assert::Assert) -> String {
    String::from_utf8_lossy(&out.get_output().stderr).into_owned()
}

fn answer_of(events: &[Event]) -> Option<String> {
    events.iter().find_map(|e| match &e.msg {
        EventMsg::AssistantMessage { text } => Some(text.clone()),
        _ => None,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reef_connect_talks_with_an_agent_through_the_pinned_certificate() {
    let mock = answering_mock().await;
    let (home, _daemon, addr, fingerprint) = quic_daemon(&mock).await;
    spawn(&home, "ada");
    let token = make_token(&home, "phone", "agent:ada");

    // A conversation of two lines, as a user types them.
    let out = connect(&home, &addr, &fingerprint, "ada")
        .env("REEF_TOKEN", &token)
        .write_stdin("hello q-1\n\nand q-2\n/quit\nnever sent q-3\n")
        .assert()
        .success();
    let shown = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(
        shown.contains("answer to q-1") && shown.contains("answer to q-2"),
        "{shown}\n{}",
        stderr(&out)
    );
    assert!(
        stderr(&out).contains("connected to agent ada"),
        "{}",
        stderr(&out)
    );
    // What the model was sent: the two messages, in order, and nothing after /quit.
    let asked: Vec<String> = mock
        .requests()
        .iter()
        .filter_map(RecordedRequest::last_user_text)
        .collect();
    assert!(asked[0].contains("hello q-1"), "{asked:?}");
    assert!(asked.iter().any(|a| a.contains("and q-2")), "{asked:?}");
    assert!(!asked.iter().any(|a| a.contains("q-3")), "{asked:?}");

    // --json prints the protocol events, as `reef run --json` does.
    let out = connect(&home, &addr, &fingerprint, "ada")
        .args(["--json", "--message", "json please q-4"])
        .env("REEF_TOKEN", &token)
        .assert()
        .success();
    let events: Vec<Event> = String::from_utf8_lossy(&out.get_output().stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(answer_of(&events).as_deref(), Some("answer to q-4"));
    assert!(matches!(
        events.last().unwrap().msg,
        EventMsg::TurnEnded { .. }
    ));

    // The gateway is on the channel board, with the three messages it took.
    let out = reef(&home).args(["channels", "status"]).assert().success();
    let status = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    let line = status
        .lines()
        .find(|l| l.contains("gateway.quic"))
        .unwrap_or_else(|| panic!("{status}"));
    assert!(
        line.contains("quic") && line.contains("up") && line.contains(&addr),
        "{line}"
    );
    assert!(line.contains("3 in, "), "{line}");

    // Another certificate is refused before anything is said.
    let before = mock.requests().len();
    let wrong = fingerprint.replace(
        &fingerprint[..2],
        if &fingerprint[..2] == "00" {
            "11"
        } else {
            "00"
        },
    );
    let out = connect(&home, &addr, &wrong, "ada")
        .args(["--message", "q-5"])
        .env("REEF_TOKEN", &token)
        .assert()
        .failure();
    let err = stderr(&out);
    assert!(
        err.contains("fingerprint") && err.contains(&fingerprint),
        "{err}"
    );
    let out = connect(&home, &addr, "AB:CD", "ada")
        .env("REEF_TOKEN", &token)
        .assert()
        .code(2);
    assert!(stderr(&out).contains("--fingerprint"), "{}", stderr(&out));

    // A wrong token, and a token for another agent, are refused with the reason.
    let out = connect(&home, &addr, &fingerprint, "ada")
        .args(["--message", "q-6"])
        .env("REEF_TOKEN", "reef_0000")
        .assert()
        .failure();
    assert!(stderr(&out).contains("token is wrong"), "{}", stderr(&out));
    spawn(&home, "bob");
    let out = connect(&home, &addr, &fingerprint, "bob")
        .args(["--message", "q-7"])
        .env("REEF_TOKEN", &token)
        .assert()
        .failure();
    assert!(
        stderr(&out).contains("cannot talk to agent bob"),
        "{}",
        stderr(&out)
    );
    let out = connect(&home, &addr, &fingerprint, "ada").assert().code(2);
    assert!(stderr(&out).contains("REEF_TOKEN"), "{}", stderr(&out));
    assert_eq!(
        mock.requests().len(),
        before,
        "a refused client reached the model"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_conversations_on_one_connection_each_get_their_own_answer() {
    let mock = answering_mock().await;
    let (_home, daemon, addr, fingerprint) = quic_daemon(&mock).await;
    for i in 0..100 {
        let made = daemon
            .post(
                "/v1/agents",
                json!({"name": format!("a{i}"), "template": "quick"}),
            )
            .await;
        assert_eq!(made["name"], format!("a{i}"), "{made}");
    }
    let client = Arc::new(Client::connect(&addr, &fingerprint).await.unwrap());
    let token = daemon.token().to_owned();
    let mut tasks = Vec::new();
    for i in 0..100 {
        let (client, token) = (client.clone(), token.clone());
        tasks.push(tokio::spawn(async move {
            let mut conversation = client.open(&token, &format!("a{i}")).await.unwrap();
            let said = conversation
                .say(&format!("please answer q-{i}"), None, |_| {})
                .await
                .unwrap();
            (i, answer_of(&said.events))
        }));
    }
    for task in tasks {
        let (i, answer) = task.await.unwrap();
        assert_eq!(answer, Some(format!("answer to q-{i}")), "conversation {i}");
    }
    // One connection carried them all, and is still open.
    assert!(client.connection().close_reason().is_none());
    assert_eq!(mock.requests().len(), 100);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_frames_end_their_stream_and_a_revoked_token_ends_the_connection() {
    let mock = answering_mock().await;
    let (home, _daemon, addr, fingerprint) = quic_daemon(&mock).await;
    spawn(&home, "ada");
    let token = make_token(&home, "laptop", "operator");
    let client = Client::connect(&addr, &fingerprint).await.unwrap();

    // A frame announcing 2 MiB is refused before it is read.
    let (mut send, mut recv) = client.open_raw().await.unwrap();
    send.write_all(&(2u32 << 20).to_be_bytes()).await.unwrap();
    // The gateway may already have told the client to stop sending: either is right.
    match send.write_all(&[b'x'; 1024]).await {
        Ok(()) => {}
        Err(quinn::WriteError::Stopped(code)) => assert_eq!(code, close::REFUSED.into()),
        Err(other) => panic!("{other}"),
    }
    let refused: ServerFrame = reef_quic::frame::read_frame(&mut recv)
        .await
        .unwrap()
        .unwrap();
    assert!(
        matches!(&refused, ServerFrame::Error { code: ErrorCode::TooLarge, message } if message.contains("1048576")),
        "{refused:?}"
    );
    // Not JSON of the protocol.
    let (mut send, mut recv) = client.open_raw().await.unwrap();
    send.write_all(&5u32.to_be_bytes()).await.unwrap();
    send.write_all(b"hello").await.unwrap();
    let refused: ServerFrame = reef_quic::frame::read_frame(&mut recv)
        .await
        .unwrap()
        .unwrap();
    assert!(
        matches!(
            refused,
            ServerFrame::Error {
                code: ErrorCode::BadFrame,
                ..
            }
        ),
        "{refused:?}"
    );
    // A message before hello.
    let (mut send, mut recv) = client.open_raw().await.unwrap();
    reef_quic::frame::write_frame(&mut send, &json!({"type": "message", "text": "hi"}))
        .await
        .unwrap();
    let refused: ServerFrame = reef_quic::frame::read_frame(&mut recv)
        .await
        .unwrap()
        .unwrap();
    assert!(
        matches!(&refused, ServerFrame::Error { code: ErrorCode::BadFrame, message } if message.contains("hello")),
        "{refused:?}"
    );
    // A wrong token, an agent that does not exist.
    let wrong = client.open("reef_wrong", "ada").await.err().unwrap();
    assert!(
        matches!(
            wrong,
            ClientError::Refused {
                code: ErrorCode::Unauthorized,
                ..
            }
        ),
        "{wrong}"
    );
    let missing = client.open(&token, "nobody").await.err().unwrap();
    assert!(
        matches!(
            missing,
            ClientError::Refused {
                code: ErrorCode::NotFound,
                ..
            }
        ),
        "{missing}"
    );

    // The connection survived all of that: a conversation works on it.
    let mut conversation = client.open(&token, "ada").await.unwrap();
    let said = conversation
        .say("still here q-8", None, |_| {})
        .await
        .unwrap();
    assert_eq!(answer_of(&said.events).as_deref(), Some("answer to q-8"));
    // The same key again is a duplicate: acknowledged, not delivered twice.
    let key = Some("k-1".to_owned());
    let first = conversation
        .say("keyed q-9", key.clone(), |_| {})
        .await
        .unwrap();
    let again = conversation.say("keyed q-9", key, |_| {}).await.unwrap();
    assert!(!first.duplicate && again.duplicate && again.events.is_empty());
    assert_eq!(again.inbox_id, first.inbox_id);
    assert_eq!(mock.requests().len(), 2);

    // Revoking the token ends the connection.
    reef(&home)
        .args(["gateway", "token", "revoke", "laptop"])
        .assert()
        .success();
    let closed = tokio::time::timeout(Duration::from_secs(120), client.connection().closed())
        .await
        .expect("the connection outlived its revoked token");
    match closed {
        quinn::ConnectionError::ApplicationClosed(reason) => {
            assert_eq!(reason.error_code, close::REVOKED.into());
            assert!(String::from_utf8_lossy(&reason.reason).contains("laptop"));
        }
        other => panic!("closed otherwise: {other}"),
    }
    // And the token opens nothing any more.
    let client = Client::connect(&addr, &fingerprint).await.unwrap();
    let revoked = client.open(&token, "ada").await.err().unwrap();
    assert!(
        matches!(
            revoked,
            ClientError::Refused {
                code: ErrorCode::Revoked,
                ..
            }
        ),
        "{revoked}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aioquic_speaks_the_documented_framing_to_the_gateway() {
    let python = venv_python("aioquic", "aioquic>=1.2,<2");
    let mock = answering_mock().await;
    let (home, daemon, addr, _fingerprint) = quic_daemon(&mock).await;
    spawn(&home, "ada");
    let script = home.path().join("aioquic_client.py");
    std::fs::write(&script, include_str!("../python/aioquic_client.py")).unwrap();
    let (host, port) = addr.rsplit_once(':').unwrap();
    let cert = home.reef_home().join("tls/cert.pem");
    let out = tokio::process::Command::new(&python)
        .arg(&script)
        .args([
            host,
            port,
            cert.to_str().unwrap(),
            "ada",
            "from python q-10",
        ])
        .env("REEF_TOKEN", daemon.token())
        .output()
        .await
        .unwrap();
    let printed = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "aioquic failed: {}\n{printed}",
        String::from_utf8_lossy(&out.stderr)
    );
    let frames: Vec<Value> = printed
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(frames[0]["type"], "ready");
    assert_eq!(frames[0]["agent"], "ada");
    assert_eq!(frames[1]["type"], "accepted");
    let answer = frames
        .iter()
        .find(|f| f["event"]["msg"]["type"] == "assistant_message")
        .unwrap();
    assert_eq!(answer["event"]["msg"]["text"], "answer to q-10");
    assert_eq!(frames.last().unwrap()["event"]["msg"]["type"], "turn_ended");
    assert!(
        mock.requests()[0]
            .last_user_text()
            .unwrap()
            .contains("from python q-10")
    );
}
