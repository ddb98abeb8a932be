//! Regular files of the workspace: capped reads, in-place edits on one descriptor, writes that
//! never truncate before checking what they opened, exclusive creation, and directory creation
//! one component at a time.

use crate::open::DIR_HANDLE;
use crate::{RelPath, Workspace, WorkspaceError};
use rustix::fd::{AsFd, OwnedFd};
use rustix::fs::{FileType, Mode, OFlags};
use rustix::io::Errno;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};

/// Mode of created files and directories, before the umask.
const FILE_MODE: Mode = Mode::from_raw_mode(0o666);
const DIR_MODE: Mode = Mode::from_raw_mode(0o777);

/// A regular file opened read-write with its contents read, for an edit that writes back
/// through the same descriptor (no second lookup by path).
#[derive(Debug)]
pub struct EditableFile {
    file: File,
    path: RelPath,
    contents: Vec<u8>,
}

impl EditableFile {
    pub fn contents(&self) -> &[u8] {
        &self.contents
    }

    pub fn path(&self) -> &RelPath {
        &self.path
    }

    /// Replaces the whole file with `bytes`.
    pub fn replace(mut self, bytes: &[u8]) -> Result<(), WorkspaceError> {
        let io = |source| WorkspaceError::Io {
            path: self.path.display(),
            source,
        };
        self.file.set_len(0).map_err(io)?;
        self.file.seek(SeekFrom::Start(0)).map_err(io)?;
        self.file.write_all(bytes).map_err(io)
    }
}

impl Workspace {
    /// The bytes of the regular file `rel`, refused when over `cap` bytes. Opening never
    /// blocks (a FIFO is refused, not waited on) and at most `cap + 1` bytes are read, so a
    /// file growing meanwhile cannot exhaust memory.
    pub fn read(&self, rel: &RelPath, cap: u64) -> Result<Vec<u8>, WorkspaceError> {
        let mut file = self.open_regular(rel, OFlags::RDONLY)?;
        self.read_capped(rel, &mut file, cap)
    }

    /// Opens the regular file `rel` read-write and reads it (at most `cap` bytes), for
    /// [`EditableFile::replace`].
    pub fn open_for_edit(&self, rel: &RelPath, cap: u64) -> Result<EditableFile, WorkspaceError> {
        self.check_writable(rel)?;
        let mut file = self.open_regular(rel, OFlags::RDWR)?;
        let contents = self.read_capped(rel, &mut file, cap)?;
        Ok(EditableFile {
            file,
            path: rel.clone(),
            contents,
        })
    }

    /// Creates or replaces the regular file `rel` with `bytes`. Its directory must exist
    /// ([`Workspace::create_dir_all`]). The file is truncated only once it is known to be a
    /// regular file reached without a link.
    pub fn write(&self, rel: &RelPath, bytes: &[u8]) -> Result<(), WorkspaceError> {
        self.check_writable(rel)?;
        let mut file = self.open_regular(rel, OFlags::WRONLY | OFlags::CREATE)?;
        let io = |source| self.io(rel, source);
        file.set_len(0).map_err(io)?;
        file.write_all(bytes).map_err(io)
    }

    /// Appends `bytes` to the regular file `rel`, creating it when absent. Its directory must
    /// exist. Like [`Workspace::write`], a link or a special file is refused.
    pub fn append(&self, rel: &RelPath, bytes: &[u8]) -> Result<(), WorkspaceError> {
        self.check_writable(rel)?;
        let mut file = self.open_regular(rel, OFlags::WRONLY | OFlags::CREATE | OFlags::APPEND)?;
        file.write_all(bytes).map_err(|source| self.io(rel, source))
    }

    /// Creates `rel` with `bytes`, refusing anything already there, a link included
    /// (`O_EXCL`). Its directory must exist.
    pub fn create_new(&self, rel: &RelPath, bytes: &[u8]) -> Result<(), WorkspaceError> {
        self.check_writable(rel)?;
        let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NONBLOCK;
        let fd = self.open_at(rel, flags, FILE_MODE)?;
        File::from(fd)
            .write_all(bytes)
            .map_err(|source| self.io(rel, source))
    }

    /// Creates the directory `rel` and its missing parents, one name at a time beneath the
    /// root: each is made with `mkdirat` and entered with `O_NOFOLLOW | O_DIRECTORY`, so a
    /// link (or a file) on the way stops it and nothing is created outside.
    pub fn create_dir_all(&self, rel: &RelPath) -> Result<(), WorkspaceError> {
        self.check_hidden(rel)?;
        self.check_writable(rel)?;
        let names = crate::open::plain_names(rel.as_path()).map_err(|e| self.classify(rel, e))?;
        let mut current: Option<OwnedFd> = None;
        for name in names {
            let at = current.as_ref().map_or(self.fd.as_fd(), AsFd::as_fd);
            match rustix::fs::mkdirat(at, name, DIR_MODE) {
                Ok(()) | Err(Errno::EXIST) => {}
                Err(errno) => return Err(self.classify(rel, errno)),
            }
            let next = rustix::fs::openat(at, name, DIR_HANDLE, Mode::empty())
                .map_err(|errno| self.classify(rel, errno))?;
            current = Some(next);
        }
        Ok(())
    }

    /// Opens `rel` with `flags` without blocking or following a link, and checks with
    /// `fstat` that it is a regular file before anyone reads or writes it.
    fn open_regular(&self, rel: &RelPath, flags: OFlags) -> Result<File, WorkspaceError> {
        let fd = self.open_at(rel, flags | OFlags::NONBLOCK, FILE_MODE)?;
        let stat = rustix::fs::fstat(&fd).map_err(|e| self.io(rel, e.into()))?;
        match FileType::from_raw_mode(stat.st_mode) {
            FileType::RegularFile => Ok(File::from(fd)),
            FileType::Directory => Err(WorkspaceError::IsDirectory {
                path: rel.display(),
            }),
            _ => Err(WorkspaceError::NotRegular {
                path: rel.display(),
            }),
        }
    }

    fn read_capped(
        &self,
        rel: &RelPath,
        file: &mut File,
        cap: u64,
    ) -> Result<Vec<u8>, WorkspaceError> {
        let too_large = |size: u64| WorkspaceError::TooLarge {
            path: rel.display(),
            size,
            cap,
        };
        let io = |source| self.io(rel, source);
        let size = file.metadata().map_err(io)?.len();
        if size > cap {
            return Err(too_large(size));
        }
        let mut bytes = Vec::new();
        Read::take(&mut *file, cap.saturating_add(1))
            .read_to_end(&mut bytes)
            .map_err(io)?;
        let read = bytes.len() as u64;
        if read > cap {
            let now = file.metadata().map(|m| m.len()).unwrap_or(read);
            return Err(too_large(now.max(read)));
        }
        Ok(bytes)
    }
}
