//! `reef sandbox run|status`, the unconfined warning of `run`/`chat` and the isolation check of
//! `doctor`. Tests with `--backend none` or `sandbox.backend = "none"` hold on any machine; the
//! ones using the default landlock backend need a kernel where it works (Linux with Landlock
//! and user namespaces).

use crate::{config_for, json_lines, reef};
use reef_test_support::{MockLlm, MockReply, TestHome};
use serde_json::Value;

fn stdout_of(out: &assert_cmd::assert::Assert) -> String {
    String::from_utf8_lossy(&out.get_output().stdout).into_owned()
}

fn stderr_of(out: &assert_cmd::assert::Assert) -> String {
    String::from_utf8_lossy(&out.get_output().stderr).into_owned()
}

/// A home whose config points at `mock` with tools unconfined by configuration.
fn unconfined_home(mock: &MockLlm) -> TestHome {
    let home = TestHome::new();
    home.write_config(&format!(
        "{}\n[sandbox]\nbackend = \"none\"\n",
        config_for(mock, "openai-chat", true)
    ));
    home
}

#[test]
fn sandbox_run_passes_output_and_exit_code_through() {
    let home = TestHome::new();
    let out = reef(&home)
        .args(["sandbox", "run", "--backend", "none", "--"])
        .args(["sh", "-c", "echo out; echo err >&2; exit 3"])
        .assert()
        .code(3);
    assert_eq!(stdout_of(&out), "out\n");
    assert_eq!(stderr_of(&out), "err\n");
}

#[test]
fn sandbox_run_reports_signals_and_missing_commands_like_a_shell() {
    let home = TestHome::new();
    reef(&home)
        .args(["sandbox", "run", "--backend", "none", "--"])
        .args(["sh", "-c", "kill -KILL $$"])
        .assert()
        .code(128 + 9);
    let out = reef(&home)
        .args(["sandbox", "run", "--backend", "none", "--"])
        .arg("reef-no-such-command")
        .assert()
        .code(127);
    assert!(
        stderr_of(&out).contains("reef-no-such-command"),
        "{}",
        stderr_of(&out)
    );
}

#[test]
fn sandbox_run_runs_in_the_current_directory() {
    let home = TestHome::new();
    reef(&home)
        .args(["sandbox", "run", "--backend", "none", "--"])
        .args(["sh", "-c", "echo hi > made-here.txt"])
        .assert()
        .success();
    let made = std::fs::read_to_string(home.workspace().join("made-here.txt")).unwrap();
    assert_eq!(made, "hi\n");
}

#[test]
fn sandbox_run_timeout_exits_124() {
    let home = TestHome::new();
    let started = std::time::Instant::now();
    let out = reef(&home)
        .args([
            "sandbox",
            "run",
            "--backend",
            "none",
            "--timeout",
            "1s",
            "--",
        ])
        .args(["sleep", "30"])
        .assert()
        .code(124);
    assert!(stderr_of(&out).contains("timed out"), "{}", stderr_of(&out));
    // Not a timing assertion on reef's speed: only that the 30 s sleep did not run to its end.
    assert!(started.elapsed() < std::time::Duration::from_secs(25));
}

#[test]
fn sandbox_run_bad_flag_values_name_the_flag() {
    let home = TestHome::new();
    for (flag, value) in [
        ("--mem", "abc"),
        ("--timeout", "soon"),
        ("--net", "some"),
        ("--backend", "docker"),
        ("--allow-domain", "https://pypi.org/simple"),
    ] {
        let out = reef(&home)
            .args(["sandbox", "run", flag, value, "--", "true"])
            .assert()
            .code(2);
        let stderr = stderr_of(&out);
        assert!(stderr.contains(flag), "{flag}: {stderr}");
        assert!(stderr.contains(value), "{flag}: {stderr}");
    }
}

#[test]
fn sandbox_run_refuses_backend_none_when_the_sandbox_is_required() {
    let home = TestHome::new();
    let out = reef(&home)
        .args(["-c", "sandbox.required=true", "sandbox", "run"])
        .args(["--backend", "none", "--", "true"])
        .assert()
        .code(2);
    let stderr = stderr_of(&out);
    assert!(
        stderr.contains("--backend") && stderr.contains("sandbox.required"),
        "{stderr}"
    );
}

