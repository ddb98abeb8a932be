//! `reef memory`: add, search, list, forget and import through the binary, namespaced per
//! agent; keyword-only when no embedder is configured (and saying so); hybrid search with the
//! real MiniLM model surfacing both an exact-keyword hit and a paraphrase.

use crate::reef;
use reef_test_support::TestHome;
use serde_json::Value;

fn json(out: &assert_cmd::assert::Assert) -> Value {
    serde_json::from_slice(&out.get_output().stdout).unwrap()
}

fn keyword_home() -> TestHome {
    let home = TestHome::new();
    home.write_config("[memory]\nembedder = \"none\"\n");
    home
}

fn add(home: &TestHome, agent: &str, text: &str) -> i64 {
    let out = reef(home)
        .args(["memory", "add", text, "--agent", agent, "--json"])
        .assert()
        .success();
    json(&out)["item"]["id"].as_i64().unwrap()
}

fn search(home: &TestHome, agent: &str, query: &str, extra: &[&str]) -> Value {
    let out = reef(home)
        .args(["memory", "search", query, "--agent", agent, "--json"])
        .args(extra)
        .assert()
        .success();
    json(&out)
}

fn hit_texts(outcome: &Value) -> Vec<String> {
    outcome["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["text"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn agents_keep_private_memory_apart_and_share_the_shared_namespace() {
    let home = keyword_home();
    add(
        &home,
        "alice",
        "The staging database password rotates every Friday.",
    );
    add(
        &home,
        "bob",
        "Bob's staging notes: the database lives on db-eu-3.",
    );
    reef(&home)
        .args([
            "memory",
            "add",
            "Everyone: the staging freeze starts Monday.",
            "--shared",
        ])
        .assert()
        .success();

    let alice = search(&home, "alice", "staging database", &[]);
    let texts = hit_texts(&alice);
    assert!(
        texts.iter().any(|t| t.contains("rotates every Friday")),
        "{texts:?}"
    );
    assert!(
        texts.iter().any(|t| t.contains("freeze starts Monday")),
        "shared is readable"
    );
    assert!(
        !texts.iter().any(|t| t.contains("db-eu-3")),
        "bob's is private: {texts:?}"
    );
    assert_eq!(alice["mode"], "keyword");
    let note = alice["note"].as_str().unwrap();
    assert!(note.starts_with("keyword search only"), "{note}");

    let listed = reef(&home)
        .args(["memory", "list", "--agent", "bob", "--json"])
        .assert()
        .success();
    let namespaces: Vec<String> = json(&listed)
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["namespace"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        namespaces,
        ["shared", "agent:bob"],
        "newest first, no alice"
    );

    // The human form says the search is keyword-only too.
    reef(&home)
        .args(["memory", "search", "freeze", "--agent", "alice"])
        .assert()
        .success()
        .stderr(predicates::str::contains("keyword search only"))
        .stdout(predicates::str::contains("freeze starts Monday"));
}

#[test]
fn forgetting_is_limited_to_the_agents_own_namespace() {
    let home = keyword_home();
    let id = add(&home, "alice", "Alice's locker code is 4471.");
    reef(&home)
        .args(["memory", "forget", &id.to_string(), "--agent", "bob"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains(format!(
            "no memory #{id} in agent:bob"
        )));
    assert_eq!(hit_texts(&search(&home, "alice", "locker", &[])).len(), 1);
    reef(&home)
        .args(["memory", "forget", &id.to_string(), "--agent", "alice"])
        .assert()
        .success();
    assert!(hit_texts(&search(&home, "alice", "locker", &[])).is_empty());
}

#[test]
fn bad_arguments_name_the_field() {
    let home = keyword_home();
    reef(&home)
        .args(["memory", "search", "x", "--mode", "sideways"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("mode"));
    reef(&home)
        .args(["memory", "add", "x", "--agent", "two words"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("--agent"));
    reef(&home)
        .args(["memory", "search", "anything", "--mode", "vector"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("vector search needs an embedder"));
    reef(&home)
        .args(["memory", "import", "no-such-dir"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("DIR"));
}

#[test]
fn import_chunks_a_folder_and_reimports_only_what_changed() {
    let home = keyword_home();
    let notes = home.workspace().join("notes");
    std::fs::create_dir_all(notes.join("sub")).unwrap();
    std::fs::create_dir_all(notes.join(".git")).unwrap();
    let long: String = (0..60)
        .map(|i| format!("Paragraph {i} of the runbook covers step {i} of the failover drill. "))
        .collect();
    std::fs::write(notes.join("runbook.md"), &long).unwrap();
    std::fs::write(
        notes.join("sub/vendors.txt"),
        "Our DNS vendor is Gandi; the contract renews in May.",
    )
    .unwrap();
    std::fs::write(notes.join("image.png"), [0u8, 159, 146, 150]).unwrap();
    std::fs::write(notes.join("bad.txt"), [0xffu8, 0xfe, 0x00]).unwrap();
    std::fs::write(notes.join(".git/HEAD.md"), "ref: refs/heads/main").unwrap();

    let out = reef(&home)
        .args([
            "memory", "import", "notes", "--agent", "ops", "--tag", "docs", "--json",
        ])
        .assert()
        .success();
    let report = json(&out);
    assert_eq!(report["added"], 2, "{report}");
    let chunks = report["chunks"].as_u64().unwrap();
    assert!(chunks >= 5, "the runbook is split into chunks: {report}");
    let skipped = report["skipped"].to_string();
    assert!(
        skipped.contains("bad.txt") && skipped.contains("not UTF-8"),
        "{skipped}"
    );
    assert!(
        !skipped.contains("image.png"),
        "only text extensions are read"
    );

    let found = search(&home, "ops", "DNS vendor contract", &["--tag", "docs"]);
    let hits = found["hits"].as_array().unwrap();
    assert!(
        hits[0]["text"].as_str().unwrap().contains("Gandi"),
        "{found}"
    );
    assert!(
        hits[0]["source"]
            .as_str()
            .unwrap()
            .ends_with("sub/vendors.txt")
    );
    let step = search(&home, "ops", "step 42", &[]);
    assert!(
        hit_texts(&step)[0].contains("step 42"),
        "the chunk holding the words ranks first: {step}"
    );

    // Again: nothing changed.
    let again = reef(&home)
        .args(["memory", "import", "notes", "--agent", "ops", "--json"])
        .assert()
        .success();
    let again = json(&again);
    assert_eq!(
        (again["added"].as_u64(), again["unchanged"].as_u64()),
        (Some(0), Some(2))
    );
    // One file changed: replaced, not duplicated.
    std::fs::write(
        notes.join("sub/vendors.txt"),
        "Our DNS vendor is now Cloudflare.",
    )
    .unwrap();
    let changed = reef(&home)
        .args(["memory", "import", "notes", "--agent", "ops", "--json"])
        .assert()
        .success();
    assert_eq!(json(&changed)["updated"], 1);
    let texts = hit_texts(&search(&home, "ops", "DNS vendor", &[]));
    assert!(texts.iter().any(|t| t.contains("Cloudflare")), "{texts:?}");
    assert!(!texts.iter().any(|t| t.contains("Gandi")), "{texts:?}");
}

/// A home whose models directory is `~/.cache/reef/models` with the embedding model pulled
/// there (once; tests of this binary pulling at the same time take turns).
pub(crate) fn minilm_home() -> TestHome {
    static PULL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let cache = std::path::PathBuf::from(std::env::var("HOME").unwrap()).join(".cache/reef/models");
    let home = TestHome::new();
    home.write_config(&format!("[models]\ndir = \"{}\"\n", cache.display()));
    let _turn = PULL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    reef(&home)
        .args(["models", "pull", "minilm"])
        .assert()
        .success();
    home
}

/// With the real embedding model: hybrid search finds the item holding the exact identifier
/// and the one that only means the same thing.
#[test]
fn hybrid_search_with_minilm_surfaces_the_keyword_hit_and_the_paraphrase() {
    let home = minilm_home();
    for text in [
        "Incident INC-4471: the nightly export crashed on a full disk.",
        "We moved the weekly team sync to Thursdays at 10.",
        "The office coffee machine is descaled on the first Monday.",
        "Staging deploys need a green build on the main branch.",
        "Priya prefers written summaries over calls.",
    ] {
        let out = reef(&home)
            .args(["memory", "add", text, "--agent", "alice", "--json"])
            .assert()
            .success();
        assert_eq!(json(&out)["note"], Value::Null, "embedded on save");
    }
    let out = search(
        &home,
        "alice",
        "INC-4471 when is our recurring meeting",
        &["--limit", "2"],
    );
    assert_eq!(out["mode"], "hybrid");
    assert_eq!(out["note"], Value::Null);
    let texts = hit_texts(&out);
    assert!(texts.iter().any(|t| t.contains("INC-4471")), "{texts:?}");
    assert!(
        texts.iter().any(|t| t.contains("weekly team sync")),
        "{texts:?}"
    );

    let keyword = search(
        &home,
        "alice",
        "when is our recurring meeting",
        &["--mode", "keyword"],
    );
    assert!(
        !hit_texts(&keyword)
            .iter()
            .any(|t| t.contains("weekly team sync")),
        "no shared word: keyword alone misses the paraphrase"
    );
    let vector = search(
        &home,
        "alice",
        "when is our recurring meeting",
        &["--mode", "vector", "--limit", "1"],
    );
    assert!(
        hit_texts(&vector)[0].contains("weekly team sync"),
        "{vector}"
    );
}

/// The retrieval-quality check on the labelled set shipped with reef: on the queries held out
/// from choosing the fusion's weights, hybrid search is at least as good as keyword-only and
/// vector-only search for every kind of query, at recall@1 and recall@5, and better overall.
#[test]
fn hybrid_never_loses_to_either_side_on_the_held_out_queries() {
    let home = minilm_home();
    let out = reef(&home)
        .args([
            "bench",
            "memory",
            "--quality-only",
            "--json",
            "--threads",
            "2",
        ])
        .assert()
        .success();
    let report = json(&out);
    assert_eq!(report["documents"], 193, "{report}");
    assert_eq!(report["queries"], 100, "{report}");
    let quality = &report["quality"];
    assert_eq!(quality["held_out_queries"], 50, "{report}");
    let row = |ranking: &str| {
        quality["held_out"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["ranking"] == ranking)
            .unwrap_or_else(|| panic!("no {ranking} row: {report}"))
            .clone()
    };
    let (keyword, vector, hybrid) = (row("keyword"), row("vector"), row("hybrid"));
    let kinds = hybrid["by_kind"].as_object().unwrap();
    assert_eq!(kinds.len(), 5, "{report}");
    for (kind, at) in kinds {
        for k in 0..2 {
            let h = at[k].as_f64().unwrap();
            let best = keyword["by_kind"][kind][k]
                .as_f64()
                .unwrap()
                .max(vector["by_kind"][kind][k].as_f64().unwrap());
            assert!(
                h >= best,
                "{kind}, recall@{}: hybrid {h:.2} below {best:.2}: {report}",
                [1, 5][k]
            );
        }
    }
    for k in ["recall_at_1", "recall_at_5"] {
        let h = hybrid[k].as_f64().unwrap();
        assert!(
            h > keyword[k].as_f64().unwrap() && h > vector[k].as_f64().unwrap(),
            "{k}: {report}"
        );
    }
    // The weights configured by default are among the best the training half finds (most
    // cells won, then best mean recall): the int8 and f32 encoders tie several pairs there.
    let tuning = quality["tuning"].as_array().unwrap();
    let score = |e: &Value| (e[1].as_u64().unwrap(), e[2].as_f64().unwrap());
    let best = tuning
        .iter()
        .map(score)
        .fold((0, 0.0), |a, b| if b > a { b } else { a });
    let configured = tuning
        .iter()
        .find(|e| e[0][0] == report["keyword_weight"] && e[0][1] == report["identifier_weight"])
        .unwrap_or_else(|| panic!("the configured weights were not tried: {report}"));
    assert_eq!(score(configured), best, "{report}");
    assert!(
        report["scale"].is_null(),
        "--quality-only skips the scale test"
    );
}

/// An OpenAI-compatible embeddings endpoint instead of the local model: items and queries are
/// embedded by the provider (the mock server), and search is hybrid.
#[test]
fn a_provider_embedder_embeds_through_its_endpoint() {
    let mock = reef_test_support::MockLlm::start_blocking(Vec::new());
    let home = TestHome::new();
    home.write_config(&format!(
        "{}\n[memory]\nembedder = \"provider:main\"\nembedding_model = \"mock-embed\"\n",
        crate::config_for(&mock, "openai-chat", false)
    ));
    let mut cmd = reef(&home);
    cmd.env("MOCK_API_KEY", "sk-mock")
        .args(["memory", "add", "Backups run at 02:00 on nas-2.", "--json"])
        .assert()
        .success();
    let out = reef(&home)
        .env("MOCK_API_KEY", "sk-mock")
        .args(["memory", "search", "when do backups run", "--json"])
        .assert()
        .success();
    let outcome = json(&out);
    assert_eq!(outcome["mode"], "hybrid", "{outcome}");
    assert_eq!(outcome["note"], Value::Null);
    assert!(hit_texts(&outcome)[0].contains("nas-2"));
    let embedded: Vec<Value> = mock
        .requests()
        .into_iter()
        .filter(|r| r.path.ends_with("/embeddings"))
        .map(|r| r.body)
        .collect();
    assert_eq!(embedded.len(), 2, "the item, then the query");
    assert_eq!(embedded[0]["model"], "mock-embed");
    assert_eq!(embedded[0]["input"][0], "Backups run at 02:00 on nas-2.");
    assert_eq!(embedded[1]["input"][0], "when do backups run");
}

/// With the default embedder not pulled, memory works by keyword and names the pull command;
/// once the model files are there, the next search embeds what was saved and ranks by both.
#[test]
fn memory_saved_before_the_model_is_pulled_is_embedded_once_it_is() {
    let cached = minilm_home().load_config().models.dir;
    let home = TestHome::new();
    let models = home.reef_home().join("models");
    home.write_config(&format!("[models]\ndir = \"{}\"\n", models.display()));
    let out = reef(&home)
        .args([
            "memory",
            "add",
            "The VPN certificate expires on June 3.",
            "--json",
        ])
        .assert()
        .success();
    let note = json(&out)["note"].as_str().unwrap().to_owned();
    assert!(
        note.contains("not embedded") && note.contains("reef models pull minilm"),
        "{note}"
    );
    let before = search(&home, "main", "when does the VPN certificate expire", &[]);
    assert_eq!(before["mode"], "keyword");
    assert!(
        before["note"]
            .as_str()
            .unwrap()
            .contains("reef models pull minilm"),
        "{before}"
    );

    std::fs::create_dir_all(&models).unwrap();
    for file in [
        "minilm.safetensors",
        "minilm.tokenizer.json",
        "minilm.config.json",
    ] {
        std::os::unix::fs::symlink(cached.join(file), models.join(file)).unwrap();
    }
    let after = search(&home, "main", "when does the VPN certificate expire", &[]);
    assert_eq!(after["mode"], "hybrid", "{after}");
    assert_eq!(after["note"], Value::Null, "{after}");
    assert!(hit_texts(&after)[0].contains("June 3"));
}

/// `count` one-line notes in the workspace's `notes/`, `note-00.md` on, one chunk each.
fn write_rack_notes(home: &TestHome, count: usize) {
    let notes = home.workspace().join("notes");
    std::fs::create_dir_all(&notes).unwrap();
    for i in 0..count {
        std::fs::write(
            notes.join(format!("note-{i:02}.md")),
            format!("Note {i}: the rack {i} fan was replaced."),
        )
        .unwrap();
    }
}

/// An import of 40 files is stopped with Ctrl-C (SIGINT) while the provider holds its third
/// embedding request: the 32 chunks embedded stay, the command says how to go on, and the same
/// command embeds only the 8 left — no text is sent to the embedder twice.
#[test]
fn an_interrupted_import_goes_on_where_it_stopped() {
    let mock = reef_test_support::MockLlm::start_blocking(Vec::new());
    let home = TestHome::new();
    home.write_config(&format!(
        "{}\n[memory]\nembedder = \"provider:main\"\nembedding_model = \"mock-embed\"\n",
        crate::config_for(&mock, "openai-chat", false)
    ));
    write_rack_notes(&home, 40);
    let embedded = |mock: &reef_test_support::MockLlm| -> Vec<String> {
        mock.requests()
            .into_iter()
            .filter(|r| r.path.ends_with("/embeddings"))
            .flat_map(|r| {
                r.body["input"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_str().unwrap().to_owned())
                    .collect::<Vec<_>>()
            })
            .collect()
    };
    mock.hold_embedding_batches_after(Some(2));
    let reef_bin = reef(&home).get_program().to_owned();
    let child = std::process::Command::new(reef_bin)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home.path())
        .env("REEF_HOME", home.reef_home())
        .env("MOCK_API_KEY", "sk-mock")
        .current_dir(home.workspace())
        .args(["memory", "import", "notes", "--json"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The third request (texts 33 to 40) is being held.
    for _ in 0..3000 {
        if mock
            .requests()
            .iter()
            .filter(|r| r.path.ends_with("/embeddings"))
            .count()
            == 3
        {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert_eq!(embedded(&mock).len(), 40, "three batches were asked for");
    let status = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{out:?}");
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["added"], 40, "{report}");
    assert_eq!(report["embedded"], 32, "{report}");
    assert_eq!(report["waiting"], 8, "{report}");
    assert_eq!(report["interrupted"], true, "{report}");
    assert!(
        report["notes"][0]
            .as_str()
            .unwrap()
            .contains("run the same command again"),
        "{report}"
    );

    mock.hold_embedding_batches_after(None);
    let before = embedded(&mock);
    let out = reef(&home)
        .env("MOCK_API_KEY", "sk-mock")
        .args(["memory", "import", "notes", "--json"])
        .assert()
        .success();
    let report = json(&out);
    assert_eq!(report["unchanged"], 40, "{report}");
    assert_eq!(report["embedded"], 8, "{report}");
    assert_eq!(report["waiting"], 0, "{report}");
    let again: Vec<String> = embedded(&mock)[before.len()..].to_vec();
    assert_eq!(again.len(), 8, "{again:?}");
    // The held batch's texts, and nothing embedded before.
    assert_eq!(again, before[32..].to_vec());
    let search = reef(&home)
        .env("MOCK_API_KEY", "sk-mock")
        .args(["memory", "search", "rack 39 fan", "--json"])
        .assert()
        .success();
    let outcome = json(&search);
    assert_eq!(outcome["mode"], "hybrid", "{outcome}");
    assert_eq!(outcome["note"], Value::Null, "{outcome}");
}

/// Next to a running daemon, an import stores the text and leaves the embedding to the
/// daemon's background embedder; a search, asked of the daemon, meanwhile answers at once (its
/// query embedded, the waiting chunks found by keyword) and says what waits; once the daemon
/// has embedded them, search is hybrid with nothing waiting.
#[tokio::test]
async fn next_to_a_daemon_an_import_is_embedded_in_the_background() {
    let mock = reef_test_support::MockLlm::start_blocking(Vec::new());
    let home = TestHome::new();
    home.write_config(&format!(
        "[model]\ndefault = \"main\"\n\n[providers.main]\nwire_api = \"openai-chat\"\n\
         base_url = \"{}\"\nmodel = \"mock-model\"\n\n[memory]\nembedder = \"provider:main\"\n\
         embedding_model = \"mock-embed\"\n\n[daemon]\nlisten = \"127.0.0.1:0\"\n",
        mock.base_url()
    ));
    write_rack_notes(&home, 5);
    mock.hold_embedding_batches_after(Some(0));
    let _daemon = crate::daemon::Daemon::start(&home).await;
    let run = |args: &'static [&'static str]| {
        let home = &home;
        let out = reef(home).args(args).assert().success();
        json(&out)
    };
    let report = run(&["memory", "import", "notes", "--json"]);
    assert_eq!(report["added"], 5, "{report}");
    assert_eq!(report["embedded"], 0, "{report}");
    assert_eq!(report["waiting"], 5, "{report}");
    assert!(
        report["notes"][0]
            .as_str()
            .unwrap()
            .contains("the daemon embeds the 5 chunk(s)"),
        "{report}"
    );
    // A memory added meanwhile is stored at once and left to the daemon too (the CLI does
    // not load the embedder and embed the namespace's backlog itself).
    let added = run(&["memory", "add", "the spare PSU sits on shelf 9", "--json"]);
    assert_eq!(added["item"]["chunks"], 1, "{added}");
    assert!(
        added["note"].as_str().unwrap().contains("daemon embeds it"),
        "{added}"
    );
    // The daemon's first batch is held: the chunks wait, and a search does not.
    let outcome = run(&["memory", "search", "rack 3 fan", "--json"]);
    assert_eq!(outcome["mode"], "hybrid", "{outcome}");
    assert!(hit_texts(&outcome)[0].contains("rack 3"), "{outcome}");
    let note = outcome["note"].as_str().unwrap();
    assert!(
        note.contains("6 of 6 chunks have no vector yet") && note.contains("background"),
        "{note}"
    );
    // The CLI asked the daemon, which has the index in RAM, rather than loading its own.
    let out = reef(&home)
        .args(["audit", "query", "--kind", "api.request", "--json"])
        .assert()
        .success();
    let asked: Vec<Value> = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert!(
        asked
            .iter()
            .any(|r| r["data"]["path"] == "/v1/memory/search" && r["data"]["status"] == 200),
        "{asked:?}"
    );
    mock.hold_embedding_batches_after(None);
    let mut settled = Value::Null;
    for _ in 0..600 {
        settled = run(&["memory", "search", "rack 3 fan", "--json"]);
        if settled["note"].is_null() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(settled["note"], Value::Null, "{settled}");
    assert!(hit_texts(&settled)[0].contains("rack 3"), "{settled}");
    // The daemon embedded each of the six chunks once (the five in the batch it was held on,
    // the added one in that batch or the next), and the CLI embedded only queries.
    let embedded: Vec<String> = mock
        .requests()
        .into_iter()
        .filter(|r| r.path.ends_with("/embeddings"))
        .flat_map(|r| r.body["input"].as_array().unwrap().clone())
        .map(|t| t.as_str().unwrap().to_owned())
        .filter(|t| t != "rack 3 fan")
        .collect();
    assert_eq!(embedded.len(), 6, "{embedded:?}");
    let distinct: std::collections::BTreeSet<&String> = embedded.iter().collect();
    assert_eq!(distinct.len(), 6, "{embedded:?}");
    assert!(
        embedded.iter().any(|t| t.contains("shelf 9")),
        "{embedded:?}"
    );
}
