//! A cgroup per sandboxed command, created by the helper before it leaves the host's user
//! namespace: the pids controller stops fork bombs (RLIMIT_NPROC does not apply to a reef
//! running as root) and the memory controller bounds the whole process tree. Uses cgroup v2
//! where the controller is enabled there, else the v1 hierarchy. Best effort: a machine
//! without writable cgroups still gets the rlimits, and `reef sandbox status` says so.

use crate::policy::Limits;
use std::fs;
use std::path::{Path, PathBuf};

const ROOT: &str = "/sys/fs/cgroup";
const PREFIX: &str = "reef-sbx-";

/// The cgroups this helper joined; `leave` moves it back out and removes them.
#[derive(Debug, Default)]
pub(crate) struct Joined {
    dirs: Vec<(PathBuf, PathBuf)>, // (created dir, parent dir)
    pub problems: Vec<String>,
}

/// Creates and joins a cgroup per limited controller.
pub(crate) fn join(limits: &Limits) -> Joined {
    let mut joined = Joined::default();
    let own = fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let wanted: [(&str, Option<u64>); 2] =
        [("pids", limits.max_processes), ("memory", limits.memory_bytes)];
    for (controller, limit) in wanted {
        let Some(limit) = limit else { continue };
        match join_one(&own, controller, limit) {
            Ok(pair) => joined.dirs.push(pair),
            Err(problem) => joined.problems.push(format!("{controller}: {problem}")),
        }
    }
    joined
}

impl Joined {
    /// Moves this process back to the parent cgroups and removes the ones it created.
    pub(crate) fn leave(self) {
        let me = std::process::id().to_string();
        for (dir, parent) in self.dirs.into_iter().rev() {
            let _ = fs::write(parent.join("cgroup.procs"), &me);
            let _ = fs::remove_dir(&dir);
        }
    }
}

/// Where `controller` lives for this process: (directory of its current cgroup, is v2).
fn locate(own: &str, controller: &str) -> Option<(PathBuf, bool)> {
    let v2_controllers = fs::read_to_string(Path::new(ROOT).join("cgroup.controllers")).unwrap_or_default();
    if v2_controllers.split_whitespace().any(|c| c == controller) {
        let rel = own.lines().find_map(|l| l.strip_prefix("0::"))?;
        return Some((Path::new(ROOT).join(rel.trim_start_matches('/')), true));
    }
    let rel = own.lines().find_map(|line| {
        let mut parts = line.splitn(3, ':');
        let (_, names, path) = (parts.next()?, parts.next()?, parts.next()?);
        names.split(',').any(|n| n == controller).then_some(path)
    })?;
    let base = Path::new(ROOT).join(controller);
    base.is_dir().then(|| (base.join(rel.trim_start_matches('/')), false))
}

fn join_one(own: &str, controller: &str, limit: u64) -> Result<(PathBuf, PathBuf), String> {
    let (parent, v2) = locate(own, controller).ok_or("controller not mounted")?;
    sweep(&parent);
    let dir = parent.join(format!("{PREFIX}{}", std::process::id()));
    fs::create_dir(&dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
    let (file, value) = match (controller, v2) {
        ("pids", _) => ("pids.max", limit.to_string()),
        ("memory", true) => ("memory.max", limit.to_string()),
        _ => ("memory.limit_in_bytes", limit.to_string()),
    };
    let result = fs::write(dir.join(file), value)
        .map_err(|e| format!("write {file}: {e}"))
        .and_then(|()| {
            fs::write(dir.join("cgroup.procs"), std::process::id().to_string())
                .map_err(|e| format!("join {}: {e}", dir.display()))
        });
    match result {
        Ok(()) => Ok((dir, parent)),
        Err(e) => {
            let _ = fs::remove_dir(&dir);
            Err(e)
        }
    }
}

/// Removes empty cgroups left by helpers that were killed before cleaning up.
fn sweep(parent: &Path) {
    let Ok(entries) = fs::read_dir(parent) else { return };
    for entry in entries.flatten() {
        if entry.file_name().to_string_lossy().starts_with(PREFIX) {
            let _ = fs::remove_dir(entry.path()); // fails (harmlessly) while still in use
        }
    }
}
