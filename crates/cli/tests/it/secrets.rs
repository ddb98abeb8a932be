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