/// Needs the landlock backend working on this machine.
#[test]
fn sandbox_run_default_backend_confines_writes_to_the_workspace() {
    let home = TestHome::new();
    let outside = home.path().join("reef-escape-test");
    reef(&home)
        .args(["sandbox", "run", "--"])
        .args(["sh", "-c", "touch inside.txt"])
        .assert()
        .success();
    assert!(home.workspace().join("inside.txt").exists());
    // The self-test passed and is remembered for this boot and policy: the runs below skip it
    // and must confine all the same.
    let record = std::fs::read_to_string(home.reef_home().join("sandbox-works")).unwrap();
    assert!(
        record.starts_with("boot ") && record.contains("\npolicy "),
        "{record}"
    );
    let unconfined = TestHome::new();
    reef(&unconfined)
        .args(["sandbox", "run", "--backend", "none", "--", "true"])
        .assert()
        .success();
    assert!(
        !unconfined.reef_home().join("sandbox-works").exists(),
        "no record without the landlock backend"
    );

    let out = reef(&home)
        .args(["sandbox", "run", "--"])
        .args(["sh", "-c", "touch /etc/reef-escape-test"])
        .assert()
        .failure();
    assert!(
        !std::path::Path::new("/etc/reef-escape-test").exists(),
        "escaped: {}",
        stderr_of(&out)
    );
    // A path this user may write, next to the workspace. The sandbox may refuse the write or
    // let it land in a private view (its own /tmp); either way nothing reaches the real path.
    let script = format!("touch '{}'", outside.display());
    let out = reef(&home)
        .args(["sandbox", "run", "--", "sh", "-c", &script])
        .assert();
    assert!(
        !outside.exists(),
        "{} was created: {}",
        outside.display(),
        stderr_of(&out)
    );

    // `--rw` opens one more path.
    let extra = home.path().join("extra");
    std::fs::create_dir_all(&extra).unwrap();
    let script = format!("touch '{}'", extra.join("ok").display());
    reef(&home)
        .args(["sandbox", "run", "--rw"])
        .arg(&extra)
        .args(["--", "sh", "-c", &script])
        .assert()
        .success();
    assert!(extra.join("ok").exists());
}

/// Needs the landlock backend working on this machine.
/// The host directories of the limited cgroups a command ran in, from its
/// `/proc/self/cgroup` (`pids` and `memory`; on cgroup v2 its one cgroup).
fn limited_cgroups(proc_self_cgroup: &str) -> Vec<std::path::PathBuf> {
    let root = std::path::Path::new("/sys/fs/cgroup");
    proc_self_cgroup
        .lines()
        .filter_map(|line| {
            let mut parts = line.splitn(3, ':');
            let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
            let base = match controllers {
                "" => root.to_path_buf(),
                "pids" | "memory" => root.join(controllers),
                _ => return None,
            };
            Some(base.join(path.trim_start_matches('/')))
        })
        .collect()
}

#[test]
fn sandbox_run_takes_its_cgroups_from_a_pool_and_hands_them_back() {
    let home = TestHome::new();
    let out = reef(&home)
        .args(["sandbox", "run", "--", "cat", "/proc/self/cgroup"])
        .assert()
        .success();
    let text = stdout_of(&out);
    let sessions: Vec<_> = limited_cgroups(&text)
        .into_iter()
        .filter(|dir| dir.to_string_lossy().contains("/reef-sessions/"))
        .filter_map(|shared| shared.parent().map(std::path::Path::to_path_buf))
        .collect();
    if sessions.is_empty() {
        // No writable cgroups here: `reef sandbox run` warns and applies the rlimits alone.
        assert!(stderr_of(&out).contains("limit not enforced"), "{text}");
        return;
    }
    for session in sessions {
        // Named PID-TAG while in use; once reef has exited the directory is still there, as
        // `free-TAG` (or taken by another reef meanwhile, under its own pid), not removed.
        let name = session.file_name().unwrap().to_string_lossy().into_owned();
        let (owner, tag) = name.split_once('-').unwrap();
        assert!(owner.parse::<u32>().is_ok(), "{name}");
        assert!(!session.exists(), "{} is still in use", session.display());
        let pool = session.parent().unwrap();
        let kept: Vec<String> = std::fs::read_dir(pool)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.split_once('-').is_some_and(|(_, t)| t == tag))
            .collect();
        assert_eq!(kept.len(), 1, "{name} in {}: {kept:?}", pool.display());
    }
}

