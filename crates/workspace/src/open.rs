//! Opening a relative path beneath a directory descriptor without following any symbolic link:
//! `openat2` with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS`, or, on kernels
//! without it (before 5.6), one `openat` per name with `O_NOFOLLOW`, which is just as strict.

use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::fs::{AtFlags, FileType, Mode, OFlags, ResolveFlags};
use rustix::io::Errno;
use std::ffi::OsStr;
use std::path::{Component, Path};

/// How paths are resolved. Both must give the same verdict on every path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Resolver {
    /// `openat2`, falling back to [`Resolver::Walk`] when the kernel lacks it.
    Openat2,
    /// One `openat(O_NOFOLLOW)` per component.
    Walk,
}

impl Resolver {
    /// `Openat2` when the kernel has it (tried once on `dir`), else `Walk`. A seccomp profile
    /// that predates `openat2` (some container runtimes) answers EPERM instead of ENOSYS.
    pub(crate) fn probe(dir: BorrowedFd<'_>) -> Self {
        match openat2_beneath(dir, Path::new(""), DIR_HANDLE, Mode::empty()) {
            Err(Errno::NOSYS | Errno::PERM) => Self::Walk,
            _ => Self::Openat2,
        }
    }
}

/// Flags for an intermediate directory: a handle good only for further `*at` calls.
pub(crate) const DIR_HANDLE: OFlags = OFlags::PATH
    .union(OFlags::DIRECTORY)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC);

/// Opens `rel` (plain names only; empty for `dir` itself) beneath `dir` with `flags`, never
/// following a link in any component, the last included.
pub(crate) fn open_beneath(
    dir: BorrowedFd<'_>,
    rel: &Path,
    flags: OFlags,
    mode: Mode,
    resolver: Resolver,
) -> Result<OwnedFd, Errno> {
    if resolver == Resolver::Openat2 {
        match openat2_beneath(dir, rel, flags, mode) {
            // No openat2 (ENOSYS), or a rename raced the lookup too often (EAGAIN).
            Err(Errno::NOSYS | Errno::AGAIN) => {}
            other => return other,
        }
    }
    walk_beneath(dir, rel, flags, mode)
}

fn openat2_beneath(
    dir: BorrowedFd<'_>,
    rel: &Path,
    flags: OFlags,
    mode: Mode,
) -> Result<OwnedFd, Errno> {
    let path = if rel.as_os_str().is_empty() {
        Path::new(".")
    } else {
        rel
    };
    let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
    // openat2 refuses (EINVAL) a mode on an open that creates nothing.
    let mode = if flags.contains(OFlags::CREATE) {
        mode
    } else {
        Mode::empty()
    };
    let mut result = Err(Errno::AGAIN);
    for _ in 0..4 {
        result = rustix::fs::openat2(
            dir,
            path,
            flags | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            mode,
            resolve,
        );
        if !matches!(result, Err(Errno::AGAIN)) {
            break;
        }
    }
    result
}

/// The fallback: each directory on the way opened with `O_NOFOLLOW | O_DIRECTORY`, then the
/// last name with `flags | O_NOFOLLOW`, each relative to the one before.
pub(crate) fn walk_beneath(
    dir: BorrowedFd<'_>,
    rel: &Path,
    flags: OFlags,
    mode: Mode,
) -> Result<OwnedFd, Errno> {
    let names = plain_names(rel)?;
    let Some((last, parents)) = names.split_last() else {
        return rustix::fs::openat(dir, ".", flags | OFlags::CLOEXEC, mode);
    };
    let mut current: Option<OwnedFd> = None;
    for name in parents {
        let at = current.as_ref().map_or(dir, AsFd::as_fd);
        current = Some(rustix::fs::openat(at, *name, DIR_HANDLE, Mode::empty())?);
    }
    let at = current.as_ref().map_or(dir, AsFd::as_fd);
    rustix::fs::openat(at, *last, flags | OFlags::NOFOLLOW | OFlags::CLOEXEC, mode)
}

/// The names of `rel`; anything but plain names (which [`crate::RelPath`] never holds) is
/// refused as `EXDEV`, the error `openat2` gives for an escape.
pub(crate) fn plain_names(rel: &Path) -> Result<Vec<&OsStr>, Errno> {
    rel.components()
        .map(|c| match c {
            Component::Normal(name) => Ok(name),
            _ => Err(Errno::XDEV),
        })
        .collect()
}

/// Why opening `rel` beneath `dir` failed with ELOOP or ENOTDIR, found without following
/// anything: the first component that is a link, or the first one on the way that is not a
/// directory. `None` when every component looks fine now (the tree changed meanwhile).
pub(crate) fn diagnose(dir: BorrowedFd<'_>, rel: &Path) -> Option<Culprit> {
    let names = plain_names(rel).ok()?;
    let mut current: Option<OwnedFd> = None;
    let mut prefix = std::path::PathBuf::new();
    for (i, name) in names.iter().enumerate() {
        prefix.push(name);
        let at = current.as_ref().map_or(dir, AsFd::as_fd);
        let stat = rustix::fs::statat(at, *name, AtFlags::SYMLINK_NOFOLLOW).ok()?;
        match FileType::from_raw_mode(stat.st_mode) {
            FileType::Symlink => return Some(Culprit::Link(prefix)),
            FileType::Directory => {}
            _ if i + 1 < names.len() => return Some(Culprit::NotDirectory(prefix)),
            _ => return None,
        }
        if i + 1 < names.len() {
            current = Some(rustix::fs::openat(at, *name, DIR_HANDLE, Mode::empty()).ok()?);
        }
    }
    None
}

/// The component that made an open fail.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Culprit {
    Link(std::path::PathBuf),
    NotDirectory(std::path::PathBuf),
}

#[cfg(test)]
mod tests;
