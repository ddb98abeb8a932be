//! A sandbox for a reef that runs as root. Mapped into its user namespaces as is, the command
//! would act on host files as host root: the owner of every root-only file, able to read
//! `0600` keys anywhere the view shows. So a root helper gives the command an unprivileged
//! host id instead ([`HOST_ID`], which owns nothing), and shows it the paths it must write or
//! read (the workspace, `sandbox.writable`, the request's read-only folders, the proxy's
//! socket) through idmapped mounts in which host root's files appear as that id's: the command
//! writes its workspace, its files land on disk as root's, and every other root-only file of
//! the host is out of its reach. The trees are opened and idmapped while the helper is still
//! root (only root may idmap a host file system, and only root can reach paths under
//! `/root`); then it drops to [`HOST_ID`] and builds the sandbox exactly as for any user,
//! mounting those trees where it would have bound the paths.

use super::sys;
use nix::sys::prctl;
use nix::sys::signal::Signal;
use nix::sys::wait::waitpid;
use nix::unistd::{ForkResult, Gid, Uid, pipe, read, setgroups, setresgid, setresuid};
use rustix::fs::{Mode, OFlags};
use rustix::mount::{OpenTreeFlags, open_tree};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};

/// The host uid and gid a root helper's command runs as: unprivileged, and the owner of no
/// file (it is not in the password database; anything it creates outside the idmapped
/// paths lives in the sandbox's private `/tmp`).
pub(crate) const HOST_ID: u32 = 0x7fff_0000;

/// The idmapped trees of a root helper, by the host path they show.
#[derive(Default)]
pub(crate) struct Trees(Vec<(PathBuf, OwnedFd)>);

impl Trees {
    /// The tree to mount at `path`, if the helper opened one.
    pub(crate) fn get(&self, path: &Path) -> Option<BorrowedFd<'_>> {
        self.0
            .iter()
            .find(|(p, _)| p == path)
            .map(|(_, fd)| fd.as_fd())
    }
}

/// When this helper runs as root: the trees of the host paths the view binds, which must be
/// opened now, while it is root, idmapped so that host root's files show as [`HOST_ID`]'s:
/// `writable` ones read-write (what the command writes is root's on disk), `read_only` ones
/// read-only (folders granted to it, such as a skill's or a git registry, which tools like git
/// refuse to use when they belong to someone else). Only the paths the view itself binds from
/// the host are given here (never one inside the workspace, which the command controls).
/// `None` for any other user, who builds the sandbox with plain bind mounts.
pub(crate) fn prepare(writable: &[&Path], read_only: &[&Path]) -> Result<Option<Trees>, String> {
    let ids = nix::unistd::getresuid().map_err(|e| format!("getresuid: {e}"))?;
    if !(ids.real.is_root() || ids.effective.is_root() || ids.saved.is_root()) {
        return Ok(None);
    }
    let userns = idmapping(HOST_ID)?;
    let mut trees = Trees::default();
    for (paths, read_only) in [(writable, false), (read_only, true)] {
        for path in paths {
            if trees.get(path).is_some() {
                continue;
            }
            let Some(tree) = open_tree_of(path, Some(userns.as_fd()), read_only)? else {
                continue;
            };
            trees.0.push((path.to_path_buf(), tree));
        }
    }
    Ok(Some(trees))
}

/// Drops from root to [`HOST_ID`] for good (no supplementary groups, every uid and gid), and
/// restores what a change of credentials resets: the parent-death signal, and dumpability
/// (without which this process could not write its own user namespace's maps).
pub(crate) fn drop_root() -> Result<(), String> {
    let parent = nix::unistd::getppid();
    let (uid, gid) = (Uid::from_raw(HOST_ID), Gid::from_raw(HOST_ID));
    setgroups(&[]).map_err(|e| format!("drop supplementary groups: {e}"))?;
    setresgid(gid, gid, gid).map_err(|e| format!("set the gid to {HOST_ID}: {e}"))?;
    setresuid(uid, uid, uid).map_err(|e| format!("set the uid to {HOST_ID}: {e}"))?;
    let ids = nix::unistd::getresuid().map_err(|e| format!("getresuid: {e}"))?;
    if ids.real.is_root() || ids.effective.is_root() || ids.saved.is_root() {
        return Err("still root after dropping to the sandbox's id".into());
    }
    prctl::set_dumpable(true).map_err(|e| format!("set dumpable: {e}"))?;
    prctl::set_pdeathsig(Signal::SIGKILL)
        .map_err(|e| format!("set the parent-death signal: {e}"))?;
    // reef may have died while the signal was unset: then no one would stop this sandbox.
    if nix::unistd::getppid() != parent {
        return Err("reef exited while the sandbox was being built".into());
    }
    Ok(())
}