#[test]
fn sandbox_run_allowlist_refuses_other_hosts_and_logs_each_request() {
    let home = TestHome::new();
    let out = reef(&home)
        .args(["sandbox", "run", "--net", "allowlist", "--allow-domain"])
        .args(["pypi.org", "--allow-domain", "*.github.com", "--"])
        .args([
            "curl",
            "-sSf",
            "--max-time",
            "20",
            "http://denied.example/x",
        ])
        .assert()
        .code(22); // curl's "HTTP error" exit code: the proxy answered 403
    let stderr = stderr_of(&out);
    assert!(
        stderr.contains(
            "reef: net GET denied.example:80 refused: denied.example is not in \
             sandbox.allow_domains"
        ),
        "{stderr}"
    );
    assert!(stderr.contains("403"), "{stderr}");
}

#[test]
fn sandbox_status_json_names_the_backend() {
    let home = TestHome::new();
    // The default backend: whether it works depends on the machine, the report does not.
    let out = reef(&home).args(["sandbox", "status", "--json"]).assert();
    let report: Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(report["backend"], "landlock");
    assert_eq!(report["network"], "none");
    assert_eq!(report["limits"]["memory"], "2G");
    assert!(report["works"].is_boolean(), "{report}");
    assert!(!report["probe"].as_array().unwrap().is_empty(), "{report}");
    // The small helper beside `reef` when the build put one there, else reef itself.
    let binary = std::path::Path::new(env!("CARGO_BIN_EXE_reef"));
    let small = binary.with_file_name("reef-sandbox-exec");
    if small.is_file() {
        assert_eq!(report["small_helper"], true, "{report}");
        assert_eq!(report["helper"], small.display().to_string());
    } else {
        assert_eq!(report["small_helper"], false, "{report}");
        assert_eq!(
            report["helper"],
            format!("{} sandbox-exec", binary.display())
        );
    }
    let code = out.get_output().status.code();
    assert_eq!(
        code,
        Some(if report["works"] == true { 0 } else { 1 }),
        "{report}"
    );

    let out = reef(&home)
        .args(["-c", "sandbox.backend=none", "-c", "sandbox.memory=256M"])
        .args(["sandbox", "status", "--json"])
        .assert()
        .success();
    let report: Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(report["backend"], "none");
    assert_eq!(report["works"], true);
    assert_eq!(report["effective_backend"], "none");
    assert_eq!(report["limits"]["memory"], "256M");

    let out = reef(&home).args(["sandbox", "status"]).assert();
    assert!(
        stdout_of(&out).contains("backend:   landlock"),
        "{}",
        stdout_of(&out)
    );
}

#[test]
fn backend_none_warns_on_every_run_and_chat_turn() {
    let mock = MockLlm::start_blocking(vec![
        MockReply::text("one"),
        MockReply::text("two"),
        MockReply::text("three"),
        MockReply::text("four"),
    ]);
    let home = unconfined_home(&mock);

    let out = reef(&home).args(["run", "hello"]).assert().success();
    let stderr = stderr_of(&out);
    assert!(
        stderr.contains("warning: sandbox disabled by config") && stderr.contains("unconfined"),
        "{stderr}"
    );

    let out = reef(&home)
        .args(["run", "--json", "hello"])
        .assert()
        .success();
    let events = json_lines(&out.get_output().stdout);
    let warning = events
        .iter()
        .find(|e| e["msg"]["type"] == "warning")
        .unwrap_or_else(|| panic!("no warning event: {events:?}"));
    assert!(
        warning["msg"]["message"]
            .as_str()
            .unwrap()
            .contains("sandbox disabled by config"),
        "{warning}"
    );
    let started = events
        .iter()
        .find(|e| e["msg"]["type"] == "turn_started")
        .unwrap();
    assert_eq!(
        warning["id"], started["id"],
        "the warning belongs to the turn"
    );

    let out = reef(&home)
        .arg("chat")
        .write_stdin("first\nsecond\n/quit\n")
        .assert()
        .success();
    let stderr = stderr_of(&out);
    assert_eq!(
        stderr.matches("sandbox disabled by config").count(),
        2,
        "once per turn: {stderr}"
    );
}

/// Needs the landlock backend working on this machine.
#[test]
fn default_backend_runs_turns_without_a_warning() {
    let mock = MockLlm::start_blocking(vec![MockReply::text("fine")]);
    let home = crate::home_for(&mock, "openai-chat", true);
    let out = reef(&home).args(["run", "hello"]).assert().success();
    let stderr = stderr_of(&out);
    assert!(!stderr.contains("warning"), "{stderr}");
}

