//! Escape suite, positive controls.

use super::*;

// ---------------------------------------------------------------------------------------
// Positive controls
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn workspace_is_writable() {
    let fx = Fixture::new();
    let out = fx
        .run("echo hello > inside.txt && mkdir d && mv inside.txt d/moved.txt && cat d/moved.txt")
        .await;
    assert_succeeds(&out, "write in the workspace");
    assert_eq!(out.stdout, "hello\n");
    assert_eq!(
        std::fs::read_to_string(fx.ws.join("d/moved.txt")).unwrap(),
        "hello\n"
    );
}

#[tokio::test]
async fn tmp_is_writable_and_private() {
    let fx = Fixture::new();
    let name = format!("reef-private-{}", marker());
    let out = fx
        .run(&format!("echo private > /tmp/{name} && cat /tmp/{name}"))
        .await;
    let host = Path::new("/tmp").join(&name);
    let leaked = host.exists();
    if leaked {
        let _ = std::fs::remove_file(&host);
    }
    assert_succeeds(&out, "write /tmp");
    assert_eq!(out.stdout, "private\n");
    assert!(!leaked, "{} appeared in the host's /tmp", host.display());
}

#[tokio::test]
async fn runs_as_uid_1000_without_capabilities() {
    let fx = Fixture::new();
    let out = fx
        .run("id -u; grep -E '^Cap(Prm|Eff|Amb):' /proc/self/status")
        .await;
    assert_succeeds(&out, "id -u");
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.first(), Some(&"1000"), "{}", show(&out));
    for cap in ["CapPrm", "CapEff", "CapAmb"] {
        assert!(
            lines
                .iter()
                .any(|l| *l == format!("{cap}:\t0000000000000000")),
            "{cap} is not empty; {}",
            show(&out)
        );
    }
}

/// The helper checks of this file are themselves correct: a marker search finds a live
/// process (otherwise every "no process survived" assertion would pass vacuously).
#[tokio::test]
async fn marker_search_finds_a_live_process() {
    let host = HostSleep::start();
    assert_eq!(processes_with(&host.marker), vec![host.pid() as i32]);
}
