//! What a warm sandbox clears once no command runs, so that the next command finds nothing of
//! the last: processes left behind (orphans come to PID 1), files written to the private
//! `/tmp` and `/dev/shm`, and System V IPC objects. `/dev` itself is read-only.

use super::spec::HelperSpec;
use super::sys;
use nix::sys::signal::{Signal, kill};
use nix::sys::wait::waitpid;
use nix::unistd::Pid;
use std::collections::BTreeSet;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The sandbox's private scratch directories, as they were when it was built.
pub(crate) struct Scratch {
    dirs: Vec<Recorded>,
}

/// A directory and what it held when the sandbox was built (the directories leading to the
/// paths mounted there, and those mounts): clearing it removes everything else, never
/// crossing into a mount.
struct Recorded {
    root: PathBuf,
    device: u64,
    kept: BTreeSet<PathBuf>,
}

impl Scratch {
    /// Records `/tmp` and `/dev/shm`; `/tmp` only when it is the sandbox's own (no host path
    /// of the spec is bound at or above it, as with a workspace that is `/tmp` itself).
    pub(crate) fn record(spec: &HelperSpec) -> Scratch {
        let tmp = Path::new("/tmp");
        let host_tmp = std::iter::once(&spec.workspace)
            .chain(&spec.writable)
            .chain(&spec.read_only)
            .any(|p| tmp.starts_with(p));
        let roots: &[&Path] = if host_tmp {
            &[Path::new("/dev/shm")]
        } else {
            &[tmp, Path::new("/dev/shm")]
        };
        Scratch {
            dirs: roots.iter().filter_map(|r| Recorded::record(r)).collect(),
        }
    }

    /// Empties the scratch directories and removes System V IPC objects.
    pub(crate) fn clear(&self) {
        for dir in &self.dirs {
            dir.clear();
        }
        sys::remove_ipc_objects();
    }
}

impl Recorded {
    fn record(root: &Path) -> Option<Recorded> {
        let device = std::fs::symlink_metadata(root).ok()?.dev();
        let mut recorded = Recorded {
            root: root.to_path_buf(),
            device,
            kept: BTreeSet::new(),
        };
        let mut pending = vec![root.to_path_buf()];
        while let Some(dir) = pending.pop() {
            for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                let path = entry.path();
                let same_device = std::fs::symlink_metadata(&path)
                    .map(|m| m.dev() == device && m.is_dir())
                    .unwrap_or(false);
                if same_device {
                    pending.push(path.clone());
                }
                recorded.kept.insert(path);
            }
        }
        Some(recorded)
    }

    fn clear(&self) {
        let mut pending = vec![self.root.clone()];
        while let Some(dir) = pending.pop() {
            for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                let path = entry.path();
                if !self.kept.contains(&path) {
                    remove_on_device(&path, self.device);
                } else if std::fs::symlink_metadata(&path)
                    .is_ok_and(|m| m.is_dir() && m.dev() == self.device)
                {
                    pending.push(path);
                }
            }
        }
    }
}

/// Removes `path` and what it holds, without following links or entering another mount.
fn remove_on_device(path: &Path, device: u64) {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return;
    };
    if !meta.is_dir() {
        let _ = std::fs::remove_file(path);
        return;
    }
    if meta.dev() != device {
        return;
    }
    for entry in std::fs::read_dir(path).into_iter().flatten().flatten() {
        remove_on_device(&entry.path(), device);
    }
    let _ = std::fs::remove_dir(path);
}

/// Kills and reaps every process of the sandbox whose parent is PID 1 except those `keep`
/// names (spares, commands and the relay); run by PID 1, to which orphans come.
pub(crate) fn kill_orphans(keep: impl Fn(Pid) -> bool) {
    loop {
        let orphans: Vec<Pid> = children_of_init()
            .into_iter()
            .filter(|p| !keep(*p))
            .collect();
        if orphans.is_empty() {
            return;
        }
        for pid in &orphans {
            let _ = kill(*pid, Signal::SIGKILL);
        }
        for pid in orphans {
            let _ = waitpid(pid, None);
        }
    }
}

/// The processes whose parent is PID 1, from each `/proc/PID/stat` (which, unlike
/// `/proc/1/task/1/children`, every kernel has).
fn children_of_init() -> Vec<Pid> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| *pid != 1)
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|stat| {
                    // `pid (comm) state ppid …`; comm may hold spaces and parentheses.
                    let rest = stat.rsplit_once(')')?.1;
                    rest.split_whitespace().nth(1)?.parse::<i32>().ok()
                })
                == Some(1)
        })
        .map(Pid::from_raw)
        .collect()
}
