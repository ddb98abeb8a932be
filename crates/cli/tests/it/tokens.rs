//! `reef token` and a daemon serving https: a scoped token made on the command line reads but
//! cannot change, is refused once revoked; the CLI's own client reaches the daemon over TLS
//! with its certificate pinned; the fingerprint `reef serve` prints is the certificate's.

use crate::daemon::{Daemon, daemon_home};
use crate::reef;
use reef_test_support::{MockLlm, MockReply};
use serde_json::{Value, json};

#[tokio::test]
async fn scoped_tokens_from_the_command_line_against_a_daemon_over_tls() {
    let mock = MockLlm::start(vec![MockReply::text("noted")]).await;
    let home = daemon_home(&mock);
    let config = std::fs::read_to_string(home.config_path()).unwrap();
    home.write_config(&format!("{config}\n[daemon.tls]\nself_signed = true\n"));

    // Bad input names the argument.
    let out = reef(&home)
        .args(["token", "create", "x", "--scope", "admin"])
        .assert()
        .code(2);
    let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(
        err.contains("--scope") && err.contains("read-only"),
        "{err}"
    );
    let out = reef(&home)
        .args(["token", "create", "a b", "--scope", "operator"])
        .assert()
        .code(2);
    let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(err.contains("NAME"), "{err}");

    let out = reef(&home)
        .args(["token", "create", "watcher", "--scope", "read-only"])
        .assert()
        .success();
    let secret = String::from_utf8_lossy(&out.get_output().stdout)
        .trim()
        .to_owned();
    assert!(
        secret.starts_with("reef_") && secret.len() == 69,
        "{secret}"
    );
    let said = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(
        said.contains("read-only") && said.contains("600/min"),
        "{said}"
    );
    // A second token of the same name is refused; the token itself is nowhere in the store.
    reef(&home)
        .args(["token", "create", "watcher", "--scope", "operator"])
        .assert()
        .code(2);
    let db = std::fs::read(home.reef_home().join("reef.db")).unwrap();
    assert!(
        !db.windows(secret.len()).any(|w| w == secret.as_bytes()),
        "the token's text is stored"
    );

    let daemon = Daemon::start(&home).await;
    assert!(daemon.base().starts_with("https://"), "{}", daemon.base());
    let log = std::fs::read_to_string(home.path().join("serve.log")).unwrap();
    let cert = reef_server::tls::client_pin(&reef_config::TlsSource::SelfSigned, &home.reef_home())
        .unwrap();
    let fingerprint = reef_server::tls::fingerprint(cert.as_ref());
    assert!(log.contains(&fingerprint), "{log}");

    // The CLI's client speaks TLS to it.
    reef(&home)
        .args(["agent", "spawn", "ada", "--template", "worker"])
        .assert()
        .success();
    let out = reef(&home).args(["agent", "list"]).assert().success();
    assert!(String::from_utf8_lossy(&out.get_output().stdout).contains("ada"));

    // The read-only token reads, and changes nothing.
    let http = daemon.http();
    let agents: Value = http
        .get(format!("{}/v1/agents", daemon.base()))
        .bearer_auth(&secret)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(agents[0]["name"], "ada");
    let refused = http
        .post(format!("{}/v1/agents/ada/messages", daemon.base()))
        .bearer_auth(&secret)
        .json(&json!({"text": "hello"}))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 403);
    let text = refused.text().await.unwrap();
    assert!(
        text.contains("watcher") && text.contains("read-only"),
        "{text}"
    );

    let out = reef(&home).args(["token", "list"]).assert().success();
    let listed = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(
        listed.contains("watcher") && listed.contains("read-only"),
        "{listed}"
    );
    assert!(!listed.contains(&secret));

    reef(&home)
        .args(["token", "revoke", "watcher"])
        .assert()
        .success();
    let after = http
        .get(format!("{}/v1/agents", daemon.base()))
        .bearer_auth(&secret)
        .send()
        .await
        .unwrap();
    assert_eq!(after.status(), 401);
    let out = reef(&home)
        .args(["token", "list", "--json"])
        .assert()
        .success();
    let listed: Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert!(listed[0]["revoked_at"].is_string(), "{listed}");
    reef(&home)
        .args(["token", "revoke", "nobody"])
        .assert()
        .code(2);

    // Both changes are in the audit log, which still verifies.
    let out = reef(&home)
        .args(["audit", "query", "--kind", "token.", "--json"])
        .assert()
        .success();
    let records = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(
        records.contains("token.created") && records.contains("token.revoked"),
        "{records}"
    );
    assert!(!records.contains(&secret));
    reef(&home).args(["audit", "verify"]).assert().success();
}
