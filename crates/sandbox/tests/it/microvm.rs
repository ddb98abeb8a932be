//! The `microvm` backend, with real VMs: QEMU booting the guest image that
//! `scripts/microvm-image` builds (found at `$REEF_MICROVM_IMAGE`, else
//! `~/.cache/reef/microvm`; `.ci/run` builds it there), under KVM where it is usable and
//! software emulation elsewhere.

use crate::support::{sh, wait_gone};
use reef_sandbox::{
    Accelerator, ExecRequest, HandOut, MicrovmSettings, NetworkMode, Sandbox, SandboxBackend,
    SandboxError, SandboxPolicy,
};
use std::path::PathBuf;
use std::time::Duration;

fn image() -> PathBuf {
    let dir = std::env::var_os("REEF_MICROVM_IMAGE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").expect("HOME is set"))
                .join(".cache/reef/microvm")
        });
    assert!(
        dir.join("SHA256SUMS").exists(),
        "no guest image in {}: build it with scripts/microvm-image {0} (or set \
         REEF_MICROVM_IMAGE)",
        dir.display()
    );
    dir
}

fn policy(pool: usize) -> SandboxPolicy {
    SandboxPolicy {
        backend: SandboxBackend::Microvm,
        kill_grace: Duration::from_millis(200),
        microvm: MicrovmSettings {
            image: image(),
            pool,
            memory_mib: 256,
            ..MicrovmSettings::default()
        },
        ..SandboxPolicy::default()
    }
}

fn sigkill(pid: i32) -> nix::Result<()> {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    )
}

/// Kills QEMU `pid` and waits until all of it has exited (the leader turns zombie before the
/// other threads are gone, and the agent's socket closes only with the last of them).
async fn kill_qemu(pid: i32) {
    sigkill(pid).unwrap();
    assert!(wait_gone(pid).await, "QEMU {pid} did not die");
    for _ in 0..200 {
        let threads = std::fs::read_dir(format!("/proc/{pid}/task")).map_or(0, Iterator::count);
        if threads <= 1 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("QEMU {pid}'s threads did not exit");
}

async fn run(sandbox: &Sandbox, req: ExecRequest) -> reef_sandbox::ExecOutput {
    sandbox.run(req).await.unwrap()
}

#[tokio::test]
async fn a_vm_boots_runs_echo_and_its_workspace_writes_are_seen_on_the_host() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("from-host.txt"), "host data").unwrap();
    let sandbox = Sandbox::new(policy(0));
    let out = run(
        &sandbox,
        sh(
            "echo hello; cat from-host.txt; echo; echo written in the vm > out.txt; uname -r; \
             pwd; echo $HOME",
            ws.path(),
        ),
    )
    .await;
    assert!(out.success(), "{out:?}");
    let release = std::fs::read_to_string(image().join("kernel-release")).unwrap();
    let host_release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    let ws_path = std::fs::canonicalize(ws.path()).unwrap();
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines[0], "hello");
    assert_eq!(lines[1], "host data");
    // The guest's own kernel, not the host's.
    assert_eq!(lines[2], release.trim());
    assert_ne!(
        release.trim(),
        host_release.trim(),
        "cannot tell guest from host"
    );
    // The workspace is at its own path inside, and is HOME.
    assert_eq!(lines[3], ws_path.to_str().unwrap());
    assert_eq!(lines[4], ws.path().to_str().unwrap());
    assert_eq!(
        std::fs::read_to_string(ws.path().join("out.txt")).unwrap(),
        "written in the vm\n"
    );
    let status = sandbox.microvm_status().expect("a VM was taken");
    let current = status.current.expect("the session has a VM");
    assert_eq!(current.handed_out, HandOut::Cold);
    assert_eq!(status.pool.cold, 1);
}