#[test]
fn doctor_warns_when_the_sandbox_is_disabled() {
    let mock = MockLlm::start_blocking(vec![]);
    let home = unconfined_home(&mock);
    let out = reef(&home).args(["doctor", "--json"]).assert().success();
    let checks: Vec<Value> = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let isolation = checks.iter().find(|c| c["name"] == "isolation").unwrap();
    assert_eq!(isolation["status"], "warn", "{isolation}");
    assert!(
        isolation["detail"]
            .as_str()
            .unwrap()
            .contains("sandbox disabled by config"),
        "{isolation}"
    );
}

/// Needs the landlock backend working on this machine.
#[test]
fn doctor_reports_the_active_landlock_backend() {
    let mock = MockLlm::start_blocking(vec![]);
    let home = crate::home_for(&mock, "openai-chat", true);
    let out = reef(&home).args(["doctor", "--json"]).assert().success();
    let checks: Vec<Value> = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let isolation = checks.iter().find(|c| c["name"] == "isolation").unwrap();
    assert_eq!(isolation["status"], "ok", "{isolation}");
    assert!(
        isolation["detail"]
            .as_str()
            .unwrap()
            .starts_with("landlock backend active"),
        "{isolation}"
    );
}

/// A template allowing `127.0.0.1` (where the mock model listens) and `example.com` through
/// the proxy, its agents granted the `domains` given.
fn fetcher_template(home: &TestHome, name: &str, domains: &str) {
    let dir = home.reef_home().join("templates");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join(format!("{name}.toml")),
        format!(
            "description = \"fetches\"\npersona = \"Fetch.\"\n\
             [capabilities]\ntools = [\"shell\"]\ndomains = {domains}\n\
             [sandbox]\nnetwork = \"allowlist\"\nallow_domains = [\"127.0.0.1\", \"example.com\"]\n"
        ),
    )
    .unwrap();
}

/// Needs the landlock backend working on this machine.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agents_sandbox_is_its_templates_narrowed_to_its_capabilities_and_is_shown() {
    use crate::daemon::{Daemon, daemon_home};
    // Every turn fetches the mock's own address through the sandbox's proxy and prints the
    // HTTP status it got: the proxy's 403, or the mock's answer.
    let target = std::sync::Arc::new(std::sync::OnceLock::<String>::new());
    let url = target.clone();
    let mock = MockLlm::start_responder_blocking(std::sync::Arc::new(move |req| {
        if req.ends_with_tool_result() {
            return MockReply::text("fetched");
        }
        let command = format!(
            "curl -s -o /dev/null -w 'status=%{{http_code}}' --max-time 20 {}/",
            url.get().unwrap()
        );
        MockReply::tool_call("shell", serde_json::json!({ "command": command }))
    }));
    target.set(mock.base_url()).unwrap();
    let home = daemon_home(&mock);
    fetcher_template(&home, "narrow", "[\"example.com\"]");
    fetcher_template(&home, "wide", "[\"*\"]");
    let d = Daemon::start(&home).await;
    for (name, template) in [("n", "narrow"), ("w", "wide")] {
        d.post(
            "/v1/agents",
            serde_json::json!({"name": name, "template": template}),
        )
        .await;
    }

    // The narrowed agent may reach example.com alone; the other one both.
    let narrow = d.get("/v1/agents/n").await;
    assert_eq!(narrow["sandbox"]["network"], "allowlist", "{narrow}");
    assert_eq!(
        narrow["sandbox"]["allow_domains"],
        serde_json::json!(["example.com"])
    );
    assert_eq!(narrow["sandbox"]["backend"], "landlock");
    assert_eq!(narrow["sandbox"]["limits"]["max_processes"], 256);
    assert_eq!(narrow["sandbox"]["warm"], true);
    let wide = d.get("/v1/agents/w").await;
    assert_eq!(
        wide["sandbox"]["allow_domains"],
        serde_json::json!(["127.0.0.1", "example.com"])
    );
    let out = reef(&home)
        .args(["agent", "status", "n"])
        .assert()
        .success();
    let status = stdout_of(&out);
    assert!(
        status.contains(
            "sandbox   landlock, network allowlist (example.com), writes the workspace, memory 2G"
        ) && status.contains("open files, commands forked from a warm sandbox\n"),
        "{status}"
    );

    // And the proxy holds each agent to it.
    let mut seen = Vec::new();
    for name in ["n", "w"] {
        d.post(
            &format!("/v1/agents/{name}/messages"),
            serde_json::json!({"text": "fetch"}),
        )
        .await;
        d.wait(
            &format!("{name}'s turn"),
            &format!("/v1/agents/{name}/inbox"),
            |m| {
                m.as_array()
                    .is_some_and(|a| a.len() == 1 && a[0]["status"] == "done")
            },
        )
        .await;
        let requests = mock.requests();
        let result = requests
            .iter()
            .rev()
            .find(|r| r.ends_with_tool_result())
            .map(|r| r.tool_results().join("\n"))
            .unwrap();
        seen.push(result);
    }
    assert!(seen[0].contains("status=403"), "narrowed: {}", seen[0]);
    assert!(
        seen[1].contains("status=") && !seen[1].contains("status=403"),
        "granted every domain: {}",
        seen[1]
    );

    // What confined each session is in the history and the audit log.
    let events = d.get("/v1/events?kind=agent.sandbox&limit=100").await;
    let narrowed: Vec<&serde_json::Value> = events
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["data"]["allow_domains"] == serde_json::json!(["example.com"]))
        .collect();
    assert_eq!(narrowed.len(), 1, "{events:#}");
    let out = reef(&home)
        .args(["audit", "query", "--kind", "agent.sandbox", "--json"])
        .assert()
        .success();
    assert!(
        stdout_of(&out).contains("example.com"),
        "{}",
        stdout_of(&out)
    );
}

