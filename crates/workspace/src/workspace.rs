//! The workspace handle: the trusted root (resolved once, held open), the paths hidden in it,
//! path resolution, and the one place where a path beneath the root is opened and where
//! failures become [`WorkspaceError`]s.

use crate::WorkspaceError;
use crate::open::{Culprit, Resolver, diagnose, open_beneath};
use crate::path::{self, RelPath};
use rustix::fd::{AsFd, OwnedFd};
use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;
use std::path::{Component, Path, PathBuf};

/// An agent's workspace, opened once. Every file operation goes through it and opens paths
/// beneath its root without following a single symbolic link.
#[derive(Debug)]
pub struct Workspace {
    /// The canonical root.
    pub(crate) root: PathBuf,
    /// The root as it was given (made absolute), so absolute paths spelled that way resolve.
    spelled: PathBuf,
    /// An `O_PATH` descriptor of the root: every open starts here.
    pub(crate) fd: OwnedFd,
    /// Hidden paths strictly inside the root, relative to it.
    hidden: Vec<PathBuf>,
    /// Paths (relative to the root) that may be read but not written, created or edited.
    read_only: Vec<PathBuf>,
    pub(crate) resolver: Resolver,
}

impl Workspace {
    /// Opens the workspace at `root`. The root itself is trusted: it is canonicalised once
    /// (links in it resolved) and held open; nothing beneath it is ever resolved again.
    pub fn open(root: &Path) -> Result<Self, WorkspaceError> {
        let unavailable = |source: std::io::Error| WorkspaceError::Unavailable {
            root: root.to_path_buf(),
            source,
        };
        let canonical = std::fs::canonicalize(root).map_err(unavailable)?;
        let fd = rustix::fs::open(
            &canonical,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|errno| unavailable(errno.into()))?;
        let spelled = std::path::absolute(root).unwrap_or_else(|_| root.to_path_buf());
        let resolver = Resolver::probe(fd.as_fd());
        Ok(Self {
            root: canonical,
            spelled,
            fd,
            hidden: Vec::new(),
            read_only: Vec::new(),
            resolver,
        })
    }

    /// Refuses `hidden` (absolute host paths, e.g. the sandbox policy's hidden list) from now
    /// on. Those inside the root count, the root itself included (then nothing is opened); a
    /// hidden directory that contains the whole workspace does not hide it, as in the sandbox.
    pub fn with_hidden(mut self, hidden: &[PathBuf]) -> Self {
        for path in hidden {
            for root in [&self.root, &self.spelled] {
                let Ok(rel) = path.strip_prefix(root) else {
                    continue;
                };
                let plain: PathBuf = rel
                    .components()
                    .filter(|c| matches!(c, Component::Normal(_)))
                    .collect();
                if !self.hidden.contains(&plain) {
                    self.hidden.push(plain);
                }
            }
        }
        self
    }

    /// Refuses to write, create or edit `paths` (relative to the root) or anything beneath
    /// them from now on; they can still be read.
    pub fn with_read_only(mut self, paths: &[&str]) -> Self {
        self.read_only.extend(paths.iter().map(PathBuf::from));
        self
    }

    /// Refuses `rel` when it is, or lies beneath, a read-only path.
    pub(crate) fn check_writable(&self, rel: &RelPath) -> Result<(), WorkspaceError> {
        if self.read_only.iter().any(|r| rel.as_path().starts_with(r)) {
            return Err(WorkspaceError::ReadOnly {
                path: rel.display(),
            });
        }
        Ok(())
    }

    /// The canonical root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Resolves a path the agent gave: relative to the root, or absolute under it. `.` and
    /// `..` are applied to the text (nothing is followed, so this is exact); climbing out,
    /// an absolute path elsewhere or a hidden path is refused.
    pub fn resolve(&self, given: &str) -> Result<RelPath, WorkspaceError> {
        let rel = path::resolve(given, &[&self.root, &self.spelled])?;
        self.check_hidden(&rel)?;
        Ok(rel)
    }

    /// Whether `rel` is, or lies beneath, a hidden path.
    pub fn is_hidden(&self, rel: &RelPath) -> bool {
        self.hidden.iter().any(|h| rel.as_path().starts_with(h))
    }

    pub(crate) fn check_hidden(&self, rel: &RelPath) -> Result<(), WorkspaceError> {
        if self.is_hidden(rel) {
            return Err(WorkspaceError::Hidden {
                path: rel.display(),
            });
        }
        Ok(())
    }

    /// Opens `rel` beneath the root with `flags` (never following a link), turning a failure
    /// into the error that says what is wrong with the path.
    pub(crate) fn open_at(
        &self,
        rel: &RelPath,
        flags: OFlags,
        mode: Mode,
    ) -> Result<OwnedFd, WorkspaceError> {
        self.check_hidden(rel)?;
        open_beneath(self.fd.as_fd(), rel.as_path(), flags, mode, self.resolver)
            .map_err(|errno| self.classify(rel, errno))
    }

    /// The error for `errno` from opening `rel`.
    pub(crate) fn classify(&self, rel: &RelPath, errno: Errno) -> WorkspaceError {
        let path = rel.display();
        let shown = |p: PathBuf| RelPath::from_plain(p).display();
        match errno {
            Errno::LOOP | Errno::NOTDIR => match diagnose(self.fd.as_fd(), rel.as_path()) {
                Some(Culprit::Link(link)) => WorkspaceError::Symlink {
                    path,
                    link: shown(link),
                },
                Some(Culprit::NotDirectory(dir)) => {
                    WorkspaceError::NotDirectory { path: shown(dir) }
                }
                None if errno == Errno::LOOP => WorkspaceError::Symlink {
                    link: path.clone(),
                    path,
                },
                None => WorkspaceError::NotDirectory { path },
            },
            Errno::NOENT => WorkspaceError::NotFound { path },
            Errno::ISDIR => WorkspaceError::IsDirectory { path },
            // O_NONBLOCK opens of a FIFO without a reader, or of a socket, for writing.
            Errno::NXIO => WorkspaceError::NotRegular { path },
            Errno::EXIST => WorkspaceError::Exists { path },
            Errno::XDEV => WorkspaceError::Outside {
                path,
                root: self.root.clone(),
            },
            other => self.io(rel, other.into()),
        }
    }

    pub(crate) fn io(&self, rel: &RelPath, source: std::io::Error) -> WorkspaceError {
        WorkspaceError::Io {
            path: rel.display(),
            source,
        }
    }

    /// This workspace resolving paths with `resolver` (tests compare the two).
    #[cfg(test)]
    pub(crate) fn using(mut self, resolver: Resolver) -> Self {
        self.resolver = resolver;
        self
    }
}