/// Makes this process non-dumpable again once its user namespace's maps are written, so that
/// no other process of [`HOST_ID`] (another sandbox's helper) may open its descriptors
/// through `/proc`.
pub(crate) fn seal() -> Result<(), String> {
    prctl::set_dumpable(false).map_err(|e| format!("clear dumpable: {e}"))
}

/// Opens `path` (resolved by reef: a link in it now means it changed, and is refused) as a
/// detached copy of its mounts, idmapped through `userns` when given (host root's files then
/// show as [`HOST_ID`]'s), read-only when `read_only`. `None` when the path does not exist.
fn open_tree_of(
    path: &Path,
    userns: Option<BorrowedFd<'_>>,
    read_only: bool,
) -> Result<Option<OwnedFd>, String> {
    let Some(source) = super::layers::open_host(path)? else {
        return Ok(None);
    };
    let tree = open_tree(
        &source,
        "",
        OpenTreeFlags::OPEN_TREE_CLONE
            | OpenTreeFlags::OPEN_TREE_CLOEXEC
            | OpenTreeFlags::AT_EMPTY_PATH
            | OpenTreeFlags::AT_RECURSIVE,
    )
    .map_err(|e| format!("open {} as a mount tree: {e}", path.display()))?;
    sys::set_tree_attributes(tree.as_fd(), userns, read_only).map_err(|e| {
        format!(
            "idmap {} for the sandbox's user: {e} (reef runs as root, and its sandbox shows \
             the workspace through an idmapped mount: this needs Linux 5.12 or later and a \
             file system that supports it: ext4, xfs or btrfs, tmpfs from Linux 6.3; not \
             NFS or FUSE)",
            path.display()
        )
    })?;
    Ok(Some(tree))
}

/// A user namespace whose map makes id 0 the host's `id`, for idmapped mounts: a child made
/// only to own it unshares, its maps are written from here (as root), and it exits once the
/// namespace is open.
fn idmapping(id: u32) -> Result<OwnedFd, String> {
    let (ready_read, ready_write) = pipe().map_err(|e| format!("pipe: {e}"))?;
    let (done_read, done_write) = pipe().map_err(|e| format!("pipe: {e}"))?;
    match sys::fork_process().map_err(|e| format!("fork for the idmapping: {e}"))? {
        ForkResult::Child => {
            drop((ready_read, done_write));
            let code = match nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWUSER) {
                Ok(()) => {
                    let _ = nix::unistd::write(&ready_write, b"u");
                    // Until the parent has opened the namespace (it closes its end).
                    let mut byte = [0u8; 1];
                    let _ = read(&done_read, &mut byte);
                    0
                }
                Err(_) => 1,
            };
            std::process::exit(code);
        }
        ForkResult::Parent { child } => {
            drop((ready_write, done_read));
            let mut byte = [0u8; 1];
            let opened = match read(&ready_read, &mut byte) {
                Ok(1) => {
                    let proc_dir = format!("/proc/{child}");
                    let write = |file: &str| {
                        std::fs::write(format!("{proc_dir}/{file}"), format!("0 {id} 1\n"))
                            .map_err(|e| format!("write {file} of the idmapping: {e}"))
                    };
                    write("uid_map")
                        .and_then(|()| write("gid_map"))
                        .and_then(|()| {
                            rustix::fs::open(
                                format!("{proc_dir}/ns/user"),
                                OFlags::RDONLY | OFlags::CLOEXEC,
                                Mode::empty(),
                            )
                            .map_err(|e| format!("open the idmapping's namespace: {e}"))
                        })
                }
                _ => Err("the idmapping's process could not unshare a user namespace".into()),
            };
            drop(done_write);
            let _ = waitpid(child, None);
            opened
        }
    }
}
