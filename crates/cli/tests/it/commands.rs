//! `config show`, `sessions`, `doctor` and `chat`.

use crate::{config_for, home_for, reef};
use reef_test_support::{Engines, MockLlm, MockReply, TestHome};
use serde_json::Value;

#[test]
fn config_show_reports_origins_and_masks_secrets() {
    let mock = MockLlm::start_blocking(vec![]);
    let home = home_for(&mock, "openai-chat", true);
    let out = reef(&home)
        .env("MOCK_API_KEY", "sk-super-secret-value")
        .env("REEF_MODEL", "env-model")
        .args(["-c", "agent.max_rounds=7", "config", "show", "--json"])
        .assert()
        .success();
    let text = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(!text.contains("super-secret"), "secret leaked: {text}");
    let entries: Vec<Value> = serde_json::from_str(&text).unwrap();
    let find = |key: &str| entries.iter().find(|e| e["key"] == key).cloned().unwrap();
    assert_eq!(find("providers.main.model")["value"], "\"env-model\"");
    assert_eq!(
        find("providers.main.model")["origin"]["source"],
        "REEF_MODEL"
    );
    assert_eq!(find("agent.max_rounds")["origin"]["kind"], "cli");
    assert_eq!(
        find("providers.main.api_key")["origin"]["source"],
        "MOCK_API_KEY"
    );
    assert_eq!(find("agent.max_wall_secs")["origin"]["kind"], "default");

    let human = reef(&home)
        .env("MOCK_API_KEY", "sk-super-secret-value")
        .args(["config", "show"])
        .assert()
        .success();
    let text = String::from_utf8_lossy(&human.get_output().stdout).into_owned();
    assert!(
        text.contains("providers.main.base_url") && !text.contains("super-secret"),
        "{text}"
    );
}

#[test]
fn sessions_list_is_empty_then_shows_runs() {
    let mock = MockLlm::start_blocking(vec![MockReply::text("hello")]);
    let home = home_for(&mock, "openai-chat", true);
    reef(&home)
        .args(["sessions", "list"])
        .assert()
        .success()
        .stdout(predicates::str::contains("no sessions yet"));
    reef(&home).args(["run", "greet me"]).assert().success();
    reef(&home)
        .args(["sessions", "list"])
        .assert()
        .success()
        .stdout(predicates::str::contains("greet me"));
    reef(&home)
        .args(["sessions", "show", "ses_does_not_exist"])
        .assert()
        .code(2);
}

#[test]
fn doctor_checks_config_store_provider_and_isolation() {
    let mock = MockLlm::start_blocking(vec![]);
    let home = home_for(&mock, "openai-chat", true);
    let out = reef(&home).args(["doctor", "--json"]).assert().success();
    let checks: Vec<Value> = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let names: Vec<&str> = checks.iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["config", "store", "provider", "isolation"]);
    assert_eq!(checks[2]["status"], "ok", "{}", checks[2]);

    // An unreachable provider is a failure with a non-zero exit.
    let home = TestHome::new();
    home.write_config(
        &config_for(&mock, "openai-chat", true).replace(&mock.base_url(), "http://127.0.0.1:9/v1"),
    );
    let out = reef(&home).args(["doctor"]).assert().code(1);
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(stdout.contains("[FAIL] provider"), "{stdout}");
}

#[test]
fn doctor_checks_both_engines_in_cluster_mode() {
    let mock = MockLlm::start_blocking(vec![]);
    let engines = Engines::start();
    let home = TestHome::new();
    let cluster = |database: &str, nats: &str| {
        format!(
            "{}\n[cluster]\nenabled = true\nnode_name = \"n1\"\ndatabase_url = \"{database}\"\n\
             nats_url = \"{nats}\"\n",
            config_for(&mock, "openai-chat", true)
        )
    };
    home.write_config(&cluster(engines.database_url(), engines.nats_url()));
    let out = reef(&home).args(["doctor", "--json"]).assert().success();
    let checks: Vec<Value> = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let names: Vec<&str> = checks.iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "config",
            "store",
            "provider",
            "database",
            "bus",
            "isolation"
        ]
    );
    assert_eq!(checks[3]["status"], "ok", "{}", checks[3]);
    assert!(
        checks[3]["detail"]
            .as_str()
            .unwrap()
            .contains("; no pgvector: vectors searched in each node's RAM)"),
        "{}",
        checks[3]
    );
    assert_eq!(checks[4]["status"], "ok", "{}", checks[4]);
    assert!(
        checks[4]["detail"]
            .as_str()
            .unwrap()
            .contains("JetStream on"),
        "{}",
        checks[4]
    );

    // Neither engine answering: two failures, each naming its address, and exit 1.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    home.write_config(&cluster(
        &format!("postgres://reef@127.0.0.1:{closed}/reef"),
        &format!("nats://127.0.0.1:{closed}"),
    ));
    let out = reef(&home).args(["doctor"]).assert().code(1);
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    let line = |name: &str| {
        stdout
            .lines()
            .find(|l| l.contains(&format!("] {name}")))
            .unwrap_or_default()
            .to_owned()
    };
    let (database, bus) = (line("database"), line("bus"));
    assert!(
        database.starts_with("[FAIL]") && database.contains(&format!("127.0.0.1:{closed}/reef")),
        "{stdout}"
    );
    assert!(
        bus.starts_with("[FAIL]") && bus.contains(&format!("NATS at 127.0.0.1:{closed}")),
        "{stdout}"
    );
    // A node whose database cannot be reached does not start (nor run alone on SQLite).
    let out = reef(&home).args(["serve"]).assert().code(1);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(
        stderr.contains(&format!("127.0.0.1:{closed}/reef")) && stderr.contains("PostgreSQL"),
        "{stderr}"
    );
}

