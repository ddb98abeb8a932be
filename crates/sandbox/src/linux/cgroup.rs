//! A cgroup per sandbox session, created in reef's process and joined by each command's helper
//! before it leaves the host's user namespace: the pids controller stops fork bombs (RLIMIT_NPROC does not apply to a reef
//! running as root) and the memory controller bounds the whole process tree. Uses cgroup v2
//! where the controller is enabled there, else the v1 hierarchy. Best effort: a machine
//! without writable cgroups still gets the rlimits, and `reef sandbox status` says so.

use crate::policy::Limits;
use std::fs;
use std::path::{Path, PathBuf};

const ROOT: &str = "/sys/fs/cgroup";
const PREFIX: &str = "reef-sbx-";

/// The cgroups of one `Sandbox` (a session): created once in reef's own process, joined by
/// every command's helper, removed when the session ends.
#[derive(Debug, Default)]
pub(crate) struct SessionCgroup {
    dirs: Vec<PathBuf>,
    /// Controllers that could not be set up, and why (shown by `reef sandbox status`).
    pub problems: Vec<String>,
}

static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

impl SessionCgroup {
    /// Creates a cgroup per limited controller, beside this process's own.
    pub(crate) fn create(limits: &Limits) -> SessionCgroup {
        let mut session = SessionCgroup::default();
        let own = fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
        let wanted: [(&str, Option<u64>); 2] = [
            ("pids", limits.max_processes),
            ("memory", limits.memory_bytes),
        ];
        let name = format!(
            "{PREFIX}{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        );
        for (controller, limit) in wanted {
            let Some(limit) = limit else { continue };
            match create_one(&own, controller, limit, &name) {
                Ok(dir) => session.dirs.push(dir),
                Err(problem) => session.problems.push(format!("{controller}: {problem}")),
            }
        }
        session
    }

    /// The directories a helper joins (it writes its pid to each `cgroup.procs`).
    pub(crate) fn dirs(&self) -> &[PathBuf] {
        &self.dirs
    }
}

impl Drop for SessionCgroup {
    fn drop(&mut self) {
        for dir in &self.dirs {
            let _ = fs::remove_dir(dir); // still busy: swept by a later session
        }
    }
}

/// Joins the given cgroups (in the helper, before leaving the host's namespaces).
pub(crate) fn join(dirs: &[PathBuf]) -> Result<(), String> {
    let me = std::process::id().to_string();
    for dir in dirs {
        fs::write(dir.join("cgroup.procs"), &me)
            .map_err(|e| format!("join cgroup {}: {e}", dir.display()))?;
    }
    Ok(())
}

/// Where `controller` lives for this process: (directory of its current cgroup, is v2).
fn locate(own: &str, controller: &str) -> Option<(PathBuf, bool)> {
    let v2_controllers =
        fs::read_to_string(Path::new(ROOT).join("cgroup.controllers")).unwrap_or_default();
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
    base.is_dir()
        .then(|| (base.join(rel.trim_start_matches('/')), false))
}

fn create_one(own: &str, controller: &str, limit: u64, name: &str) -> Result<PathBuf, String> {
    let (parent, v2) = locate(own, controller).ok_or("controller not mounted")?;
    sweep(&parent);
    let dir = parent.join(name);
    fs::create_dir(&dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
    let (file, value) = match (controller, v2) {
        ("pids", _) => ("pids.max", limit.to_string()),
        ("memory", true) => ("memory.max", limit.to_string()),
        _ => ("memory.limit_in_bytes", limit.to_string()),
    };
    match fs::write(dir.join(file), value) {
        Ok(()) => Ok(dir),
        Err(e) => {
            let _ = fs::remove_dir(&dir);
            Err(format!("write {file}: {e}"))
        }
    }
}

/// Removes cgroups left by reef processes that have exited without cleaning up. A cgroup of
/// a live process is left alone even when empty: its session may have created it a moment
/// ago and not started a command in it yet.
fn sweep(parent: &Path) {
    let Ok(entries) = fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(owner) = name
            .to_str()
            .and_then(|n| n.strip_prefix(PREFIX))
            .and_then(|rest| rest.split('-').next())
        else {
            continue;
        };
        if !Path::new("/proc").join(owner).exists() {
            let _ = fs::remove_dir(entry.path()); // fails (harmlessly) while still in use
        }
    }
}
