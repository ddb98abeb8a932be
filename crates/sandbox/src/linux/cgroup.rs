//! The cgroups of a sandbox session, set up in reef's process: one-shot helpers join the
//! session's shared cgroup before they leave the host's user namespace, and reef moves each
//! command of a warm sandbox into a cgroup of its own, reused by the next command. A session's
//! directory is taken from a pool beside reef's own cgroup (`reef-sessions/`) and handed back
//! emptied when the session ends, so a one-shot `reef sandbox run` renames one directory
//! instead of creating and removing four. The pids
//! controller stops fork bombs (RLIMIT_NPROC does not apply to a reef running as root) and the
//! memory controller bounds the whole process tree. Uses cgroup v2
//! where the controller is enabled there, else the v1 hierarchy. Best effort: a machine
//! without writable cgroups still gets the rlimits, and `reef sandbox status` says so.

use crate::policy::Limits;
use std::fs;
use std::path::{Path, PathBuf};

const ROOT: &str = "/sys/fs/cgroup";
/// Session directories of earlier reef versions (`reef-sbx-PID-N`), swept when their owner
/// is gone.
const PREFIX: &str = "reef-sbx-";
/// The pool of session directories, per controller: `PID-TAG` in use by that reef process,
/// `free-TAG` emptied and waiting for the next session.
const POOL: &str = "reef-sessions";
const FREE: &str = "free-";
/// Free session directories kept per pool; one handed back beyond these is removed.
const KEEP_FREE: usize = 16;

/// The cgroups of one `Sandbox` (a session), set up once in reef's own process: per limited
/// controller a session directory, holding a `shared` cgroup that one-shot helpers join and a
/// cgroup per running command of a warm sandbox, reused from one command to the next. When the
/// session ends, what runs in them is killed, the command cgroups are removed and the
/// directory goes back to the pool.
#[derive(Debug, Default)]
pub(crate) struct SessionCgroup {
    /// The session's directories: one per limited controller on cgroup v1, one for all on v2.
    parents: Vec<SessionDir>,
    /// The `shared` cgroup of each session directory.
    shared: Vec<PathBuf>,
    /// Command cgroups not in use, empty and limited, ready for the next command.
    free: std::sync::Mutex<Vec<Leaf>>,
    /// Command cgroups ever made (names the next).
    made: std::sync::atomic::AtomicU64,
    /// Controllers that could not be set up, and why (shown by `reef sandbox status`).
    pub problems: Vec<String>,
}

/// A session directory, and the limit file and value of each cgroup in it.
#[derive(Debug)]
struct SessionDir {
    dir: PathBuf,
    limits: Vec<(&'static str, String)>,
}

/// One command's cgroups (one per session directory).
#[derive(Debug)]
pub(crate) struct Leaf {
    dirs: Vec<PathBuf>,
}

static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

impl SessionCgroup {
    /// Sets up the session's cgroups per limited controller, beside this process's own.
    pub(crate) fn create(limits: &Limits) -> SessionCgroup {
        let mut session = SessionCgroup::default();
        let own = fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
        let wanted: [(&str, Option<u64>); 2] = [
            ("pids", limits.max_processes),
            ("memory", limits.memory_bytes),
        ];
        for (controller, limit) in wanted {
            let Some(limit) = limit else { continue };
            if let Err(problem) = session.limit(&own, controller, limit) {
                session.problems.push(format!("{controller}: {problem}"));
            }
        }
        session.shared = session
            .parents
            .iter()
            .map(|p| p.dir.join("shared"))
            .collect();
        session
    }

