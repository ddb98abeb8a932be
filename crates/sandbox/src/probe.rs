//! Isolation probe: which kernel confinement features this machine offers, read from
//! /proc and /sys without spawning anything.

use serde::Serialize;
use std::path::Path;

/// Whether a feature is usable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Availability {
    Available,
    Unavailable,
    /// The files that would tell were missing or unreadable.
    Unknown,
}

impl Availability {
    fn as_str(self) -> &'static str {
        match self {
            Self::Available => "available",
            Self::Unavailable => "unavailable",
            Self::Unknown => "unknown",
        }
    }
}

/// One probed feature and the evidence for the verdict.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Feature {
    pub status: Availability,
    pub detail: String,
}

impl Feature {
    fn new(status: Availability, detail: impl Into<String>) -> Self {
        Self {
            status,
            detail: detail.into(),
        }
    }
}

/// Which cgroup hierarchy is mounted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CgroupVersion {
    V2,
    V1,
    None,
}

/// What this machine supports for confining processes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct IsolationReport {
    /// `uname -r`, from /proc/sys/kernel/osrelease.
    pub kernel_release: Option<String>,
    /// Active Linux security modules, from /sys/kernel/security/lsm.
    pub lsm: Vec<String>,
    /// Landlock LSM enabled (its ABI version is not probed).
    pub landlock: Feature,
    /// Unprivileged user namespaces can be created.
    pub user_namespaces: Feature,
    /// The kernel supports seccomp filters.
    pub seccomp: Feature,
    pub cgroup: CgroupVersion,
}

impl IsolationReport {
    /// One human-readable line per probed item.
    pub fn summary_lines(&self) -> Vec<String> {
        let feature =
            |name: &str, f: &Feature| format!("{name}: {} ({})", f.status.as_str(), f.detail);
        vec![
            format!(
                "kernel: {}",
                self.kernel_release.as_deref().unwrap_or("unknown")
            ),
            feature("landlock", &self.landlock),
            feature("user namespaces", &self.user_namespaces),
            feature("seccomp", &self.seccomp),
            format!(
                "cgroup: {}",
                match self.cgroup {
                    CgroupVersion::V2 => "v2 (unified hierarchy)",
                    CgroupVersion::V1 => "v1",
                    CgroupVersion::None => "not mounted",
                }
            ),
        ]
    }
}

/// Probes the running machine.
pub fn probe() -> IsolationReport {
    probe_root(Path::new("/"))
}

/// Probes a machine whose /proc and /sys are found under `root` (for tests and containers).
pub fn probe_root(root: &Path) -> IsolationReport {
    let read = |rel: &str| {
        std::fs::read_to_string(root.join(rel))
            .ok()
            .map(|s| s.trim().to_owned())
    };
    let lsm: Vec<String> = read("sys/kernel/security/lsm")
        .map(|s| {
            s.split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    // On the live machine, ask the kernel itself (securityfs is often not mounted).
    let live = (root == Path::new("/")).then(crate::linux::landlock_abi);
    let landlock = if let Some(Ok(abi)) = live {
        Feature::new(Availability::Available, format!("ABI version {abi}"))
    } else if let Some(Err(errno)) = live.filter(|_| read("sys/kernel/security/lsm").is_none()) {
        Feature::new(
            Availability::Unavailable,
            format!("landlock_create_ruleset: {errno}"),
        )
    } else if lsm.iter().any(|m| m == "landlock") {
        Feature::new(
            Availability::Available,
            "listed in /sys/kernel/security/lsm",
        )
    } else if read("sys/kernel/security/lsm").is_some() {
        Feature::new(
            Availability::Unavailable,
            "not listed in /sys/kernel/security/lsm",
        )
    } else {
        Feature::new(Availability::Unknown, "/sys/kernel/security/lsm unreadable")
    };

    IsolationReport {
        kernel_release: read("proc/sys/kernel/osrelease"),
        landlock,
        lsm,
        user_namespaces: user_namespaces(&read),
        seccomp: seccomp(&read),
        cgroup: cgroup(root),
    }
}

fn user_namespaces(read: &dyn Fn(&str) -> Option<String>) -> Feature {
    if read("proc/sys/kernel/unprivileged_userns_clone").as_deref() == Some("0") {
        return Feature::new(
            Availability::Unavailable,
            "kernel.unprivileged_userns_clone = 0",
        );
    }
    if read("proc/sys/kernel/apparmor_restrict_unprivileged_userns").as_deref() == Some("1") {
        return Feature::new(
            Availability::Unavailable,
            "kernel.apparmor_restrict_unprivileged_userns = 1",
        );
    }
    match read("proc/sys/user/max_user_namespaces").map(|s| s.parse::<u64>()) {
        Some(Ok(0)) => Feature::new(Availability::Unavailable, "user.max_user_namespaces = 0"),
        Some(Ok(n)) => Feature::new(
            Availability::Available,
            format!("user.max_user_namespaces = {n}"),
        ),
        _ => Feature::new(
            Availability::Unknown,
            "/proc/sys/user/max_user_namespaces unreadable",
        ),
    }
}

fn seccomp(read: &dyn Fn(&str) -> Option<String>) -> Feature {
    let Some(status) = read("proc/self/status") else {
        return Feature::new(Availability::Unknown, "/proc/self/status unreadable");
    };
    match status.lines().find_map(|l| l.strip_prefix("Seccomp:")) {
        Some(mode) => Feature::new(
            Availability::Available,
            format!("/proc/self/status Seccomp mode {}", mode.trim()),
        ),
        None => Feature::new(
            Availability::Unavailable,
            "no Seccomp line in /proc/self/status (CONFIG_SECCOMP off)",
        ),
    }
}

fn cgroup(root: &Path) -> CgroupVersion {
    if root.join("sys/fs/cgroup/cgroup.controllers").exists() {
        CgroupVersion::V2
    } else if root.join("sys/fs/cgroup").is_dir()
        && std::fs::read_dir(root.join("sys/fs/cgroup"))
            .map(|mut d| d.next().is_some())
            .unwrap_or(false)
    {
        CgroupVersion::V1
    } else {
        CgroupVersion::None
    }
}