#[tokio::test]
async fn exit_codes_signals_stdin_timeouts_and_missing_programs_are_reported_as_on_the_host() {
    let ws = tempfile::tempdir().unwrap();
    let sandbox = Sandbox::new(policy(0));
    let out = run(&sandbox, sh("echo out; echo err >&2; exit 3", ws.path())).await;
    assert_eq!(
        (out.stdout.as_str(), out.stderr.as_str(), out.exit_code),
        ("out\n", "err\n", Some(3))
    );
    let out = run(&sandbox, sh("kill -9 $$", ws.path())).await;
    assert_eq!((out.exit_code, out.signal), (None, Some(9)), "{out:?}");
    let mut req = sh("cat", ws.path());
    req.stdin = Some(b"through stdin".to_vec());
    assert_eq!(run(&sandbox, req).await.stdout, "through stdin");
    let mut req = sh("echo started; sleep 30", ws.path());
    req.timeout = Duration::from_secs(1);
    let out = run(&sandbox, req).await;
    assert!(out.timed_out, "{out:?}");
    assert_eq!(out.stdout, "started\n");
    let err = sandbox
        .run(ExecRequest::new(
            "no-such-program",
            Vec::new(),
            ws.path().to_path_buf(),
            Duration::from_secs(10),
        ))
        .await
        .unwrap_err();
    match err {
        SandboxError::Spawn { source, .. } => {
            assert_eq!(source.kind(), std::io::ErrorKind::NotFound)
        }
        other => panic!("expected a spawn error, got {other:?}"),
    }
    // All of it in one VM.
    assert_eq!(sandbox.microvm_status().unwrap().pool.cold, 1);
}

#[tokio::test]
async fn the_network_is_off_by_default_and_on_only_when_the_policy_gives_it() {
    let ws = tempfile::tempdir().unwrap();
    let list = "ls /sys/class/net; ip route";
    let out = run(&Sandbox::new(policy(0)), sh(list, ws.path())).await;
    assert!(out.success(), "{out:?}");
    assert_eq!(out.stdout, "lo\n", "a VM without network has only loopback");

    let full = Sandbox::new(SandboxPolicy {
        network: NetworkMode::Full,
        ..policy(0)
    });
    let out = run(&full, sh(list, ws.path())).await;
    assert!(out.stdout.contains("eth0"), "{out:?}");
    assert!(out.stdout.contains("default via 10.0.2.2"), "{out:?}");
}

#[tokio::test]
async fn an_allowlist_vm_reaches_only_the_sessions_proxy_which_decides_and_logs() {
    let ws = tempfile::tempdir().unwrap();
    let sandbox = Sandbox::new(SandboxPolicy {
        network: NetworkMode::Allowlist,
        allow_domains: vec!["allowed.example".into()],
        ..policy(0)
    });
    let out = run(
        &sandbox,
        sh(
            "ls /sys/class/net; echo \"proxy=$http_proxy\"; \
             wget -q -O- http://refused.example/path 2>&1; echo \"wget=$?\"",
            ws.path(),
        ),
    )
    .await;
    // No network device: only loopback, and the proxy variables.
    assert!(
        out.stdout.starts_with("lo\nproxy=http://127.0.0.1:3128\n"),
        "{out:?}"
    );
    // The request went through the proxy, which refused the host.
    assert!(out.stdout.contains("403"), "{out:?}");
    assert!(!out.stdout.contains("wget=0"), "{out:?}");
    let log = sandbox.network_log();
    let request = log
        .iter()
        .find(|r| r.host == "refused.example")
        .unwrap_or_else(|| panic!("the proxy saw no request: {log:?}"));
    assert!(
        matches!(request.verdict, reef_sandbox::NetVerdict::Denied(_)),
        "{request:?}"
    );
}

#[tokio::test]
async fn a_command_in_a_vm_cannot_reach_the_host_through_links_shares_or_the_guest_kernel() {
    let ws = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), "host secret").unwrap();
    std::os::unix::fs::symlink(outside.path().join("secret.txt"), ws.path().join("link")).unwrap();
    std::os::unix::fs::symlink(outside.path(), ws.path().join("dirlink")).unwrap();
    let skill = tempfile::tempdir().unwrap();
    std::fs::write(skill.path().join("tool.sh"), "echo skill tool").unwrap();
    let escape = format!("reef-vm-escape-{}", std::process::id());
    let sandbox = Sandbox::new(policy(0));
    let script = format!(
        "cat link; echo rc1=$?; ls dirlink/; echo rc2=$?; \
         sh {skill}/tool.sh; echo x > {skill}/new; echo rc3=$?; \
         mkdir -p /tmp/m; mount -t tmpfs none /tmp/m; echo rc4=$?; umount {ws}; echo rc5=$?; \
         mknod /tmp/mem c 1 1; echo rc6=$?; insmod /lib/modules/9p.ko; echo rc7=$?; \
         echo x > ../{escape}; cat /proc/1/environ > /dev/null; echo rc8=$?",
        skill = skill.path().display(),
        ws = ws.path().display(),
    );
    let mut req = sh(&script, ws.path());
    req.read_only = vec![skill.path().to_path_buf()];
    let out = run(&sandbox, req).await;
    let all = format!("{}{}", out.stdout, out.stderr);
    // A link resolves inside the guest, where the host's file does not exist.
    assert!(!all.contains("host secret"), "{out:?}");
    assert!(
        !out.stdout.contains("rc1=0") && !out.stdout.contains("rc2=0"),
        "{out:?}"
    );
    // A skill's folder is shared read-only (and readable: the positive control).
    assert!(out.stdout.contains("skill tool"), "{out:?}");
    assert!(!out.stdout.contains("rc3=0"), "{out:?}");
    assert!(!skill.path().join("new").exists());
    // Without CAP_SYS_ADMIN, CAP_MKNOD, CAP_SYS_MODULE or CAP_SYS_PTRACE: no mounts, no
    // device nodes, no modules, and PID 1's memory and environment stay its own.
    for rc in ["rc4", "rc5", "rc6", "rc7", "rc8"] {
        assert!(!out.stdout.contains(&format!("{rc}=0")), "{rc}: {out:?}");
    }
    // `..` above the workspace is the guest's, not the host's.
    let host_parent = ws.path().parent().unwrap().join(&escape);
    assert!(!host_parent.exists(), "wrote {}", host_parent.display());
}

