//! reef's side of a warm sandbox: the helper is started once per session (and per workspace
//! and read-only folders), and its PID 1 forks every command (see `linux::zygote`). Commands
//! start as spares, forked ahead of need: reef asks for one with a socket of its own, learns
//! its pid from the kernel-attached credentials of its first message, and moves it into a
//! cgroup of its own. A command then takes a spare, sends it the request with its standard
//! streams, and reads how it ended; while it runs, the next spare is made. A sandbox that is
//! gone before a command started is replaced and the command tried once more; one that dies
//! while a command runs fails that command, which is never run twice.

use crate::capture::{Streams, collect};
use crate::error::SandboxError;
use crate::group::GroupGuard;
use crate::linux::cgroup::{Leaf, SessionCgroup};
use crate::linux::spec::{CONTROL_FD, HelperSpec, POLICY_ENV, WarmCommand};
use crate::linux::{ENDED, PLACE, PLACED, READY, SERVING, SPARE, give_fd, new_session};
use crate::policy::HelperCommand;
use crate::request::{ExecOutput, ExecRequest};
use crate::runner::Sandbox;
use nix::sys::socket::{
    AddressFamily, ControlMessage, ControlMessageOwned, MsgFlags, SockFlag, SockType,
    UnixCredentials, recv, recvmsg, sendmsg, setsockopt, socketpair, sockopt,
};
use std::io::IoSlice;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncReadExt, Interest};
use tokio::net::UnixStream;
use tokio::net::unix::pipe;
use tokio::process::{Child, Command};

/// How long a warm sandbox may take to be built before the run fails as timed out (the
/// request's own timeout when shorter).
const BUILD_TIMEOUT: Duration = Duration::from_secs(30);

/// Spares kept ready at most (more are made only while commands run at once).
const SPARES: usize = 2;

/// A running warm sandbox: its helper, the control socket its PID 1 reads, and its spares.
#[derive(Debug)]
pub(crate) struct Warm {
    /// What it was built for (the confinement, without a start directory).
    spec: HelperSpec,
    control: AsyncFd<OwnedFd>,
    helper: Mutex<Child>,
    spares: Mutex<Vec<Spare>>,
}

/// How long a spare may take to say it is ready.
const SPARE_TIMEOUT: Duration = Duration::from_secs(10);

