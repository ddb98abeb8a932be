//! The cgroups of a sandbox session, created in reef's process: one-shot helpers join the
//! session's shared cgroup before they leave the host's user namespace, and reef moves each
//! command of a warm sandbox into a cgroup of its own, reused by the next command. The pids
//! controller stops fork bombs (RLIMIT_NPROC does not apply to a reef running as root) and the
//! memory controller bounds the whole process tree. Uses cgroup v2
//! where the controller is enabled there, else the v1 hierarchy. Best effort: a machine
//! without writable cgroups still gets the rlimits, and `reef sandbox status` says so.

use crate::policy::Limits;
use std::fs;
use std::path::{Path, PathBuf};

const ROOT: &str = "/sys/fs/cgroup";
const PREFIX: &str = "reef-sbx-";

/// The cgroups of one `Sandbox` (a session), created once in reef's own process: per limited
/// controller a session directory, holding a `shared` cgroup that one-shot helpers join and a
/// cgroup per running command of a warm sandbox, reused from one command to the next. All are
/// removed when the session ends.
#[derive(Debug, Default)]
pub(crate) struct SessionCgroup {
    /// Per controller: the session's directory, and the limit file and value of each cgroup.
    parents: Vec<(PathBuf, &'static str, String)>,
    /// The `shared` cgroup of each controller.
    shared: Vec<PathBuf>,
    /// Command cgroups not in use, empty and limited, ready for the next command.
    free: std::sync::Mutex<Vec<Leaf>>,
    /// Command cgroups ever made (names the next).
    made: std::sync::atomic::AtomicU64,
    /// Controllers that could not be set up, and why (shown by `reef sandbox status`).
    pub problems: Vec<String>,
}

/// One command's cgroups (one per limited controller).
#[derive(Debug)]
pub(crate) struct Leaf {
    dirs: Vec<PathBuf>,
}

static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

impl SessionCgroup {
    /// Creates the session's cgroups per limited controller, beside this process's own.
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
                Ok((parent, file, shared)) => {
                    session.parents.push((parent, file, limit.to_string()));
                    session.shared.push(shared);
                }
                Err(problem) => session.problems.push(format!("{controller}: {problem}")),
            }
        }
        session
    }

    /// The directories a one-shot helper joins (it writes its pid to each `cgroup.procs`).
    pub(crate) fn dirs(&self) -> &[PathBuf] {
        &self.shared
    }

    /// A command's own cgroups: an emptied one of an earlier command, or new ones. `None` when
    /// the session has no cgroups.
    pub(crate) fn lease(&self) -> Result<Option<Leaf>, String> {
        if self.parents.is_empty() {
            return Ok(None);
        }
        {
            let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(i) = free.iter().position(Leaf::is_empty) {
                return Ok(Some(free.swap_remove(i)));
            }
        }
        let n = self.made.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut leaf = Leaf { dirs: Vec::new() };
        for (parent, file, value) in &self.parents {
            let dir = parent.join(format!("c-{n}"));
            fs::create_dir(&dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
            leaf.dirs.push(dir.clone());
            fs::write(dir.join(file), value)
                .map_err(|e| format!("write {}: {e}", dir.join(file).display()))?;
        }
        Ok(Some(leaf))
    }

    /// Kills whatever is still in `leaf` and keeps it for a later command, which takes it once
    /// it is empty.
    pub(crate) fn release(&self, leaf: Leaf) {
        leaf.kill_all();
        self.free
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(leaf);
    }
}

impl Leaf {
    /// Moves process `pid` (as reef sees it) into these cgroups.
    pub(crate) fn join(&self, pid: u32) -> Result<(), String> {
        for dir in &self.dirs {
            fs::write(dir.join("cgroup.procs"), pid.to_string())
                .map_err(|e| format!("move the command into {}: {e}", dir.display()))?;
        }
        Ok(())
    }

    /// The `tasks` file of each of these cgroups, opened for writing, when all are cgroup v1:
    /// a process given them moves its own (single) thread in by writing `0`, which the kernel
    /// does without its system-wide migration lock. `None` on cgroup v2.
    pub(crate) fn tasks_files(&self) -> Result<Option<Vec<std::os::fd::OwnedFd>>, String> {
        let mut files = Vec::new();
        for dir in &self.dirs {
            let tasks = dir.join("tasks");
            if !tasks.exists() {
                return Ok(None);
            }
            let file = fs::OpenOptions::new()
                .write(true)
                .open(&tasks)
                .map_err(|e| format!("open {}: {e}", tasks.display()))?;
            files.push(file.into());
        }
        Ok(Some(files))
    }