#[tokio::test]
async fn the_hosts_programs_run_inside_from_its_usr_shared_read_only() {
    let ws = tempfile::tempdir().unwrap();
    let sandbox = Sandbox::new(policy(0));
    let out = run(
        &sandbox,
        sh(
            "python3 -c 'import sys; print(sys.version_info[0])'; \
             touch /usr/reef-vm-write 2>&1; echo rc=$?",
            ws.path(),
        ),
    )
    .await;
    assert!(out.stdout.starts_with("3\n"), "{out:?}");
    assert!(!out.stdout.contains("rc=0"), "{out:?}");
    assert!(!std::path::Path::new("/usr/reef-vm-write").exists());
}

#[tokio::test]
async fn the_vm_memory_limit_holds_for_what_its_commands_use_together() {
    let ws = tempfile::tempdir().unwrap();
    let sandbox = Sandbox::new(SandboxPolicy {
        microvm: MicrovmSettings {
            memory_mib: 128,
            ..policy(0).microvm
        },
        ..policy(0)
    });
    let out = run(&sandbox, sh("grep MemTotal /proc/meminfo", ws.path())).await;
    let kib: u64 = out
        .stdout
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no MemTotal: {out:?}"));
    assert!(kib <= 128 * 1024, "the guest sees {kib} KiB");
    // A command can hold a few MiB, not more memory than the VM has: the guest's kernel
    // stops it, and the VM goes on.
    let grow = |doublings: &str| {
        format!(
            "awk 'BEGIN {{ s = \"x\"; for (i = 0; i < {doublings}; i++) s = s s; print length(s) }}'"
        )
    };
    let out = run(&sandbox, sh(&grow("22"), ws.path())).await;
    assert_eq!(out.stdout, "4194304\n", "{out:?}");
    let out = run(&sandbox, sh(&grow("40"), ws.path())).await;
    assert!(!out.success() && out.stdout.is_empty(), "{out:?}");
    // Scratch space is memory too, and bounded: filling it fails the write.
    let out = run(
        &sandbox,
        sh(
            "dd if=/dev/zero of=/dev/shm/fill bs=1M count=400 2>&1 && echo held",
            ws.path(),
        ),
    )
    .await;
    assert!(!out.stdout.contains("held"), "{out:?}");
    // The VM survived it and still runs commands.
    let out = run(&sandbox, sh("echo alive", ws.path())).await;
    assert_eq!(out.stdout, "alive\n");
}

#[tokio::test]
async fn a_command_leaves_no_process_or_tmp_file_to_the_next() {
    let ws = tempfile::tempdir().unwrap();
    let sandbox = Sandbox::new(policy(0));
    let out = run(
        &sandbox,
        sh(
            "setsid sleep 1000 & (sleep 1001 &) ; echo left > /tmp/left; echo left > /dev/shm/left; \
             echo ok",
            ws.path(),
        ),
    )
    .await;
    assert_eq!(out.stdout, "ok\n");
    let out = run(
        &sandbox,
        sh(
            "ps -o args | grep -c '[s]leep 100'; ls /tmp/left /dev/shm/left 2>&1 | grep -c 'No such'",
            ws.path(),
        ),
    )
    .await;
    assert_eq!(out.stdout, "0\n2\n", "{out:?}");
    assert_eq!(sandbox.microvm_status().unwrap().pool.cold, 1);
}