#[test]
fn migrate_copies_a_home_into_postgres_and_refuses_a_database_with_data() {
    let mock = MockLlm::start_blocking(vec![MockReply::text("hello")]);
    let home = home_for(&mock, "openai-chat", true);
    reef(&home).args(["run", "greet me"]).assert().success();
    let engines = Engines::start();
    let out = reef(&home)
        .args(["migrate", "--to", "postgres", engines.database_url()])
        .assert()
        .success();
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(
        stdout.contains("every count matches") && stdout.contains("audit log verifies"),
        "{stdout}"
    );
    let row = |table: &str| {
        stdout
            .lines()
            .find(|l| l.split_whitespace().next() == Some(table))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|n| n.parse::<u64>().ok())
    };
    assert_eq!(row("sessions"), Some(1), "{stdout}");
    assert_eq!(row("messages"), Some(2), "{stdout}");
    assert_eq!(row("model_usage"), Some(1), "{stdout}");

    // Copied once: a second copy would mix two homes.
    let out = reef(&home)
        .args(["migrate", "--to", "postgres", engines.database_url()])
        .assert()
        .code(2);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(stderr.contains("already holds reef data"), "{stderr}");
    reef(&home)
        .args(["migrate", "--to", "postgres", "not a url"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("URL: not a PostgreSQL URL"));
}

#[test]
fn cluster_status_shows_the_nodes_from_any_nodes_config() {
    let mock = MockLlm::start_blocking(vec![]);
    let home = TestHome::new();
    // Without cluster mode there is no cluster to show.
    home.write_config(&config_for(&mock, "openai-chat", true));
    let out = reef(&home).args(["cluster", "status"]).assert().code(2);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(stderr.contains("[cluster] enabled = true"), "{stderr}");

    let engines = Engines::start();
    home.write_config(&format!(
        "{}\n[cluster]\nenabled = true\ndatabase_url = \"{}\"\nnats_url = \"{}\"\n",
        config_for(&mock, "openai-chat", true),
        engines.database_url(),
        engines.nats_url()
    ));
    let out = reef(&home).args(["cluster", "status"]).assert().success();
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(stdout.contains("no node has joined"), "{stdout}");

    // Two nodes join (as `reef serve --cluster` will), one of them leaving.
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let store = reef_store::PgStore::connect(engines.database_url(), None)
            .await
            .unwrap();
        let first = store
            .join_cluster("eu-1", std::time::Duration::from_secs(600), None)
            .await
            .unwrap();
        // Three events in the history, of which eu-1's bus has read one, without NATS.
        let keys = tempfile::tempdir().unwrap();
        let events = reef_store::Store::connect_postgres(engines.database_url(), None, keys.path())
            .await
            .unwrap();
        let mut seqs = Vec::new();
        for i in 0..3 {
            let event = events
                .append_event("test.tick", None, serde_json::json!({"i": i}))
                .await
                .unwrap();
            seqs.push(event.seq);
        }
        store.heartbeat(&first, false, seqs[0]).await.unwrap();
        let leaving = store
            .join_cluster("eu-2", std::time::Duration::from_secs(600), Some(5))
            .await
            .unwrap();
        store.release_agents(&leaving).await.unwrap();
    });
    let out = reef(&home)
        .args(["cluster", "status", "--json"])
        .assert()
        .success();
    let report: Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(
        report["nodes"],
        serde_json::json!([
            {"name": "eu-1", "alive": true, "draining": false, "agents": 0, "bus": "polling",
             "bus_lag": 2},
            {"name": "eu-2", "alive": true, "draining": true, "agents": 0, "bus": "nats",
             "bus_lag": 0},
        ]),
        "{report}"
    );
    assert_eq!(report["leases"], serde_json::json!([]));
    let out = reef(&home).args(["cluster", "status"]).assert().success();
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    let row = stdout
        .lines()
        .find(|l| l.starts_with("eu-2"))
        .unwrap_or_default();
    assert_eq!(
        row.split_whitespace().collect::<Vec<_>>(),
        ["eu-2", "yes", "yes", "nats", "0", "0"],
        "{stdout}"
    );
}

#[test]
fn chat_runs_turns_and_slash_commands() {
    let mock = MockLlm::start_blocking(vec![
        MockReply::text("hi there"),
        MockReply::text("still here"),
    ]);
    let home = home_for(&mock, "openai-chat", true);
    let out = reef(&home)
        .arg("chat")
        .write_stdin("hello\n/cost\n/model\n/nonsense\nare you there?\n/quit\n")
        .assert()
        .success();
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(
        stdout.contains("hi there") && stdout.contains("still here"),
        "{stdout}"
    );
    assert!(stderr.contains("1 request(s)"), "/cost: {stderr}");
    assert!(
        stderr.contains("current: main (mock-model)"),
        "/model: {stderr}"
    );
    assert!(stderr.contains("unknown command /nonsense"), "{stderr}");
    let requests = mock.requests();
    assert_eq!(requests.len(), 2);
    assert!(
        requests[1].body.to_string().contains("hi there"),
        "second turn carries the first"
    );
}