/// The guest image `scripts/microvm-image` built (see reef-sandbox's microVM tests).
fn microvm_image() -> std::path::PathBuf {
    let dir = std::env::var_os("REEF_MICROVM_IMAGE")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::path::PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cache/reef/microvm")
        });
    assert!(
        dir.join("SHA256SUMS").exists(),
        "no guest image in {}: build it with scripts/microvm-image {0}",
        dir.display()
    );
    dir
}

#[test]
fn the_microvm_backend_runs_a_command_in_a_vm_and_status_says_how() {
    let home = TestHome::new();
    let image = format!("sandbox.microvm.image=\"{}\"", microvm_image().display());
    let host_release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    let guest_release = std::fs::read_to_string(microvm_image().join("kernel-release")).unwrap();
    let out = reef(&home)
        .args(["-c", &image])
        .args(["sandbox", "run", "--backend", "microvm", "--"])
        .args([
            "sh",
            "-c",
            "uname -r; ls /sys/class/net; echo vm > from-vm.txt; exit 7",
        ])
        .assert()
        .code(7);
    // No fallback warning: it ran in the VM, with its own kernel and no network.
    assert_eq!(stderr_of(&out), "");
    assert_eq!(stdout_of(&out), format!("{}\nlo\n", guest_release.trim()));
    assert_ne!(guest_release.trim(), host_release.trim());
    assert_eq!(
        std::fs::read_to_string(home.workspace().join("from-vm.txt")).unwrap(),
        "vm\n"
    );

    let out = reef(&home)
        .args(["-c", &image, "-c", "sandbox.backend=microvm"])
        .args(["sandbox", "status", "--json"])
        .assert()
        .success();
    let report: Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(report["backend"], "microvm");
    assert_eq!(report["works"], true, "{report}");
    assert_eq!(report["effective_backend"], "microvm");
    let vm = &report["microvm"];
    assert!(vm["test_boot_ms"].as_u64().is_some(), "{report}");
    match vm["acceleration"].as_str() {
        Some("tcg") => assert!(
            vm["acceleration_detail"]
                .as_str()
                .unwrap()
                .contains("software emulation"),
            "{report}"
        ),
        Some("kvm") => {}
        other => panic!("acceleration {other:?}: {report}"),
    }

    // A broken image: without sandbox.required, the landlock backend takes over, loudly.
    let out = reef(&home)
        .args(["-c", "sandbox.microvm.image=\"/nonexistent-image\""])
        .args(["sandbox", "run", "--backend", "microvm", "--", "true"])
        .assert()
        .success();
    let warning = stderr_of(&out);
    assert!(
        warning.contains("tools run in the landlock sandbox instead")
            && warning.contains("scripts/microvm-image"),
        "{warning}"
    );
}