    /// Limits `controller` in this session: in a session directory of its own (cgroup v1), or
    /// in the one the session already has in the same v2 hierarchy.
    fn limit(&mut self, own: &str, controller: &str, limit: u64) -> Result<(), String> {
        let (parent, v2) = locate(own, controller).ok_or("controller not mounted")?;
        let file = match (controller, v2) {
            ("pids", _) => "pids.max",
            ("memory", true) => "memory.max",
            _ => "memory.limit_in_bytes",
        };
        let pool = parent.join(POOL);
        if v2 && let Some(session) = self.parents.iter_mut().find(|p| p.dir.starts_with(&pool)) {
            enable(&pool, controller)?;
            enable(&session.dir, controller)?;
            limit_shared(&session.dir, file, limit)?;
            session.limits.push((file, limit.to_string()));
            return Ok(());
        }
        let dir = claim(&parent, v2, controller, file, limit)?;
        self.parents.push(SessionDir {
            dir,
            limits: vec![(file, limit.to_string())],
        });
        Ok(())
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
        for parent in &self.parents {
            let dir = parent.dir.join(format!("c-{n}"));
            fs::create_dir(&dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
            leaf.dirs.push(dir.clone());
            for (file, value) in &parent.limits {
                fs::write(dir.join(file), value)
                    .map_err(|e| format!("write {}: {e}", dir.join(file).display()))?;
            }
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
        let mut parents: Vec<PathBuf> = self.parents.iter().map(|p| p.dir.clone()).collect();
        parents.retain(|dir| !hand_back(dir));
        if parents.is_empty() {
            return;
        }
        // Processes of the session are still dying (a warm sandbox's spares end with its PID
        // 1, which the kernel kills a moment after its helper): retry for a second, off this
        // thread. A directory still held then is taken back by a later session, which sees
        // that its owner is gone.
        let retried = std::thread::Builder::new()
            .name("reef-cgroup-cleanup".into())
            .spawn(move || {
                for _ in 0..100 {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                    parents.retain(|dir| !hand_back(dir));
                    if parents.is_empty() {
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

/// Takes a session directory from the pool below `parent` (a free one, or one whose reef has
/// exited), or makes one, and sets `limit` in `file` of its `shared` cgroup.
fn claim(
    parent: &Path,
    v2: bool,
    controller: &str,
    file: &str,
    limit: u64,
) -> Result<PathBuf, String> {
    sweep(parent);
    let pool = parent.join(POOL);
    match fs::create_dir(&pool) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(format!("create {}: {e}", pool.display())),
    }
    if v2 {
        // The sessions inside get the controller (the pool holds no process itself). Written
        // every time: another reef may have created the pool a moment ago and not yet this.
        enable(&pool, controller)?;
    }
    if let Some(dir) = take_pooled(&pool) {
        // A directory kept from another session: it still holds that one's limits. Should
        // the kernel refuse the new one (a v1 memory cgroup still charged above it), or the
        // controller not be enabled in it (v2), a new directory is made instead.
        let ready = (|| {
            if v2 {
                enable(&dir, controller)?;
                unlimit_v2(&dir)?;
            }
            limit_shared(&dir, file, limit)
        })();
        if ready.is_ok() {
            return Ok(dir);
        }
        remove_session(std::slice::from_ref(&dir));
    }
    let dir = make_session(&pool, controller, v2)?;
    match limit_shared(&dir, file, limit) {
        Ok(()) => Ok(dir),
        Err(e) => {
            remove_session(std::slice::from_ref(&dir));
            Err(e)
        }
    }
}

/// Takes a session directory another session may reuse, renamed for this process: one whose
/// reef has exited first (so that such directories do not pile up), else a free one.
fn take_pooled(pool: &Path) -> Option<PathBuf> {
    let me = std::process::id();
    let mut candidates: Vec<(bool, PathBuf, String)> = fs::read_dir(pool)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| {
            let name = e.file_name();
            let tag = name.to_str().and_then(reusable)?.to_owned();
            let free = name.to_string_lossy().starts_with(FREE);
            Some((free, e.path(), tag))
        })
        .collect();
    candidates.sort_by_key(|(free, _, _)| *free);
    for (_, dir, tag) in candidates {
        if empty_session(&dir) {
            let mine = pool.join(format!("{me}-{tag}"));
            // Atomic: of two reefs taking the same directory, one rename finds it gone.
            if fs::rename(&dir, &mine).is_ok() {
                return Some(mine);
            }
        }
    }
    None
}

/// Lifts every limit an earlier session left on a v2 session directory's `shared` cgroup (one
/// directory holds all controllers there), so that only this session's own apply.
fn unlimit_v2(dir: &Path) -> Result<(), String> {
    for file in ["pids.max", "memory.max"] {
        let path = dir.join("shared").join(file);
        if path.exists() {
            fs::write(&path, "max").map_err(|e| format!("write {}: {e}", path.display()))?;
        }
    }
    Ok(())
}

/// Sets `limit` in `file` of the session's `shared` cgroup, creating it if need be.
fn limit_shared(dir: &Path, file: &str, limit: u64) -> Result<(), String> {
    let shared = dir.join("shared");
    match fs::create_dir(&shared) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(format!("create {}: {e}", shared.display())),
    }
    fs::write(shared.join(file), limit.to_string()).map_err(|e| format!("write {file}: {e}"))
}

/// The tag of a pooled session directory another session may take: a free one, or one whose
/// reef process has exited (its `PID-TAG` name names a process that is gone).
fn reusable(name: &str) -> Option<&str> {
    if let Some(tag) = name.strip_prefix(FREE) {
        return Some(tag);
    }
    let (owner, tag) = name.split_once('-')?;
    exited(owner).then_some(tag)
}

/// Whether the reef process `owner` (a pid, as named in a session directory) has exited.
fn exited(owner: &str) -> bool {
    owner.parse::<u32>().is_ok() && !Path::new("/proc").join(owner).exists()
}

/// Empties a pooled session directory for its next session: kills what is left in it and
/// removes its command cgroups (only `shared` stays). Whether it is empty now.
fn empty_session(dir: &Path) -> bool {
    let mut empty = true;
    for entry in fs::read_dir(dir).into_iter().flatten().flatten() {
        if !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let leaf = Leaf {
            dirs: vec![entry.path()],
        };
        leaf.kill_all();
        let kept = entry.file_name() == "shared";
        let gone = !kept && fs::remove_dir(entry.path()).is_ok();
        empty &= gone || leaf.is_empty();
    }
    empty
}

/// A new session directory in the pool, named for this process.
fn make_session(pool: &Path, controller: &str, v2: bool) -> Result<PathBuf, String> {
    let me = std::process::id();
    loop {
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // The tag stays with the directory through the pool, so it must be new to the pool.
        let tag = format!("{me}.{n}");
        if pool.join(format!("{FREE}{tag}")).exists() {
            continue;
        }
        let dir = pool.join(format!("{me}-{tag}"));
        match fs::create_dir(&dir) {
            Ok(()) => {
                if v2 && let Err(e) = enable(&dir, controller) {
                    remove_session(&[dir]);
                    return Err(e);
                }
                return Ok(dir);
            }
            // Left by an earlier process with this pid: try the next name.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(format!("create {}: {e}", dir.display())),
        }
    }
}

/// Gives `controller` to the cgroups below `dir` (cgroup v2).
fn enable(dir: &Path, controller: &str) -> Result<(), String> {
    let control = dir.join("cgroup.subtree_control");
    fs::write(&control, format!("+{controller}"))
        .map_err(|e| format!("write {}: {e}", control.display()))
}

/// Hands a session directory back to the pool once nothing runs in it (killing what does);
/// whether it is back.
fn hand_back(dir: &Path) -> bool {
    let (Some(pool), Some((_, tag))) = (
        dir.parent(),
        dir.file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.split_once('-')),
    ) else {
        return true;
    };
    if !dir.exists() {
        return true;
    }
    let free = fs::read_dir(pool)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(FREE))
        .count();
    // Enough are waiting, or the free name is taken (a tag reused after a pid was): the
    // directory goes.
    empty_session(dir)
        && ((free < KEEP_FREE && fs::rename(dir, pool.join(format!("{FREE}{tag}"))).is_ok())
            || remove_session(&[dir.to_path_buf()]))
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
        if exited(owner) {
            remove_session(&[entry.path()]); // fails (harmlessly) while still in use
        }
    }
}
