//! The isolation probe, on this machine and on a fabricated /proc + /sys tree.

use reef_sandbox::{Availability, CgroupVersion, probe, probe_root};
use std::fs;

#[test]
fn probing_this_machine_yields_a_report() {
    let report = probe();
    let lines = report.summary_lines();
    assert_eq!(lines.len(), 5);
    assert!(lines[0].starts_with("kernel: "));
    assert!(lines.iter().any(|l| l.starts_with("landlock: ")));
    let json = serde_json::to_value(&report).unwrap();
    assert!(json.get("user_namespaces").is_some());
}

#[test]
fn probe_reads_a_fabricated_tree() {
    let root = tempfile::tempdir().unwrap();
    let r = root.path();
    for dir in [
        "sys/kernel/security",
        "proc/sys/kernel",
        "proc/sys/user",
        "proc/self",
        "sys/fs/cgroup",
    ] {
        fs::create_dir_all(r.join(dir)).unwrap();
    }
    fs::write(
        r.join("sys/kernel/security/lsm"),
        "lockdown,capability,landlock,yama\n",
    )
    .unwrap();
    fs::write(r.join("proc/sys/kernel/osrelease"), "6.8.0-test\n").unwrap();
    fs::write(r.join("proc/sys/user/max_user_namespaces"), "0\n").unwrap();
    fs::write(
        r.join("proc/self/status"),
        "Name:\tx\nSeccomp:\t0\nSeccomp_filters:\t0\n",
    )
    .unwrap();
    fs::write(r.join("sys/fs/cgroup/cgroup.controllers"), "cpu memory\n").unwrap();

    let report = probe_root(r);
    assert_eq!(report.kernel_release.as_deref(), Some("6.8.0-test"));
    assert_eq!(report.landlock.status, Availability::Available);
    assert_eq!(report.lsm.len(), 4);
    assert_eq!(report.user_namespaces.status, Availability::Unavailable);
    assert_eq!(report.seccomp.status, Availability::Available);
    assert_eq!(report.cgroup, CgroupVersion::V2);
    assert!(report.summary_lines()[4].contains("v2"));
}

#[test]
fn probe_of_an_empty_tree_is_unknown() {
    let root = tempfile::tempdir().unwrap();
    let report = probe_root(root.path());
    assert_eq!(report.kernel_release, None);
    assert_eq!(report.landlock.status, Availability::Unknown);
    assert_eq!(report.user_namespaces.status, Availability::Unknown);
    assert_eq!(report.seccomp.status, Availability::Unknown);
    assert_eq!(report.cgroup, CgroupVersion::None);
}
