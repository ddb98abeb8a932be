//! A warm sandbox's helper: started with the control socket its PID 1 reads, waited for
//! until PID 1 serves, asked for spares, and logged.

use super::spares::Spare;
use crate::error::SandboxError;
use crate::linux::spec::{CONTROL_FD, HelperSpec, POLICY_ENV};
use crate::linux::{SERVING, SPARE, give_fd, new_session};
use crate::policy::HelperCommand;
use crate::request::ExecOutput;
use nix::sys::socket::{
    AddressFamily, ControlMessage, MsgFlags, SockFlag, SockType, recv, sendmsg, socketpair,
};
use std::io::IoSlice;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::process::Stdio;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncReadExt, Interest};
use tokio::process::{Child, Command};

/// A running warm sandbox: its helper, the control socket its PID 1 reads, and its spares.
#[derive(Debug)]
pub(crate) struct Warm {
    /// What it was built for (the confinement, without a start directory).
    pub(super) spec: HelperSpec,
    pub(super) control: AsyncFd<OwnedFd>,
    pub(super) helper: Mutex<Child>,
    pub(super) spares: Mutex<Vec<Spare>>,
}

impl Warm {
    /// Starts the helper for `spec` and waits until its PID 1 serves. A sandbox that could not
    /// be built is reported as the one-shot path reports it: exit code 125 and the helper's
    /// explanation on stderr.
    pub(super) async fn start(
        helper: &HelperCommand,
        spec: &HelperSpec,
        timeout: Duration,
    ) -> Result<Result<Warm, ExecOutput>, SandboxError> {
        let spawn_error = |source: std::io::Error| SandboxError::Spawn {
            program: helper.program.display().to_string(),
            source,
        };
        let (ours, theirs) = socket_pair(SockType::SeqPacket).map_err(spawn_error)?;
        let json = serde_json::to_string(spec)
            .map_err(|e| SandboxError::Unsupported(format!("cannot encode the policy: {e}")))?;
        let mut cmd = Command::new(&helper.program);
        cmd.args(&helper.args)
            .args(["--policy-env", "--"])
            .env_clear()
            .env(POLICY_ENV, json)
            .current_dir(&spec.workspace)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        new_session(&mut cmd);
        give_fd(&mut cmd, theirs.as_raw_fd(), CONTROL_FD);
        let mut child = cmd.spawn().map_err(spawn_error)?;
        drop(theirs);
        let control = crate::linux::async_fd(ours).map_err(spawn_error)?;
        let served = tokio::time::timeout(timeout, async {
            let mut byte = [0u8; 1];
            let got = control
                .async_io(Interest::READABLE, |fd| {
                    recv(fd.as_raw_fd(), &mut byte, MsgFlags::empty()).map_err(Into::into)
                })
                .await;
            matches!(got, Ok(1)) && byte[0] == SERVING
        })
        .await;
        let mut stderr = child.stderr.take();
        if served == Ok(true) {
            if let Some(stderr) = stderr {
                tokio::spawn(log_helper(stderr));
            }
            return Ok(Ok(Warm {
                spec: spec.clone(),
                control,
                helper: Mutex::new(child),
                spares: Mutex::new(Vec::new()),
            }));
        }
        // Not built: the helper says why on stderr and exits (or is stopped at the timeout).
        let start = Instant::now();
        if served.is_err() {
            let _ = child.start_kill();
        }
        let mut said = Vec::new();
        if let Some(stderr) = stderr.as_mut() {
            let _ = tokio::time::timeout(timeout, stderr.read_to_end(&mut said)).await;
        }
        let status = child.wait().await.map_err(spawn_error)?;
        Ok(Err(ExecOutput {
            stderr: String::from_utf8_lossy(&said).into_owned(),
            exit_code: status.code(),
            signal: status.signal(),
            timed_out: served.is_err(),
            duration: start.elapsed(),
            ..ExecOutput::default()
        }))
    }

    /// Whether the helper still runs.
    pub(super) fn alive(&self) -> bool {
        let mut helper = self.helper.lock().unwrap_or_else(PoisonError::into_inner);
        matches!(helper.try_wait(), Ok(None))
    }

    /// Asks PID 1 for a spare on `socket` (the other end is reef's); it forks one at once.
    pub(super) fn ask_spare(&self, socket: &OwnedFd) -> Result<(), String> {
        let raw = [socket.as_raw_fd()];
        let rights = [ControlMessage::ScmRights(&raw)];
        sendmsg::<()>(
            self.control.get_ref().as_raw_fd(),
            &[IoSlice::new(&[SPARE])],
            &rights,
            MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_NOSIGNAL,
            None,
        )
        .map(drop)
        .map_err(|e| format!("ask the warm sandbox for a process: {e}"))
    }
}

/// Passes what a warm sandbox's helper writes on stderr (after it serves) to the log.
async fn log_helper(mut stderr: tokio::process::ChildStderr) {
    let mut buf = vec![0u8; 4096];
    while let Ok(n) = stderr.read(&mut buf).await {
        if n == 0 {
            return;
        }
        let text = String::from_utf8_lossy(&buf[..n]);
        tracing::warn!(helper = %text.trim_end(), "warm sandbox");
    }
}

/// A unix socket pair of `kind`, both ends close-on-exec: reef's end (the first)
/// non-blocking, the other, for the sandbox, blocking.
pub(super) fn socket_pair(kind: SockType) -> std::io::Result<(OwnedFd, OwnedFd)> {
    let (ours, theirs) = socketpair(AddressFamily::Unix, kind, None, SockFlag::SOCK_CLOEXEC)?;
    nonblocking(&ours)?;
    Ok((ours, theirs))
}

/// Makes reef's end of a socket non-blocking (the other end, in the sandbox, blocks).
fn nonblocking(fd: &OwnedFd) -> std::io::Result<()> {
    use nix::fcntl::{FcntlArg, OFlag, fcntl};
    let flags = OFlag::from_bits_truncate(fcntl(fd, FcntlArg::F_GETFL)?);
    fcntl(fd, FcntlArg::F_SETFL(flags | OFlag::O_NONBLOCK))?;
    Ok(())
}
