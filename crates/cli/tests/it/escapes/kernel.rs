//! What the kernel must enforce: `/proc`'s knobs are read-only inside, and a backend whose
//! Landlock is not enforced does not count as working.

use crate::reef;
use reef_test_support::{TestHome, without_landlock};
use serde_json::Value;

#[test]
fn kernel_settings_are_read_only_in_reef_sandbox_run() {
    let home = TestHome::new();
    // Observed: "sh: 1: cannot create /proc/sys/kernel/core_pattern: Read-only file system".
    let out = reef(&home)
        .args(["sandbox", "run", "--", "sh", "-c"])
        .arg("echo '|/tmp/pwn' > /proc/sys/kernel/core_pattern")
        .assert()
        .failure();
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(stderr.contains("Read-only file system"), "{stderr}");
    // Positive control: /proc/sys is there and readable.
    reef(&home)
        .args(["sandbox", "run", "--", "cat", "/proc/sys/kernel/osrelease"])
        .assert()
        .success();
}

/// `reef …` run under `without-landlock`: Landlock's system calls fail with ENOSYS, as on a
/// kernel without it (or under a seccomp filter that hides it). The same hermetic environment
/// as `reef(home)`.
fn reef_without_landlock(home: &TestHome) -> assert_cmd::Command {
    let mut wrapped = assert_cmd::Command::new(without_landlock());
    wrapped
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home.path())
        .env("REEF_HOME", home.reef_home())
        .current_dir(home.workspace())
        .arg(env!("CARGO_BIN_EXE_reef"));
    wrapped
}

#[test]
fn sandbox_status_on_a_kernel_without_landlock_says_the_backend_does_not_work() {
    let home = TestHome::new();
    let out = reef_without_landlock(&home)
        .args(["sandbox", "status", "--json"])
        .assert()
        .code(1);
    let report: Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(report["backend"], "landlock");
    assert_eq!(report["works"], false, "{report}");
    let reason = report["error"].as_str().unwrap_or_default();
    assert!(reason.contains("landlock is not enforced"), "{report}");
    // With the sandbox required, nothing runs unconfined.
    let out = reef_without_landlock(&home)
        .args([
            "-c",
            "sandbox.required=true",
            "sandbox",
            "run",
            "--",
            "true",
        ])
        .assert()
        .code(1);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(stderr.contains("landlock is not enforced"), "{stderr}");

    // Positive control: the same machine without the filter.
    let out = reef(&home)
        .args(["sandbox", "status", "--json"])
        .assert()
        .success();
    let report: Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(report["works"], true, "{report}");
}