/// A forked process waiting for its request, already in its own cgroup. Dropping it kills
/// what is in that cgroup (the spare, or what its command left) and keeps the cgroup for a
/// later command.
#[derive(Debug)]
struct Spare {
    socket: UnixStream,
    /// As reef sees it; also its process group.
    pid: u32,
    leaf: Option<Leaf>,
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

/// Why a command could not run in a warm sandbox.
enum Launch {
    /// The sandbox was gone before the command could start: a fresh one may run it.
    Gone(String),
    /// The command started (or could not be placed safely): not to be retried.
    Failed(SandboxError),
}

impl Warm {
    /// Starts the helper for `spec` and waits until its PID 1 serves. A sandbox that could not
    /// be built is reported as the one-shot path reports it: exit code 125 and the helper's
    /// explanation on stderr.
    async fn start(
        helper: &HelperCommand,
        spec: &HelperSpec,
        timeout: Duration,
    ) -> Result<Result<Warm, ExecOutput>, SandboxError> {
        let spawn_error = |source: std::io::Error| SandboxError::Spawn {
            program: helper.program.display().to_string(),
            source,
        };
        let (ours, theirs) = socketpair(
            AddressFamily::Unix,
            SockType::SeqPacket,
            None,
            SockFlag::SOCK_CLOEXEC,
        )
        .map_err(|e| spawn_error(e.into()))?;
        nonblocking(&ours).map_err(spawn_error)?;
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
    fn alive(&self) -> bool {
        let mut helper = self.helper.lock().unwrap_or_else(PoisonError::into_inner);
        matches!(helper.try_wait(), Ok(None))
    }

    /// Asks PID 1 for a spare on `socket` (the other end is reef's); it forks one at once.
    fn ask_spare(&self, socket: &OwnedFd) -> Result<(), String> {
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

    /// A new spare, in its own cgroup when the session has cgroups.
    async fn make_spare(&self, sandbox: &Sandbox) -> Result<Spare, Launch> {
        let io = |e: std::io::Error| Launch::Gone(format!("prepare a process: {e}"));
        let (ours, theirs) = socketpair(
            AddressFamily::Unix,
            SockType::Stream,
            None,
            SockFlag::SOCK_CLOEXEC,
        )
        .map_err(|e| io(e.into()))?;
        nonblocking(&ours).map_err(io)?;
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
    async fn take_spare(&self, sandbox: &Sandbox) -> Result<Spare, Launch> {
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
    async fn replenish(&self, sandbox: &Sandbox) {
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

impl Sandbox {
    /// Runs `req` in the session's warm sandbox, starting one if there is none for its
    /// workspace and read-only folders (or the last one died).
    pub(crate) async fn run_warm(&self, req: ExecRequest) -> Result<ExecOutput, SandboxError> {
        let start = Instant::now();
        let helper = self.policy().helper.clone().ok_or(SandboxError::NoHelper)?;
        let mut spec = self.helper_spec(&req)?;
        spec.cwd = PathBuf::new();
        spec.warm = true;
        let command = WarmCommand {
            program: req.program.clone(),
            args: req.args.clone(),
            env: self
                .command_env(&req)
                .into_iter()
                .map(|(name, value)| {
                    let mut entry = name.as_bytes().to_vec();
                    entry.push(b'=');
                    entry.extend_from_slice(value.as_bytes());
                    entry
                })
                .collect(),
            cwd: req.cwd.clone(),
        };
        let mut retried = false;
        loop {
            let warm = match self.warm_for(&helper, &spec, req.timeout).await? {
                Ok(warm) => warm,
                Err(not_built) => return Ok(not_built),
            };
            match self.run_in(&warm, &req, &command, start).await {
                Ok(output) => return Ok(output),
                Err(Launch::Failed(error)) => {
                    // A sandbox that failed around a command is not trusted with another.
                    if matches!(error, SandboxError::Io { .. } | SandboxError::Warm(_)) {
                        self.forget(&warm).await;
                    }
                    return Err(error);
                }
                Err(Launch::Gone(why)) if !retried => {
                    tracing::warn!(%why, "the warm sandbox is gone; starting another");
                    self.forget(&warm).await;
                    retried = true;
                }
                Err(Launch::Gone(why)) => return Err(SandboxError::Warm(why)),
            }
        }
    }

    /// The pid of the session's warm sandbox's helper, while one runs: for diagnostics (the
    /// helper, its PID 1 and every command of the session end with it).
    pub async fn warm_pid(&self) -> Option<u32> {
        let slot = self.warm.lock().await;
        let warm = slot.as_ref().filter(|w| w.alive())?;
        let helper = warm.helper.lock().unwrap_or_else(PoisonError::into_inner);
        helper.id()
    }

    /// The warm sandbox for `spec`: the session's, or a new one replacing it. Commands still
    /// running in a replaced one keep it alive until they end.
    async fn warm_for(
        &self,
        helper: &HelperCommand,
        spec: &HelperSpec,
        timeout: Duration,
    ) -> Result<Result<Arc<Warm>, ExecOutput>, SandboxError> {
        let mut slot = self.warm.lock().await;
        if let Some(warm) = slot.as_ref()
            && warm.spec == *spec
            && warm.alive()
        {
            return Ok(Ok(Arc::clone(warm)));
        }
        // The commands' cgroups exist before the first command needs one.
        let _ = self.cgroup();
        self.count_spawn();
        match Warm::start(helper, spec, timeout.min(BUILD_TIMEOUT)).await? {
            Ok(warm) => {
                let warm = Arc::new(warm);
                *slot = Some(Arc::clone(&warm));
                Ok(Ok(warm))
            }
            Err(not_built) => Ok(Err(not_built)),
        }
    }

    /// Drops `warm` from the session (when it is still the session's).
    async fn forget(&self, warm: &Arc<Warm>) {
        let mut slot = self.warm.lock().await;
        if slot.as_ref().is_some_and(|w| Arc::ptr_eq(w, warm)) {
            *slot = None;
        }
    }

    /// Runs one command in `warm`.
    async fn run_in(
        &self,
        warm: &Warm,
        req: &ExecRequest,
        command: &WarmCommand,
        start: Instant,
    ) -> Result<ExecOutput, Launch> {
        let failed = |e: std::io::Error| {
            Launch::Failed(SandboxError::Io {
                program: req.program.clone(),
                source: e,
            })
        };
        let body = serde_json::to_vec(command)
            .map_err(|e| Launch::Failed(SandboxError::Unsupported(e.to_string())))?;
        let len = u32::try_from(body.len())
            .ok()
            .filter(|len| *len <= crate::linux::MAX_REQUEST)
            .ok_or_else(|| {
                Launch::Failed(SandboxError::Unsupported(format!(
                    "the command and its environment take {} bytes, more than a warm sandbox \
                     accepts ({} bytes)",
                    body.len(),
                    crate::linux::MAX_REQUEST
                )))
            })?;
        let pipe = || nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC);
        let (out_r, out_w) = pipe().map_err(|e| failed(e.into()))?;
        let (err_r, err_w) = pipe().map_err(|e| failed(e.into()))?;
        let (in_r, in_w) = match req.stdin {
            Some(_) => {
                let (r, w) = pipe().map_err(|e| failed(e.into()))?;
                (r, Some(w))
            }
            None => (
                OwnedFd::from(std::fs::File::open("/dev/null").map_err(failed)?),
                None,
            ),
        };
        let mut spare = warm.take_spare(self).await?;
        // From here the process group is killed whatever happens.
        let guard = GroupGuard::new(Some(spare.pid));
        let mut frame = len.to_le_bytes().to_vec();
        frame.extend_from_slice(&body);
        if let Err(e) = send_request(&spare.socket, &frame, [&in_r, &out_w, &err_w]).await {
            return Err(Launch::Gone(format!("send the command: {e}")));
        }
        drop((in_r, out_w, err_w));
        self.count_spawn();

        let streams = Streams {
            stdout: Some(pipe::Receiver::from_owned_fd(out_r).map_err(failed)?),
            stderr: Some(pipe::Receiver::from_owned_fd(err_r).map_err(failed)?),
            stdin: in_w
                .map(pipe::Sender::from_owned_fd)
                .transpose()
                .map_err(failed)?,
        };
        let running = collect(self.policy(), req, streams, guard, ended(&mut spare.socket));
        let (ended, ()) = tokio::join!(running, warm.replenish(self));
        // What the command left in its cgroup is killed, and the cgroup kept.
        drop(spare);
        Ok(ended.map_err(Launch::Failed)?.output(start))
    }
}

/// Writes the framed request to a spare, its standard streams attached to the first bytes.
async fn send_request(
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

/// Makes reef's end of a socket non-blocking (the other end, in the sandbox, blocks).
fn nonblocking(fd: &OwnedFd) -> std::io::Result<()> {
    use nix::fcntl::{FcntlArg, OFlag, fcntl};
    let flags = OFlag::from_bits_truncate(fcntl(fd, FcntlArg::F_GETFL)?);
    fcntl(fd, FcntlArg::F_SETFL(flags | OFlag::O_NONBLOCK))?;
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
async fn ended(socket: &mut UnixStream) -> std::io::Result<ExitStatus> {
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
