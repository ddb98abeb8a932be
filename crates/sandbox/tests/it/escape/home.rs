//! Escape suite, 2. Reading the home directory.

use super::*;

// ---------------------------------------------------------------------------------------
// 2. Reading the home directory
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn read_ssh_key_and_reef_config_fails() {
    let fx = Fixture::new();
    for file in [".ssh/id_rsa", ".reef/reef.toml"] {
        // Observed: "cat: …/home/.ssh/id_rsa: No such file or directory" (exit 1).
        let out = fx.run(&format!(r#"cat "$FAKE_HOME/{file}""#)).await;
        assert_fails_with(&out, &format!("cat $FAKE_HOME/{file}"), MISSING);
        assert!(
            !out.stdout.contains("reef-fake"),
            "secret leaked: {}",
            show(&out)
        );
    }
}

#[tokio::test]
async fn listing_root_home_shows_nothing() {
    let fx = Fixture::new();
    // Observed: "ls: cannot access '/root': No such file or directory" (exit 2).
    let out = fx.run("ls -A /root").await;
    assert_sandbox_built(&out, "ls -A /root");
    assert!(
        !out.success() || out.stdout.trim().is_empty(),
        "ls -A /root listed entries; {}",
        show(&out)
    );
}

#[tokio::test]
async fn read_real_home_fails() {
    let Some(home) = std::env::var_os("HOME").map(PathBuf::from) else {
        return;
    };
    let fx = Fixture::new();
    if home.join(".ssh").exists() {
        // Observed: (no ~/.ssh on the test machine)
        let out = fx.run(r#"ls -A "$REAL_HOME/.ssh""#).await;
        assert_fails_with(&out, "ls -A $REAL_HOME/.ssh", MISSING_OR_DENIED);
    }
    // Observed: "ls: cannot access '/root': No such file or directory" (HOME=/root).
    let out = fx.run(r#"ls -A "$REAL_HOME""#).await;
    assert_sandbox_built(&out, "ls -A $REAL_HOME");
    if out.success() {
        let host: Vec<String> = std::fs::read_dir(&home)
            .map(|d| {
                d.filter_map(|e| Some(e.ok()?.file_name().to_string_lossy().into_owned()))
                    .collect()
            })
            .unwrap_or_default();
        let seen: Vec<&str> = out
            .stdout
            .lines()
            .filter(|l| host.iter().any(|h| h == l))
            .collect();
        assert!(
            seen.is_empty(),
            "the real home {} is visible: {seen:?}",
            home.display()
        );
    }
}
