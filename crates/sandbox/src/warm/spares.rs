//! Spares: processes a warm sandbox's PID 1 forks ahead of need, placed in their cgroup
//! before a command takes one, and the conversation with one (its request, its end).

use super::{Launch, Warm};
use crate::error::SandboxError;
use crate::linux::cgroup::{Leaf, SessionCgroup};
use crate::linux::{ENDED, PLACE, PLACED, READY};
use crate::runner::Sandbox;
use nix::sys::socket::{
    ControlMessage, ControlMessageOwned, MsgFlags, SockType, UnixCredentials, recvmsg, sendmsg,
    setsockopt, sockopt,
};
use std::io::IoSlice;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::sync::{Arc, OnceLock, PoisonError};
use std::time::Duration;
use tokio::io::{AsyncReadExt, Interest};
use tokio::net::UnixStream;

/// Spares kept ready at most (more are made only while commands run at once).
const SPARES: usize = 2;

/// How long a spare may take to say it is ready.
const SPARE_TIMEOUT: Duration = Duration::from_secs(10);

/// A forked process waiting for its request, already in its own cgroup. Dropping it kills
/// what is in that cgroup (the spare, or what its command left) and keeps the cgroup for a
/// later command.
#[derive(Debug)]
pub(super) struct Spare {
    pub(super) socket: UnixStream,
    /// As reef sees it; also its process group.
    pub(super) pid: u32,
    pub(super) leaf: Option<Leaf>,
    cgroups: Arc<OnceLock<SessionCgroup>>,
}

impl Spare {
    /// Whether it still waits for its request (neither ended nor gone with its sandbox).
    fn waiting(&self) -> bool {
        let mut byte = [0u8; 1];
        matches!(self.socket.try_read(&mut byte), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
    }
}

impl Drop for Spare {
    fn drop(&mut self) {
        if let (Some(leaf), Some(cgroups)) = (self.leaf.take(), self.cgroups.get()) {
            cgroups.release(leaf);
        }
    }
}

impl Warm {
    /// A new spare, in its own cgroup when the session has cgroups.
    pub(super) async fn make_spare(&self, sandbox: &Sandbox) -> Result<Spare, Launch> {
        let io = |e: std::io::Error| Launch::Gone(format!("prepare a process: {e}"));
        let (ours, theirs) = super::helper::socket_pair(SockType::Stream).map_err(io)?;
        setsockopt(&ours, sockopt::PassCred, &true).map_err(|e| io(e.into()))?;
        self.ask_spare(&theirs).map_err(Launch::Gone)?;
        drop(theirs);
        let socket =
            UnixStream::from_std(std::os::unix::net::UnixStream::from(ours)).map_err(io)?;
        let pid = tokio::time::timeout(SPARE_TIMEOUT, ready(&socket))
            .await
            .map_err(|_| Launch::Gone("a new process did not start within 10 s".into()))?
            .map_err(Launch::Gone)?;
        let mut spare = Spare {
            socket,
            pid,
            leaf: sandbox
                .cgroup()
                .lease()
                .map_err(|e| Launch::Failed(SandboxError::Warm(e)))?,
            cgroups: sandbox.cgroups(),
        };
        // On cgroup v1 the spare moves itself (its one thread, through `tasks` files opened
        // here), which spares the kernel's system-wide migration lock; elsewhere reef moves it.
        let place = |e: String| Launch::Failed(SandboxError::Warm(e));
        let tasks = match &spare.leaf {
            Some(leaf) => match leaf.tasks_files().map_err(place)? {
                Some(files) => files,
                None => {
                    leaf.join(pid).map_err(place)?;
                    Vec::new()
                }
            },
            None => Vec::new(),
        };
        let raw: Vec<_> = tasks.iter().map(AsRawFd::as_raw_fd).collect();
        spare
            .socket
            .async_io(Interest::WRITABLE, || {
                let rights = [ControlMessage::ScmRights(&raw)];
                let rights: &[ControlMessage] = if raw.is_empty() { &[] } else { &rights };
                sendmsg::<()>(
                    spare.socket.as_raw_fd(),
                    &[IoSlice::new(&[PLACE])],
                    rights,
                    MsgFlags::MSG_NOSIGNAL,
                    None,
                )
                .map_err(Into::into)
            })
            .await
            .map_err(io)?;
        let mut answer = vec![0u8; 512];
        let n = tokio::time::timeout(SPARE_TIMEOUT, spare.socket.read(&mut answer))
            .await
            .map_err(|_| Launch::Gone("a new process did not answer within 10 s".into()))?
            .map_err(io)?;
        match answer[..n].split_first() {
            Some((&PLACED, [])) => Ok(spare),
            Some((b'E', why)) => Err(place(String::from_utf8_lossy(why).into_owned())),
            _ => Err(Launch::Gone(
                "a new process ended before it was placed in its cgroup".into(),
            )),
        }
    }

