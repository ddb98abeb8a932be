//! Escape suite, 12. + 13. Outliving the run.

use super::*;

// ---------------------------------------------------------------------------------------
// 12. + 13. Outliving the run
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn a_process_ignoring_sigterm_is_killed_at_the_timeout() {
    let fx = Fixture::new();
    let arg = format!("100.{}", marker());
    let mut req = fx.req(&format!("trap '' TERM; sleep {arg}"));
    req.timeout = Duration::from_secs(1);
    // Observed: timed_out, signal 15 (the helper outside the PID namespace died on SIGTERM
    // and took the namespace with it); the SIGTERM-ignoring sleep is gone.
    let out = run_with(confined_policy(), req).await;
    assert_sandbox_built(&out, "trap '' TERM; sleep");
    assert!(out.timed_out, "not timed out; {}", show(&out));
    let left = wait_none_with(&arg).await;
    assert!(left.is_empty(), "`sleep {arg}` survived: {left:?}");
}

#[tokio::test]
async fn a_child_that_outlives_its_parent_is_killed() {
    let fx = Fixture::new();
    let (a, b) = (format!("100.{}", marker()), format!("100.{}", marker()));
    // One orphan in a session of its own (out of the process group), one re-parented by a
    // double fork; the command waits until both run, then exits at once.
    // Observed: exit 0, "started"; neither sleep remains. (With the plain backend the
    // `setsid` one survives: this case fails there.)
    let out = fx
        .run(&format!(
            "setsid sh -c 'touch a.ready; exec sleep {a}' &
             (sh -c 'touch b.ready; exec sleep {b}' &)
             while [ ! -e a.ready ] || [ ! -e b.ready ]; do sleep 0.01; done
             echo started"
        ))
        .await;
    assert_succeeds(&out, "setsid sleep & (sleep &)");
    assert_eq!(out.stdout, "started\n");
    for arg in [a, b] {
        let left = wait_none_with(&arg).await;
        assert!(left.is_empty(), "`sleep {arg}` survived: {left:?}");
    }
}

// ---------------------------------------------------------------------------------------
// 12. + 13. on a warm sandbox: nothing of one command reaches the next
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn a_process_left_by_one_command_is_gone_before_the_next_starts() {
    let fx = Fixture::new();
    let sandbox = Sandbox::new(confined_policy());
    let (a, b, c) = (
        format!("100.{}", marker()),
        format!("100.{}", marker()),
        format!("100.{}", marker()),
    );
    // In a session of its own, re-parented by a double fork, and a plain background job.
    let out = sandbox
        .run(fx.req(&format!(
            "setsid sh -c 'touch a.ready; exec sleep {a}' &
             (sh -c 'touch b.ready; exec sleep {b}' &)
             sh -c 'touch c.ready; exec sleep {c}' &
             while [ ! -e a.ready ] || [ ! -e b.ready ] || [ ! -e c.ready ]; do sleep 0.01; done
             echo started"
        )))
        .await
        .unwrap();
    assert_succeeds(&out, "three sleeps left running");
    assert_eq!(out.stdout, "started\n");
    // Gone when the run returns, without waiting.
    for arg in [&a, &b, &c] {
        let left = processes_with(arg);
        assert!(
            left.is_empty(),
            "`sleep {arg}` outlived its command: {left:?}"
        );
    }
    let out = sandbox
        .run(fx.req("for f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' < $f; echo; done"))
        .await
        .unwrap();
    assert_succeeds(&out, "list the sandbox's processes");
    assert!(
        out.stdout.contains("sh -c"),
        "no process listed; {}",
        show(&out)
    );
    for arg in [&a, &b, &c] {
        assert!(
            !out.stdout.contains(arg.as_str()),
            "the next command sees `sleep {arg}`; {}",
            show(&out)
        );
    }
}

#[tokio::test]
async fn a_file_written_to_tmp_by_one_command_is_not_seen_by_the_next() {
    let fx = Fixture::new();
    let sandbox = Sandbox::new(confined_policy());
    let out = sandbox
        .run(fx.req(
            "echo left > /tmp/left.txt && mkdir -p /tmp/d/e && echo x > /tmp/d/e/f \
             && chmod 000 /tmp/d && ln -s /tmp/left.txt /tmp/link && echo kept > ws.txt \
             && cat /tmp/left.txt",
        ))
        .await
        .unwrap();
    assert_succeeds(&out, "write to /tmp");
    assert_eq!(out.stdout, "left\n");
    let out = sandbox
        .run(fx.req("ls -A /tmp; cat ws.txt; cat /tmp/left.txt"))
        .await
        .unwrap();
    assert_sandbox_built(&out, "read /tmp again");
    for name in ["left.txt", "d", "link"] {
        assert!(
            !out.stdout.lines().any(|l| l == name),
            "/tmp/{name} of the first command is still there; {}",
            show(&out)
        );
    }
    // The workspace (bound under /tmp on this host's test layout) is untouched.
    assert!(out.stdout.contains("kept\n"), "{}", show(&out));
    assert_fails_with(&out, "cat /tmp/left.txt", MISSING);
}
