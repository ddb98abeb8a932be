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
        // Killed and reaped before the next command could start: gone from the host too,
        // without waiting.
        let left = processes_with(arg);
        assert!(
            left.is_empty(),
            "`sleep {arg}` outlived its command: {left:?}"
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

#[tokio::test]
async fn dev_shm_and_ipc_objects_of_one_command_are_gone_for_the_next_and_dev_is_read_only() {
    let fx = Fixture::new();
    let sandbox = Sandbox::new(confined_policy());
    let out = sandbox
        .run(fx.req(
            "echo left > /dev/shm/left && ipcmk -M 4096 >/dev/null && ipcmk -Q >/dev/null \
             && ipcs -m -q | grep -c '^0x'",
        ))
        .await
        .unwrap();
    assert_succeeds(&out, "leave a /dev/shm file and IPC objects");
    assert_eq!(
        out.stdout,
        "2\n",
        "the objects were not made; {}",
        show(&out)
    );
    let out = sandbox
        .run(fx.req("ls -A /dev/shm; ipcs -m -q | grep -c '^0x'"))
        .await
        .unwrap();
    assert_sandbox_built(&out, "look for them");
    assert_eq!(
        out.stdout,
        "0\n",
        "the next command sees them; {}",
        show(&out)
    );
    // /dev itself cannot be changed: no `/dev/fd` leading elsewhere for a later command.
    let out = sandbox.run(fx.req("ln -sfn /tmp /dev/fd")).await.unwrap();
    assert_fails_with(&out, "replace /dev/fd", &["Read-only file system"]);
    let out = sandbox.run(fx.req("mkfifo /dev/stdin2")).await.unwrap();
    assert_fails_with(&out, "add to /dev", &["Read-only file system"]);
}

#[tokio::test]
async fn a_command_holding_a_lock_or_killing_everything_cannot_stop_the_session() {
    let fx = Fixture::new();
    let sandbox = Sandbox::new(confined_policy());
    let arg = format!("100.{}", marker());
    // A lock on a file every command can open, held by a process out of its group, and a
    // kill of every process it may signal.
    let out = sandbox
        .run(fx.req(&format!(
            "setsid flock / sleep {arg} & sleep 0.2; kill -9 -1; echo after"
        )))
        .await;
    let out = out.unwrap();
    assert_sandbox_built(&out, "flock / and kill -9 -1");
    let out = sandbox.run(fx.req("echo still")).await.unwrap();
    assert_succeeds(&out, "the next command");
    assert_eq!(out.stdout, "still\n");
    assert!(processes_with(&arg).is_empty(), "`sleep {arg}` survived");
}

#[tokio::test]
async fn commands_running_at_once_cannot_read_or_signal_each_other() {
    let fx = Fixture::new();
    let sandbox = Sandbox::new(confined_policy());
    let secret = format!("reef-peer-secret-{}", marker());
    let mut victim = fx.req(
        "touch victim.ready; while [ ! -e attacker.done ]; do sleep 0.01; done; echo survived",
    );
    victim.env.push(("PEER_SECRET".into(), secret.clone()));
    let attacker = fx.req(
        "while [ ! -e victim.ready ]; do sleep 0.01; done
         for p in /proc/[0-9]*; do
           cat $p/environ 2>/dev/null | tr '\\0' '\\n' | grep PEER_SECRET
           ls $p/fd/ >/dev/null 2>&1 && [ \"$p\" != /proc/$$ ] && [ \"$p\" != /proc/self ] && echo fd:$p
         done
         kill -9 -1 2>/dev/null; sleep 0.1; touch attacker.done; echo done",
    );
    let (victim, attacker) = tokio::join!(sandbox.run(victim), sandbox.run(attacker));
    let (victim, attacker) = (victim.unwrap(), attacker.unwrap());
    assert_sandbox_built(&attacker, "read and signal a concurrent command");
    assert!(
        !attacker.stdout.contains(&secret),
        "a command read another's environment; {}",
        show(&attacker)
    );
    assert!(attacker.stdout.ends_with("done\n"), "{}", show(&attacker));
    assert_succeeds(&victim, "the command running beside it");
    assert_eq!(victim.stdout, "survived\n");
}
