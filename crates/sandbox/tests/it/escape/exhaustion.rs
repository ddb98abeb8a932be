//! Escape suite, 9. – 11. Resource exhaustion.

use super::*;

// ---------------------------------------------------------------------------------------
// 9. – 11. Resource exhaustion
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn fork_bomb_is_contained() {
    let fx = Fixture::new();
    let mark = format!("reef-bomb-{}", marker());
    let policy = SandboxPolicy {
        limits: Limits {
            max_processes: Some(64),
            ..Limits::default()
        },
        ..confined_policy()
    };
    // Guarded: outside a new PID namespace the bomb would run on the host. The bomb's
    // processes carry `mark` as their $0; `exec sleep 5` keeps the run going while it rages.
    let mut req = fx.req(&format!(
        r#"[ $$ -lt 10 ] || {{ echo "not in a new pid namespace (pid $$)" >&2; exit 99; }}
           bash -c ':(){{ :|:& }};:' {mark}; exec sleep 5"#
    ));
    req.timeout = Duration::from_secs(10);
    // Observed: Ok, exit 0 after the 5 s sleep, stderr full of "environment: fork: retry:
    // Resource temporarily unavailable" (the pids limit bit); no bomb process left after.
    let result = Sandbox::new(policy).run(req).await;
    if let Ok(out) = &result {
        assert_sandbox_built(out, "fork bomb");
        assert_ne!(out.exit_code, Some(99), "{}", show(out));
        assert!(
            out.stderr.contains("Resource temporarily unavailable"),
            "the process limit never bit; {}",
            show(out)
        );
    }
    let left = wait_none_with(&mark).await;
    assert!(left.is_empty(), "bomb processes survived: {left:?}");
    let out = fx.run("true").await;
    assert_succeeds(&out, "true after the fork bomb");
}

#[tokio::test]
async fn memory_bomb_fails() {
    let fx = Fixture::new();
    let policy = SandboxPolicy {
        limits: Limits {
            memory_bytes: Some(256 * 1024 * 1024),
            ..Limits::default()
        },
        ..confined_policy()
    };
    // Observed: "MemoryError" in a traceback, exit 1 (RLIMIT_AS refuses the allocation).
    let out = run_with(policy, fx.req("python3 -c 'x = bytearray(4 * 1024**3)'")).await;
    assert_sandbox_built(&out, "bytearray(4 GiB)");
    assert!(!out.success(), "4 GiB allocated; {}", show(&out));
    assert!(
        out.stderr.contains("MemoryError")
            || out.stderr.contains("Cannot allocate memory")
            || out.exit_code == Some(128 + 9)
            || out.signal == Some(9),
        "expected MemoryError or an OOM kill; {}",
        show(&out)
    );
}

#[tokio::test]
async fn disk_filling_write_is_cut_at_the_file_size_limit() {
    let fx = Fixture::new();
    let limit = 10 * 1024 * 1024;
    let policy = SandboxPolicy {
        limits: Limits {
            file_size_bytes: Some(limit),
            ..Limits::default()
        },
        ..confined_policy()
    };
    // Observed: stderr "File size limit exceeded", head exit 153 (128 + SIGXFSZ).
    let out = run_with(
        policy,
        fx.req(r#"head -c 200000000 /dev/zero > big; echo "head exit $?""#),
    )
    .await;
    assert_sandbox_built(&out, "head -c 200000000 /dev/zero > big");
    assert_eq!(out.stdout, "head exit 153\n", "{}", show(&out));
    assert!(
        out.stderr.contains("File size limit exceeded"),
        "{}",
        show(&out)
    );
    let size = std::fs::metadata(fx.ws.join("big")).unwrap().len();
    assert!(size <= limit, "big is {size} bytes");
}