    /// A waiting spare, or a new one.
    pub(super) async fn take_spare(&self, sandbox: &Sandbox) -> Result<Spare, Launch> {
        loop {
            let ready = self
                .spares
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .pop();
            match ready {
                // One that ended (killed by a command of the session) is dropped.
                Some(spare) if spare.waiting() => return Ok(spare),
                Some(_) => {}
                None => return self.make_spare(sandbox).await,
            }
        }
    }

    /// Makes a spare for a later command unless enough wait already. A failure is left for
    /// that command to meet.
    pub(super) async fn replenish(&self, sandbox: &Sandbox) {
        let enough = || {
            self.spares
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .len()
                >= SPARES
        };
        if enough() {
            return;
        }
        match self.make_spare(sandbox).await {
            Ok(spare) if !enough() => self
                .spares
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(spare),
            Ok(spare) => drop(spare),
            Err(_) => {}
        }
    }
}

/// Writes the framed request to a spare, its standard streams attached to the first bytes.
pub(super) async fn send_request(
    socket: &UnixStream,
    frame: &[u8],
    fds: [&OwnedFd; 3],
) -> std::io::Result<()> {
    let raw = fds.map(AsRawFd::as_raw_fd);
    let sent = socket
        .async_io(Interest::WRITABLE, || {
            let rights = [ControlMessage::ScmRights(&raw)];
            sendmsg::<()>(
                socket.as_raw_fd(),
                &[IoSlice::new(frame)],
                &rights,
                MsgFlags::MSG_NOSIGNAL,
                None,
            )
            .map_err(Into::into)
        })
        .await?;
    let mut rest = &frame[sent..];
    while !rest.is_empty() {
        socket.writable().await?;
        match socket.try_write(rest) {
            Ok(n) => rest = &rest[n..],
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Reads a spare's "ready" and, from the credentials the kernel attaches to it, its pid
/// as reef sees it.
async fn ready(socket: &UnixStream) -> Result<u32, String> {
    let mut byte = [0u8; 1];
    let mut space = nix::cmsg_space!(UnixCredentials);
    let (bytes, pid) = socket
        .async_io(Interest::READABLE, || {
            let mut iov = [std::io::IoSliceMut::new(&mut byte)];
            let msg = recvmsg::<()>(
                socket.as_raw_fd(),
                &mut iov,
                Some(&mut space),
                MsgFlags::MSG_CMSG_CLOEXEC,
            )?;
            let pid = msg.cmsgs()?.find_map(|c| match c {
                ControlMessageOwned::ScmCredentials(creds) => Some(creds.pid()),
                _ => None,
            });
            Ok((msg.bytes, pid))
        })
        .await
        .map_err(|e| format!("wait for a process to start: {e}"))?;
    if bytes == 0 || byte[0] != READY {
        return Err("the warm sandbox closed the socket of a process before it started".into());
    }
    pid.and_then(|p| u32::try_from(p).ok())
        .filter(|p| *p > 0)
        .ok_or_else(|| "the start of a process carried no pid".to_owned())
}

/// Reads how the command ended, as PID 1 reports it.
pub(super) async fn ended(socket: &mut UnixStream) -> std::io::Result<ExitStatus> {
    let mut message = [0u8; 5];
    match socket.read_exact(&mut message).await {
        Ok(_) if message[0] == ENDED => {
            let mut status = [0u8; 4];
            status.copy_from_slice(&message[1..]);
            Ok(ExitStatus::from_raw(i32::from_le_bytes(status)))
        }
        Ok(_) => Err(std::io::Error::other(
            "the warm sandbox sent something else than the command's end",
        )),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Err(std::io::Error::other(
            "the warm sandbox ended while the command ran",
        )),
        Err(e) => Err(e),
    }
}
