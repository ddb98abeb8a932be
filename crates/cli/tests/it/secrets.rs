//! Secrets by reference: a `shell` call names a configured secret, the command gets its value
//! in its environment, and neither the model nor the transcript ever sees the value.

use crate::{config_for, last_transcript, reef};
use reef_test_support::{MockLlm, MockReply, TestHome};
use serde_json::{Value, json};

const VALUE: &str = "s3cr3t-deploy-7Q2x";

#[test]
fn a_secret_reaches_the_command_but_never_the_model_or_the_transcript() {
    let mock = MockLlm::start_blocking(vec![
        MockReply::tool_call(
            "shell",
            json!({
                "command": "printf %s \"$DEPLOY_TOKEN\" > used.txt; echo token=$DEPLOY_TOKEN",
                "secrets": ["DEPLOY_TOKEN"]
            }),
        ),
        // The same variable without asking for it: not set.
        MockReply::tool_call(
            "shell",
            json!({"command": "echo unasked=${DEPLOY_TOKEN:-unset}"}),
        ),
        // A file the command wrote holds the value: reading it back is redacted too.
        MockReply::tool_call("read_file", json!({"path": "used.txt"})),
        MockReply::tool_call(
            "shell",
            json!({"command": "true", "secrets": ["NO_SUCH_SECRET"]}),
        ),
        MockReply::text("deployed"),
    ]);
    let home = TestHome::new();
    home.write_config(&format!(
        "{}\n[secrets.DEPLOY_TOKEN]\nenv = \"REEF_TEST_DEPLOY\"\ndescription = \"deploys the site\"\n",
        config_for(&mock, "openai-chat", false)
    ));
    let out = reef(&home)
        .env("MOCK_API_KEY", "k")
        .env("REEF_TEST_DEPLOY", VALUE)
        .args(["run", "deploy it"])
        .assert()
        .success();
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(stdout.contains("deployed"), "{stdout}");

    // The command really had the value.
    let used = std::fs::read_to_string(home.workspace().join("used.txt")).unwrap();
    assert_eq!(used, VALUE);

    let requests = mock.requests();
    assert_eq!(requests.len(), 5);
    // The model is offered the secret by name and description only.
    let shell = requests[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "shell")
        .unwrap()
        .clone();
    let param = &shell["function"]["parameters"]["properties"]["secrets"];
    assert_eq!(param["items"]["enum"], json!(["DEPLOY_TOKEN"]));
    assert!(
        param["description"]
            .as_str()
            .unwrap()
            .contains("DEPLOY_TOKEN (deploys the site)"),
        "{param}"
    );
    // Results come back redacted, and nothing the model was ever sent holds the value.
    let results = requests[4].tool_results();
    assert_eq!(results.len(), 4, "{results:?}");
    assert!(
        results[0].contains("token=[secret DEPLOY_TOKEN]"),
        "{}",
        results[0]
    );
    assert!(results[1].contains("unasked=unset"), "{}", results[1]);
    assert!(
        results[2].contains("[secret DEPLOY_TOKEN]"),
        "{}",
        results[2]
    );
    assert!(
        results[3].contains("unknown secret `NO_SUCH_SECRET`")
            && results[3].contains("DEPLOY_TOKEN"),
        "{}",
        results[3]
    );
    for (i, request) in requests.iter().enumerate() {
        assert!(
            !request.body.to_string().contains(VALUE),
            "request {i} carries the secret value"
        );
    }
    let transcript: Value = last_transcript(&home);
    assert!(
        !transcript.to_string().contains(VALUE),
        "the transcript holds the secret value"
    );
    assert!(!stdout.contains(VALUE), "{stdout}");
}

const VAULTED: &str = "vlt-9fK2mQ7xR4tW8zY1pL6n";
const PASSPHRASE: &str = "tide pool anemone";

/// `reef secrets …` with the vault's passphrase in the environment and `stdin` piped in.
fn secrets_cmd(
    home: &TestHome,
    passphrase: &str,
    args: &[&str],
    stdin: &str,
) -> std::process::Output {
    reef(home)
        .env("REEF_VAULT_PASSPHRASE", passphrase)
        .arg("secrets")
        .args(args)
        .write_stdin(stdin)
        .output()
        .unwrap()
}

/// Every file under `dir`, read whole.
fn all_files(dir: &std::path::Path, out: &mut Vec<(std::path::PathBuf, Vec<u8>)>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        let kind = entry.file_type().unwrap();
        if kind.is_dir() {
            all_files(&path, out);
        } else if kind.is_file() {
            out.push((path.clone(), std::fs::read(&path).unwrap()));
        }
    }
}