#[tokio::test]
async fn reefs_read_only_files_in_the_workspace_stay_read_only_inside() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("reef.toml"), "[model]\n").unwrap();
    std::fs::create_dir_all(ws.path().join(".git/hooks")).unwrap();
    let sandbox = Sandbox::new(policy(0));
    let out = run(
        &sandbox,
        sh(
            "echo '[sandbox]' > reef.toml; echo hook > .git/hooks/pre-commit; \
             umount reef.toml; umount .git/hooks; mv .git .got; \
             echo '[sandbox]' > reef.toml; echo hook > .git/hooks/pre-commit; echo fine > notes",
            ws.path(),
        ),
    )
    .await;
    assert_eq!(
        std::fs::read_to_string(ws.path().join("reef.toml")).unwrap(),
        "[model]\n",
        "{out:?}"
    );
    assert!(!ws.path().join(".git/hooks/pre-commit").exists(), "{out:?}");
    assert!(ws.path().join(".git").is_dir(), "{out:?}");
    // The rest of the workspace is writable.
    assert_eq!(
        std::fs::read_to_string(ws.path().join("notes")).unwrap(),
        "fine\n"
    );
}

#[tokio::test]
async fn the_pool_hands_out_a_vm_booted_before_it_was_asked_for() {
    let ws = tempfile::tempdir().unwrap();
    let sandbox = Sandbox::new(policy(1));
    sandbox.prepare(ws.path()).unwrap();
    // Wait (without a deadline on the result) until the pool's VM is up.
    for _ in 0..1200 {
        if sandbox.microvm_status().is_some_and(|s| s.pool.idle == 1) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let before = sandbox.microvm_status().unwrap();
    assert_eq!((before.pool.idle, before.pool.cold), (1, 0), "{before:?}");
    let out = run(&sandbox, sh("echo from the pool", ws.path())).await;
    assert_eq!(out.stdout, "from the pool\n");
    let after = sandbox.microvm_status().unwrap();
    assert_eq!(
        after.current.unwrap().handed_out,
        HandOut::Ready,
        "{after:?}"
    );
    assert_eq!((after.pool.ready, after.pool.cold), (1, 0), "{after:?}");
}

/// Waits (with no deadline on the result) until the session's pool has `idle` VMs waiting
/// and has restored `restores` from its snapshot.
async fn wait_for_pool(sandbox: &Sandbox, idle: usize, restores: u64) -> reef_sandbox::PoolStats {
    for _ in 0..1200 {
        if let Some(status) = sandbox.microvm_status()
            && status.pool.idle == idle
            && status.pool.restores == restores
        {
            return status.pool;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the pool did not get there: {:?}", sandbox.microvm_status());
}

#[tokio::test]
async fn the_pool_restores_later_vms_from_a_snapshot_of_its_first_and_they_work() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("data"), "seen by a restored VM").unwrap();
    let sandbox = Sandbox::new(policy(1));
    sandbox.prepare(ws.path()).unwrap();
    // The first VM boots, and is saved.
    let stats = wait_for_pool(&sandbox, 1, 0).await;
    assert_eq!(stats.boots, 1, "{stats:?}");
    run(&sandbox, sh("true", ws.path())).await;
    // Its replacement is restored from the snapshot (and reseeded and its clock set, or the
    // restore would have failed and it would have booted).
    let stats = wait_for_pool(&sandbox, 1, 1).await;
    assert_eq!(stats.boots, 1, "{stats:?}");
    // The session's VM dies; the restored one takes over, with this workspace mounted.
    let pid = sandbox
        .microvm_status()
        .unwrap()
        .current
        .unwrap()
        .qemu_pid
        .unwrap() as i32;
    kill_qemu(pid).await;
    let out = run(
        &sandbox,
        sh("cat data; echo; echo restored > out; date +%s", ws.path()),
    )
    .await;
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines[0], "seen by a restored VM", "{out:?}");
    assert_eq!(
        std::fs::read_to_string(ws.path().join("out")).unwrap(),
        "restored\n"
    );
    let status = sandbox.microvm_status().unwrap();
    assert_eq!(
        status.current.unwrap().handed_out,
        HandOut::Ready,
        "{status:?}"
    );
    let guest_clock: i64 = lines[1].parse().unwrap();
    let host_clock = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    assert!(
        (host_clock - guest_clock).abs() < 300,
        "the restored VM's clock is {guest_clock}, the host's {host_clock}"
    );
}

