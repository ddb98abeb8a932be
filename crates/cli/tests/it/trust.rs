//! `reef trust`: a project reef.toml may set protected keys only after the user trusts it.

use crate::reef;
use predicates::str::contains;
use reef_test_support::TestHome;

fn project_file(home: &TestHome) -> std::path::PathBuf {
    home.workspace().join("reef.toml")
}

#[test]
fn a_project_file_needs_trust_to_loosen_the_sandbox() {
    let home = TestHome::new();
    let file = project_file(&home);
    std::fs::write(&file, "[sandbox]\nbackend = \"none\"\n").unwrap();
    let shown = file.display().to_string();

    reef(&home)
        .args(["config", "show"])
        .assert()
        .code(2)
        .stderr(contains("key `sandbox.backend`"))
        .stderr(contains(shown.as_str()))
        .stderr(contains("reef trust"));

    reef(&home)
        .arg("trust")
        .assert()
        .success()
        .stdout(contains("trusted"))
        .stdout(contains("sandbox.backend"));

    let out = reef(&home)
        .args(["config", "show", "--json"])
        .assert()
        .success();
    let entries: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let backend = entries
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["key"] == "sandbox.backend")
        .unwrap();
    assert_eq!(backend["value"], "\"none\"");
    assert_eq!(backend["origin"]["kind"], "trusted_file");
    assert!(
        backend["origin"]["source"]
            .as_str()
            .unwrap()
            .ends_with("work/reef.toml"),
        "{backend}"
    );
    reef(&home)
        .args(["config", "show"])
        .assert()
        .success()
        .stdout(contains("reef.toml (trusted)"));

    reef(&home)
        .args(["trust", "--list"])
        .assert()
        .success()
        .stdout(contains("unchanged"))
        .stdout(contains("work/reef.toml"));

    // Any change untrusts it.
    std::fs::write(&file, "[sandbox]\nbackend = \"none\"\nnetwork = \"full\"\n").unwrap();
    reef(&home)
        .args(["config", "show"])
        .assert()
        .code(2)
        .stderr(contains("changed since it was trusted"))
        .stderr(contains(shown.as_str()));
    reef(&home)
        .args(["trust", "--list"])
        .assert()
        .success()
        .stdout(contains("changed"));

    reef(&home)
        .args(["trust", "--remove", "."])
        .assert()
        .success()
        .stdout(contains("no longer trusted"));
    reef(&home)
        .args(["trust", "--list"])
        .assert()
        .success()
        .stdout(contains("no trusted project files"));
}

#[test]
fn trust_refuses_a_symlinked_project_file() {
    let home = TestHome::new();
    let target = home.path().join("elsewhere.toml");
    std::fs::write(&target, "[sandbox]\nbackend = \"none\"\n").unwrap();
    std::os::unix::fs::symlink(&target, project_file(&home)).unwrap();
    reef(&home)
        .arg("trust")
        .assert()
        .code(2)
        .stderr(contains("symbolic link"));
    reef(&home)
        .args(["config", "show"])
        .assert()
        .code(2)
        .stderr(contains("was not read"));
}

#[test]
fn trust_without_a_file_is_a_usage_error() {
    let home = TestHome::new();
    reef(&home)
        .arg("trust")
        .assert()
        .code(2)
        .stderr(contains("reef.toml"));
    reef(&home)
        .args(["trust", "--remove", "nowhere"])
        .assert()
        .code(2)
        .stderr(contains("is not trusted"));
}
