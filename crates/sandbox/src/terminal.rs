//! Interactive programs on a pseudo-terminal (an operator's shell in an agent's sandbox):
//! started under the same policy as [`Sandbox::run`], with the terminal's other side held by
//! the caller, resizable, and killed with everything they started when dropped.

use crate::error::SandboxError;
use crate::group::GroupGuard;
use crate::policy::SandboxBackend;
use crate::request::ExecRequest;
use crate::runner::{Sandbox, check_start_dir};
use rustix::fs::{Mode, OFlags};
use rustix::pty::{OpenptFlags, grantpt, openpt, ptsname, unlockpt};
use std::io;
use std::os::fd::OwnedFd;
use std::process::{ExitStatus, Stdio};
use tokio::io::unix::AsyncFd;
use tokio::process::Child;

/// A terminal's size in character cells.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TermSize {
    pub cols: u16,
    pub rows: u16,
}

impl TermSize {
    /// At least one cell each way (a zero size would confuse full-screen programs).
    pub fn new(cols: u16, rows: u16) -> TermSize {
        TermSize {
            cols: cols.max(1),
            rows: rows.max(1),
        }
    }
}

/// A process started by [`Sandbox::terminal`]: what it writes is read from, and what it
/// reads is written to, the terminal's controlling side. Dropping it kills its whole
/// process group (and with it the sandbox's PID namespace).
#[derive(Debug)]
pub struct Terminal {
    /// Keeps the session's cgroups (and proxy) for as long as the process runs: the helper
    /// joins them after it starts.
    _sandbox: Sandbox,
    child: Child,
    guard: GroupGuard,
    master: AsyncFd<OwnedFd>,
}

impl Sandbox {
    /// Starts `req` on a new pseudo-terminal of `size`, as the leader of its own session with
    /// that terminal as its controlling terminal (so a shell has job control and programs see
    /// a tty). `req.timeout` and `req.stdin` do not apply; set `TERM` in `req.env`. Refused
    /// on the `none` backend ([`SandboxError::Unsupported`]).
    pub async fn terminal(
        &self,
        req: ExecRequest,
        size: TermSize,
    ) -> Result<Terminal, SandboxError> {
        check_start_dir(&req).await?;
        // Unconfined, a terminal would be a shell on the host as reef's user.
        if self.policy().backend == SandboxBackend::Plain {
            return Err(SandboxError::Unsupported(
                "a terminal is offered only inside the kernel sandbox (the landlock backend); \
                 with `none` it would be a shell on the host"
                    .into(),
            ));
        }
        let io_error = |source: io::Error| SandboxError::Io {
            program: req.program.clone(),
            source,
        };
        let (master, slave) = open_pair(size).map_err(io_error)?;
        let mut cmd = self.command_for(&req, true)?;
        cmd.stdin(Stdio::from(slave.try_clone().map_err(io_error)?))
            .stdout(Stdio::from(slave.try_clone().map_err(io_error)?))
            .stderr(Stdio::from(slave));
        let child = cmd.spawn().map_err(|source| SandboxError::Spawn {
            program: req.program.clone(),
            source,
        })?;
        // `cmd` holds the last copies of the terminal's other side: once it is gone, the
        // process's exit shows as the end of its output.
        drop(cmd);
        self.count_spawn();
        let guard = GroupGuard::new(child.id());
        Ok(Terminal {
            _sandbox: self.clone(),
            child,
            guard,
            master: crate::linux::async_fd(master).map_err(io_error)?,
        })
    }
}

/// A new pseudo-terminal: its controlling side (non-blocking) and the process's side.
fn open_pair(size: TermSize) -> io::Result<(OwnedFd, OwnedFd)> {
    let master = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC)?;
    grantpt(&master)?;
    unlockpt(&master)?;
    let name = ptsname(&master, Vec::new())?;
    let slave = rustix::fs::open(
        name.as_c_str(),
        OFlags::RDWR | OFlags::NOCTTY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    set_size(&master, size)?;
    let flags = rustix::fs::fcntl_getfl(&master)?;
    rustix::fs::fcntl_setfl(&master, flags | OFlags::NONBLOCK)?;
    Ok((master, slave))
}

fn set_size(master: &OwnedFd, size: TermSize) -> io::Result<()> {
    rustix::termios::tcsetwinsize(
        master,
        rustix::termios::Winsize {
            ws_col: size.cols,
            ws_row: size.rows,
            ws_xpixel: 0,
            ws_ypixel: 0,
        },
    )?;
    Ok(())
}

impl Terminal {
    /// Reads what the process wrote; `Ok(0)` once every process holding the terminal has
    /// exited.
    pub async fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            let mut ready = self.master.readable().await?;
            match ready
                .try_io(|fd| rustix::io::read(fd.get_ref(), &mut *buf).map_err(io::Error::from))
            {
                // Linux answers EIO once the other side is closed for good.
                Ok(Err(err)) if err.raw_os_error() == Some(libc::EIO) => return Ok(0),
                Ok(result) => return result,
                Err(_would_block) => {}
            }
        }
    }

    /// Writes some of `data` as typed input, waiting until the terminal takes any; returns how
    /// much it took.
    pub async fn write(&self, data: &[u8]) -> io::Result<usize> {
        loop {
            let mut ready = self.master.writable().await?;
            match ready.try_io(|fd| rustix::io::write(fd.get_ref(), data).map_err(io::Error::from))
            {
                Ok(result) => return result,
                Err(_would_block) => {}
            }
        }
    }

    /// Writes all of `data` as typed input.
    pub async fn write_all(&self, mut data: &[u8]) -> io::Result<()> {
        while !data.is_empty() {
            match self.write(data).await? {
                0 => return Err(io::ErrorKind::WriteZero.into()),
                n => data = &data[n..],
            }
        }
        Ok(())
    }

    /// Changes the terminal's size (the process gets SIGWINCH).
    pub fn resize(&self, size: TermSize) -> io::Result<()> {
        set_size(self.master.get_ref(), size)
    }

    /// The host PID of the started process (the sandbox helper, for the landlock backend).
    pub fn id(&self) -> Option<u32> {
        self.child.id()
    }

    /// Waits for it to exit, then kills what is left of its group at once (rather than when
    /// dropped, by which time the group's id could have been reused).
    pub async fn wait(&mut self) -> io::Result<ExitStatus> {
        let status = self.child.wait().await?;
        self.guard.kill_now();
        Ok(status)
    }

    /// Its exit status, if it has exited.
    pub fn try_status(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Kills its process group now (SIGKILL); [`Terminal::wait`] then returns promptly.
    pub fn kill(&mut self) {
        self.guard.kill_now();
    }
}