#[tokio::test]
async fn a_vm_gone_between_commands_is_replaced_and_one_dying_under_a_command_fails_it() {
    let ws = tempfile::tempdir().unwrap();
    let sandbox = Sandbox::new(policy(0));
    run(&sandbox, sh("true", ws.path())).await;
    let first = sandbox.microvm_status().unwrap().current.unwrap();
    let pid = first.qemu_pid.unwrap() as i32;
    kill_qemu(pid).await;
    // Sent once, to a new VM.
    let out = run(&sandbox, sh("echo once >> count; cat count", ws.path())).await;
    assert_eq!(out.stdout, "once\n");
    let second = sandbox.microvm_status().unwrap().current.unwrap();
    assert_ne!(second.qemu_pid, first.qemu_pid);

    let pid = second.qemu_pid.unwrap() as i32;
    let killer = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(2)).await;
        sigkill(pid)
    });
    let err = sandbox
        .run(sh("echo under >> count; sleep 60", ws.path()))
        .await
        .unwrap_err();
    killer.await.unwrap().unwrap();
    assert!(matches!(err, SandboxError::Vm(_)), "{err:?}");
    assert_eq!(
        std::fs::read_to_string(ws.path().join("count")).unwrap(),
        "once\nunder\n",
        "the command that died with its VM was not sent again"
    );
}

#[tokio::test]
async fn the_session_vm_ends_with_the_session() {
    let ws = tempfile::tempdir().unwrap();
    let sandbox = Sandbox::new(policy(0));
    run(&sandbox, sh("true", ws.path())).await;
    let pid = sandbox
        .microvm_status()
        .unwrap()
        .current
        .unwrap()
        .qemu_pid
        .unwrap();
    drop(sandbox);
    assert!(
        wait_gone(pid as i32).await,
        "QEMU {pid} outlived its session"
    );
}

#[tokio::test]
async fn a_missing_or_altered_image_is_refused_with_the_reason() {
    let ws = tempfile::tempdir().unwrap();
    let missing = Sandbox::new(SandboxPolicy {
        microvm: MicrovmSettings {
            image: ws.path().join("nothing"),
            ..MicrovmSettings::default()
        },
        ..policy(0)
    });
    let err = missing.run(sh("true", ws.path())).await.unwrap_err();
    assert!(err.to_string().contains("scripts/microvm-image"), "{err}");

    let copy = tempfile::tempdir().unwrap();
    for name in ["vmlinux", "initramfs.cpio", "SHA256SUMS"] {
        std::fs::copy(image().join(name), copy.path().join(name)).unwrap();
    }
    let mut initrd = std::fs::OpenOptions::new()
        .append(true)
        .open(copy.path().join("initramfs.cpio"))
        .unwrap();
    std::io::Write::write_all(&mut initrd, b"tampered").unwrap();
    let altered = Sandbox::new(SandboxPolicy {
        microvm: MicrovmSettings {
            image: copy.path().to_path_buf(),
            ..MicrovmSettings::default()
        },
        ..policy(0)
    });
    let err = altered.run(sh("true", ws.path())).await.unwrap_err();
    assert!(
        err.to_string().contains("does not match its checksum"),
        "{err}"
    );
}

#[tokio::test]
async fn kvm_is_used_only_where_usable_and_software_emulation_is_said_plainly() {
    let (accel, why) = reef_sandbox::choose_acceleration(Accelerator::Tcg).unwrap();
    assert_eq!(accel, reef_sandbox::Acceleration::Tcg);
    assert!(why.contains("software emulation"), "{why}");
    match reef_sandbox::choose_acceleration(Accelerator::Auto).unwrap() {
        (reef_sandbox::Acceleration::Tcg, why) => {
            assert!(why.contains("KVM is not usable here"), "{why}");
            assert!(reef_sandbox::choose_acceleration(Accelerator::Kvm).is_err());
        }
        (reef_sandbox::Acceleration::Kvm, _) => {
            assert!(reef_sandbox::choose_acceleration(Accelerator::Kvm).is_ok());
        }
    }
}

#[tokio::test]
async fn a_workspace_that_is_the_hosts_tmp_is_never_emptied_between_commands() {
    // What `self_test` does: run in the system temporary directory.
    let tmp = std::env::temp_dir();
    let marker = tempfile::Builder::new()
        .prefix("reef-vm-keep-")
        .tempfile_in(&tmp)
        .unwrap();
    let sandbox = Sandbox::new(policy(0));
    run(&sandbox, sh("echo in the vm", &tmp)).await;
    // The clean-up after the command ran; another command proves it finished.
    run(&sandbox, sh("true", &tmp)).await;
    assert!(
        marker.path().exists(),
        "the host's temporary directory was emptied"
    );
}