    /// Kills every process in these cgroups (`cgroup.kill` where the kernel has it, else
    /// SIGKILL to each listed process).
    fn kill_all(&self) {
        for dir in &self.dirs {
            if fs::write(dir.join("cgroup.kill"), "1").is_ok() {
                continue;
            }
            let procs = fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
            for pid in procs
                .split_whitespace()
                .filter_map(|p| p.parse::<i32>().ok())
            {
                if let Some(pid) = rustix::process::Pid::from_raw(pid) {
                    let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
                }
            }
        }
    }

    /// Whether no process is in these cgroups.
    fn is_empty(&self) -> bool {
        self.dirs.iter().all(|dir| {
            fs::read_to_string(dir.join("cgroup.procs")).is_ok_and(|procs| procs.trim().is_empty())
        })
    }
}

impl Drop for SessionCgroup {
    fn drop(&mut self) {
        let parents: Vec<PathBuf> = self.parents.iter().map(|(dir, _, _)| dir.clone()).collect();
        if remove_session(&parents) {
            return;
        }
        // Processes of the session are still dying (a warm sandbox's spares end with its PID
        // 1, which the kernel kills a moment after its helper): retry for a second, off this
        // thread. What still remains then is swept by a later session.
        let retried = std::thread::Builder::new()
            .name("reef-cgroup-cleanup".into())
            .spawn(move || {
                for _ in 0..100 {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                    if remove_session(&parents) {
                        return;
                    }
                }
            });
        if let Err(err) = retried {
            tracing::debug!(%err, "cannot retry removing the session's cgroups");
        }
    }
}

/// Kills what is left in the session's cgroups and removes them; whether all are gone.
fn remove_session(parents: &[PathBuf]) -> bool {
    for parent in parents {
        for entry in fs::read_dir(parent).into_iter().flatten().flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                let leaf = Leaf {
                    dirs: vec![entry.path()],
                };
                leaf.kill_all();
                let _ = fs::remove_dir(entry.path());
            }
        }
        let _ = fs::remove_dir(parent);
    }
    parents.iter().all(|p| !p.exists())
}

/// Joins the given cgroups (in the helper, before leaving the host's namespaces). Must be
/// called in a single-threaded process: on cgroup v1 it moves its one thread by writing `0`
/// to `tasks`, which the kernel does without the system-wide lock (and its wait for an RCU
/// grace period, about 10 ms here) that moving a whole process through `cgroup.procs` takes.
pub(crate) fn join(dirs: &[PathBuf]) -> Result<(), String> {
    let me = std::process::id().to_string();
    for dir in dirs {
        let tasks = dir.join("tasks");
        let (file, value) = if tasks.exists() {
            (tasks, "0")
        } else {
            (dir.join("cgroup.procs"), me.as_str())
        };
        fs::write(&file, value).map_err(|e| format!("join cgroup {}: {e}", dir.display()))?;
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

/// Creates the session directory of `controller` and its `shared` cgroup with the limit.
/// Returns (session directory, limit file, shared cgroup).
fn create_one(
    own: &str,
    controller: &str,
    limit: u64,
    name: &str,
) -> Result<(PathBuf, &'static str, PathBuf), String> {
    let (parent, v2) = locate(own, controller).ok_or("controller not mounted")?;
    sweep(&parent);
    let dir = parent.join(name);
    fs::create_dir(&dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
    let file = match (controller, v2) {
        ("pids", _) => "pids.max",
        ("memory", true) => "memory.max",
        _ => "memory.limit_in_bytes",
    };
    let made = (|| {
        if v2 {
            // Each command's cgroup inside gets the controller (the session directory holds no
            // process itself).
            let control = dir.join("cgroup.subtree_control");
            fs::write(&control, format!("+{controller}"))
                .map_err(|e| format!("write {}: {e}", control.display()))?;
        }
        let shared = dir.join("shared");
        fs::create_dir(&shared).map_err(|e| format!("create {}: {e}", shared.display()))?;
        fs::write(shared.join(file), limit.to_string())
            .map_err(|e| format!("write {file}: {e}"))?;
        Ok(shared)
    })();
    match made {
        Ok(shared) => Ok((dir, file, shared)),
        Err(e) => {
            remove_session(&[dir]);
            Err(e)
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
            remove_session(&[entry.path()]); // fails (harmlessly) while still in use
        }
    }
}
