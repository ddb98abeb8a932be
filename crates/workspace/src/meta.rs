//! What is at a path, found without following it: metadata from the parent directory's
//! descriptor (`statat` with `AT_SYMLINK_NOFOLLOW`) and listings of one directory.

use crate::open::{DIR_HANDLE, open_beneath};
use crate::{RelPath, Workspace, WorkspaceError};
use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::fs::{AtFlags, Dir, FileType, Mode, OFlags, Stat};
use rustix::io::Errno;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;

/// What a path is, as `lstat` sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
    /// A symbolic link, never followed.
    Symlink,
    /// A FIFO, socket or device.
    Other,
}

impl Kind {
    fn of(stat: &Stat) -> Self {
        match FileType::from_raw_mode(stat.st_mode) {
            FileType::RegularFile => Self::File,
            FileType::Directory => Self::Dir,
            FileType::Symlink => Self::Symlink,
            _ => Self::Other,
        }
    }
}

/// The kind and size of a path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Metadata {
    pub kind: Kind,
    /// Size in bytes (of the link itself for a link).
    pub len: u64,
}

impl Metadata {
    fn of(stat: &Stat) -> Self {
        Self {
            kind: Kind::of(stat),
            len: u64::try_from(stat.st_size).unwrap_or(0),
        }
    }
}

/// One entry of a listing or walk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// Workspace-relative path.
    pub path: RelPath,
    pub kind: Kind,
    pub len: u64,
}

impl Entry {
    /// The entry's own name.
    pub fn name(&self) -> &OsStr {
        self.path.file_name().unwrap_or_default()
    }
}

impl Workspace {
    /// The kind and size of `rel` itself: a link is reported as a link, not followed.
    pub fn metadata(&self, rel: &RelPath) -> Result<Metadata, WorkspaceError> {
        self.check_hidden(rel)?;
        let (Some(parent), Some(name)) = (rel.parent(), rel.file_name()) else {
            let stat = rustix::fs::fstat(&self.fd).map_err(|e| self.io(rel, e.into()))?;
            return Ok(Metadata::of(&stat));
        };
        let dir = open_beneath(
            self.fd.as_fd(),
            parent.as_path(),
            DIR_HANDLE,
            Mode::empty(),
            self.resolver,
        )
        .map_err(|errno| self.classify(rel, errno))?;
        let stat = rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW)
            .map_err(|errno| self.classify(rel, errno))?;
        Ok(Metadata::of(&stat))
    }

    /// The entries of the directory `rel`, sorted by name; links are listed as links and hidden
    /// paths are left out.
    pub fn list(&self, rel: &RelPath) -> Result<Vec<Entry>, WorkspaceError> {
        let fd = self.open_dir(rel)?;
        Ok(self.read_dir(fd, rel)?.1)
    }

    /// The first `max` entries of the directory `rel` by name (as [`Workspace::list`]), and
    /// how many more it holds. Only the entries returned are looked at (one `stat` each), so
    /// a folder of a million files costs reading its names, not a million `stat`s.
    pub fn list_first(
        &self,
        rel: &RelPath,
        max: usize,
    ) -> Result<(Vec<Entry>, usize), WorkspaceError> {
        let fd = self.open_dir(rel)?;
        let (dir, names) = self.read_names(fd, rel)?;
        let at = dir.fd().map_err(|errno| self.io(rel, errno.into()))?;
        let visible: Vec<&OsString> = names
            .iter()
            .filter(|name| !self.is_hidden(&rel.child(name)))
            .collect();
        let more = visible.len().saturating_sub(max);
        let entries = visible
            .into_iter()
            .take(max)
            .filter_map(|name| entry(at, rel, name))
            .collect();
        Ok((entries, more))
    }

    /// Opens the directory `rel` for reading its entries.
    pub(crate) fn open_dir(&self, rel: &RelPath) -> Result<OwnedFd, WorkspaceError> {
        self.open_at(
            rel,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW,
            Mode::empty(),
        )
    }

    /// Reads the open directory `fd` (which is `rel`): its entries sorted by name, without
    /// hidden paths, and the directory (for opening its children).
    pub(crate) fn read_dir(
        &self,
        fd: OwnedFd,
        rel: &RelPath,
    ) -> Result<(Dir, Vec<Entry>), WorkspaceError> {
        let (dir, names) = self.read_names(fd, rel)?;
        let at = dir.fd().map_err(|errno| self.io(rel, errno.into()))?;
        let entries = names
            .iter()
            .filter_map(|name| entry(at, rel, name))
            .filter(|e| !self.is_hidden(&e.path))
            .collect();
        Ok((dir, entries))
    }

    /// The names in the open directory `fd` (which is `rel`), sorted, without `.` and `..`.
    fn read_names(
        &self,
        fd: OwnedFd,
        rel: &RelPath,
    ) -> Result<(Dir, Vec<OsString>), WorkspaceError> {
        let io = |errno: Errno| self.io(rel, errno.into());
        let mut dir = Dir::new(fd).map_err(io)?;
        let mut names: Vec<OsString> = Vec::new();
        for entry in dir.by_ref() {
            let name = OsStr::from_bytes(entry.map_err(io)?.file_name().to_bytes()).to_owned();
            if name != "." && name != ".." {
                names.push(name);
            }
        }
        names.sort();
        Ok((dir, names))
    }
}

/// `name` in the directory `at` (which is `rel`), or `None` when it vanished meanwhile.
fn entry(at: BorrowedFd<'_>, rel: &RelPath, name: &OsStr) -> Option<Entry> {
    let stat = rustix::fs::statat(at, name, AtFlags::SYMLINK_NOFOLLOW).ok()?;
    let meta = Metadata::of(&stat);
    Some(Entry {
        path: rel.child(name),
        kind: meta.kind,
        len: meta.len,
    })
}