#[test]
fn a_vault_secret_reaches_the_command_and_nowhere_else() {
    let mock = MockLlm::start_blocking(vec![
        MockReply::tool_call(
            "shell",
            json!({
                "command": "printf %s \"$DEPLOY_TOKEN\" | sha256sum; echo raw=$DEPLOY_TOKEN",
                "secrets": ["DEPLOY_TOKEN"]
            }),
        ),
        // A with-approval secret: a plain run cannot wait for the operator.
        MockReply::tool_call(
            "shell",
            json!({"command": "true", "secrets": ["APPROVED_ONLY"]}),
        ),
        // An only-for secret bound to a domain: a command could send it anywhere.
        MockReply::tool_call("shell", json!({"command": "true", "secrets": ["API_KEY"]})),
        MockReply::text("deployed"),
    ]);
    let home = TestHome::new();
    home.write_config(&config_for(&mock, "openai-chat", false));

    let set = |name: &str, extra: &[&str], value: &str| {
        let mut args = vec!["set", name];
        args.extend_from_slice(extra);
        let out = secrets_cmd(&home, PASSPHRASE, &args, &format!("{value}\n"));
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    assert_eq!(
        set(
            "DEPLOY_TOKEN",
            &["--only-for", "tool:shell", "--description", "deploys"],
            VAULTED
        )
        .trim(),
        "DEPLOY_TOKEN: stored in the vault (only-for tool:shell)"
    );
    set(
        "APPROVED_ONLY",
        &["--policy", "with-approval"],
        "approval-needed-value-1",
    );
    set(
        "API_KEY",
        &["--only-for", "domain:api.example.com"],
        "api-key-value-0123456",
    );

    // Bad input is named.
    let short = secrets_cmd(&home, PASSPHRASE, &["set", "SHORT"], "abc\n");
    assert_eq!(short.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&short.stderr).contains("shorter than 8 characters"));
    let bad = secrets_cmd(
        &home,
        PASSPHRASE,
        &["set", "X", "--only-for", "disk:/"],
        VAULTED,
    );
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--only-for \"disk:/\""));

    // A wrong passphrase fails clearly, for the CLI and for a run.
    let wrong = secrets_cmd(&home, "not the passphrase", &["set", "OTHER"], VAULTED);
    assert!(!wrong.status.success());
    let err = String::from_utf8_lossy(&wrong.stderr);
    assert!(
        err.contains("wrong passphrase: it does not open this vault"),
        "{err}"
    );
    let run = reef(&home)
        .env("MOCK_API_KEY", "k")
        .env("REEF_VAULT_PASSPHRASE", "not the passphrase")
        .args(["run", "deploy it"])
        .output()
        .unwrap();
    assert!(!run.status.success());
    assert!(String::from_utf8_lossy(&run.stderr).contains("wrong passphrase"));
    assert!(
        mock.requests().is_empty(),
        "a run with a locked vault reached the model"
    );

    let out = reef(&home)
        .env("MOCK_API_KEY", "k")
        .env("REEF_VAULT_PASSPHRASE", PASSPHRASE)
        .args(["run", "deploy it"])
        .assert()
        .success();
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(stdout.contains("deployed"), "{stdout}");

    let requests = mock.requests();
    assert_eq!(requests.len(), 4);
    let results = requests[3].tool_results();
    // The command had the value: its digest is what the value hashes to.
    let digest = {
        use sha2::Digest as _;
        let d = sha2::Sha256::digest(VAULTED.as_bytes());
        d.iter().map(|b| format!("{b:02x}")).collect::<String>()
    };
    assert!(results[0].contains(&digest), "{}", results[0]);
    assert!(
        results[0].contains("raw=[secret DEPLOY_TOKEN]"),
        "{}",
        results[0]
    );
    assert!(
        results[1].contains("secret `APPROVED_ONLY` is used only with the operator's approval"),
        "{}",
        results[1]
    );
    assert!(
        results[2].contains(
            "secret `API_KEY` may be given only to domain:api.example.com, not to tool:shell"
        ),
        "{}",
        results[2]
    );

    // The value, in any encoding, is nowhere: not in what the model was sent, the transcript,
    // the audit log, nor any file under reef's home (the store, its journal, the vault).
    let forms = reef_security::leak::forms(VAULTED);
    let holds = |text: &[u8]| {
        forms
            .iter()
            .any(|f| text.windows(f.len()).any(|w| w == f.as_bytes()))
    };
    for (i, request) in requests.iter().enumerate() {
        assert!(!holds(request.body.to_string().as_bytes()), "request {i}");
    }
    assert!(!holds(last_transcript(&home).to_string().as_bytes()));
    let audit = reef(&home)
        .args(["audit", "query", "--json", "--kind", "secret."])
        .output()
        .unwrap();
    let audit_text = String::from_utf8(audit.stdout).unwrap();
    assert!(!holds(audit_text.as_bytes()));
    assert!(audit_text.contains("\"secret.used\""), "{audit_text}");
    assert!(audit_text.contains("\"secret.set\""), "{audit_text}");
    let mut files = Vec::new();
    all_files(&home.reef_home(), &mut files);
    assert!(files.iter().any(|(p, _)| p.ends_with("vault")));
    for (path, bytes) in &files {
        assert!(!holds(bytes), "{} holds the value", path.display());
    }
    assert!(!stdout.contains(VAULTED));

    // The list shows the policy and the last use.
    let list = secrets_cmd(&home, PASSPHRASE, &["list"], "");
    let list = String::from_utf8(list.stdout).unwrap();
    let line = list
        .lines()
        .find(|l| l.starts_with("DEPLOY_TOKEN"))
        .unwrap();
    assert!(
        line.contains("vault") && line.contains("only-for tool:shell"),
        "{line}"
    );
    assert!(line.contains("(shell)"), "{line}");
    let never = list.lines().find(|l| l.starts_with("API_KEY")).unwrap();
    assert!(never.ends_with("never"), "{never}");
}
