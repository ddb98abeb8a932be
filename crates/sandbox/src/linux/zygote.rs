//! The warm sandbox's PID 1 (a zygote): built and confined once, it then forks every command
//! of the session from itself. Each command starts as a spare, forked ahead of need: a fresh
//! process in a session and process group of its own, which reef moves into a cgroup of its
//! own and which waits for its request (program, environment, standard streams), then takes
//! its resource limits and execs. When a command ends the zygote kills what it left in its
//! group, and once no command runs, every other process and everything written to the private
//! `/tmp`, before it reports the command's end. See `crate::warm` for reef's side.

use super::spec::{HelperSpec, WarmCommand};
use super::{confine, init, relay, sys};
use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::{SigSet, SigmaskHow, Signal, kill, sigprocmask};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg, send};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::{ForkResult, Pid, dup2_stderr, dup2_stdin, dup2_stdout};
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::CString;
use std::io::{IoSliceMut, Read, Write};
use std::net::TcpListener;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

/// The byte a request for a spare carries, with the spare's socket.
pub(crate) const SPARE: u8 = b'C';
/// The byte the zygote sends on the control socket once it is built and serves.
pub(crate) const SERVING: u8 = b'W';
/// The byte a spare sends once forked (reef reads its pid from it).
pub(crate) const READY: u8 = b'R';
/// The byte before a command's wait status (an `i32`, little-endian).
pub(crate) const ENDED: u8 = b'S';
/// The largest request a command reads (program, arguments and environment).
pub(crate) const MAX_REQUEST: u32 = 16 * 1024 * 1024;

/// Serves start requests on the control socket until reef closes it, then ends the sandbox.
/// `relay` is the proxy relay's listener in `allowlist` mode; it is served by a process of
/// its own so that this one stays single-threaded and may fork.
pub(crate) fn serve(spec: &HelperSpec, relay: Option<TcpListener>) -> Result<i32, String> {
    let control = sys::control_socket()?;
    let relay = match relay {
        Some(listener) => Some(start_relay(listener)?),
        None => None,
    };
    let mut chld = SigSet::empty();
    chld.add(Signal::SIGCHLD);
    sigprocmask(SigmaskHow::SIG_BLOCK, Some(&chld), None)
        .map_err(|e| format!("block SIGCHLD: {e}"))?;
    let signals = SignalFd::with_flags(&chld, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC)
        .map_err(|e| format!("signalfd: {e}"))?;
    let tmp = Tmp::record(Path::new("/tmp"));
    let lock = open_lock()?;
    send(control.as_raw_fd(), &[SERVING], MsgFlags::MSG_NOSIGNAL)
        .map_err(|e| format!("tell reef the sandbox is ready: {e}"))?;

    let mut zygote = Zygote {
        spec,
        running: BTreeMap::new(),
        relay,
        tmp,
        lock: Some(lock),
    };
    loop {
        let (control_ready, signalled) = {
            let mut fds = [
                PollFd::new(control.as_fd(), PollFlags::POLLIN),
                PollFd::new(signals.as_fd(), PollFlags::POLLIN),
            ];
            match poll(&mut fds, PollTimeout::NONE) {
                Ok(_) | Err(Errno::EINTR) => {}
                Err(e) => return Err(format!("poll: {e}")),
            }
            let ready = |fd: &PollFd| fd.revents().is_some_and(|r| !r.is_empty());
            (ready(&fds[0]), ready(&fds[1]))
        };
        if signalled {
            while let Ok(Some(_)) = signals.read_signal() {}
            zygote.reap();
        }
        if control_ready && !zygote.accept(&control)? {
            break;
        }
    }
    // reef closed the session: nothing of it may keep running.
    zygote.kill_leftovers();
    Ok(0)
}

/// Forks the process that serves the proxy relay (with threads of its own).
fn start_relay(listener: TcpListener) -> Result<Pid, String> {
    match sys::fork_process().map_err(|e| format!("fork the proxy relay: {e}"))? {
        ForkResult::Child => {
            relay::serve_here(listener);
            std::process::exit(0);
        }
        ForkResult::Parent { child } => Ok(child),
    }
}

struct Zygote<'a> {
    spec: &'a HelperSpec,
    /// Spares and commands, by pid.
    running: BTreeMap<Pid, Forked>,
    relay: Option<Pid>,
    tmp: Tmp,
    /// Taken exclusively while the zygote decides whether no command runs and cleans up, and
    /// shared by a spare from its request to its exec: no command starts during a clean-up.
    /// (`None` only if it could not be given back after a clean-up: then none is done.)
    lock: Option<OwnedFd>,
}

/// A forked spare or command.
struct Forked {
    /// Where its end is reported.
    socket: OwnedFd,
    /// Read end of a pipe whose write end the spare holds until it execs (close-on-exec):
    /// `None` once it has started.
    waiting: Option<OwnedFd>,
}

impl Zygote<'_> {
    /// Receives one request for a spare and forks it. Returns `false` when reef has closed
    /// the control socket.
    fn accept(&mut self, control: &OwnedFd) -> Result<bool, String> {
        let mut byte = [0u8; 1];
        let mut space = nix::cmsg_space!([std::os::fd::RawFd; 1]);
        let (bytes, fds) = {
            let mut iov = [IoSliceMut::new(&mut byte)];
            let msg = match recvmsg::<()>(
                control.as_raw_fd(),
                &mut iov,
                Some(&mut space),
                MsgFlags::MSG_CMSG_CLOEXEC,
            ) {
                Ok(msg) => msg,
                Err(Errno::EINTR | Errno::EAGAIN) => return Ok(true),
                Err(e) => return Err(format!("read a request for a spare: {e}")),
            };
            let mut fds = Vec::new();
            for cmsg in msg
                .cmsgs()
                .map_err(|e| format!("read a request for a spare: {e}"))?
            {
                if let ControlMessageOwned::ScmRights(raw) = cmsg {
                    fds.extend(raw);
                }
            }
            (msg.bytes, sys::own_received(&fds))
        };
        if bytes == 0 {
            return Ok(false);
        }
        let Ok::<[OwnedFd; 1], _>([socket]) = fds.try_into() else {
            // Not a request reef sends: ignore it (its descriptors are closed on drop).
            return Ok(true);
        };
        // reef sees the socket close before the spare said it was ready when this fails.
        let Ok((waiting, started)) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC) else {
            return Ok(true);
        };
        match sys::fork_process() {
            Ok(ForkResult::Child) => {
                drop(waiting);
                let code = spare(self.spec, socket, started);
                std::process::exit(code);
            }
            Ok(ForkResult::Parent { child }) => {
                let waiting = Some(waiting);
                self.running.insert(child, Forked { socket, waiting });
            }
            Err(_) => {}
        }
        Ok(true)
    }

    /// Whether no forked process has started a command (each waits for its request), with
    /// the state of those whose request came read anew.
    fn idle(&mut self) -> bool {
        for forked in self.running.values_mut() {
            let started = forked.waiting.as_ref().is_none_or(|pipe| {
                let mut fds = [PollFd::new(pipe.as_fd(), PollFlags::POLLIN)];
                // Readable or hung up: the write end is closed, the spare has exec'd (or died).
                matches!(poll(&mut fds, PollTimeout::ZERO), Ok(n) if n > 0)
            });
            if started {
                forked.waiting = None;
            }
        }
        self.running.values().all(|f| f.waiting.is_some())
    }

    /// Reaps every process that has ended; for each command among them, kills what it left
    /// in its process group and, when no command runs any more, everything else and the
    /// private `/tmp`; then reports its end.
    fn reap(&mut self) {
        let mut ended = Vec::new();
        loop {
            match waitpid(None::<Pid>, Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::Exited(pid, code)) => ended.push((pid, (code & 0xff) << 8)),
                Ok(WaitStatus::Signaled(pid, signal, _)) => ended.push((pid, signal as i32)),
                Ok(WaitStatus::StillAlive) | Err(Errno::ECHILD) => break,
                Ok(_) | Err(Errno::EINTR) => continue,
                Err(_) => break,
            }
        }
        let mut reports = Vec::new();
        for (pid, status) in ended {
            if Some(pid) == self.relay {
                self.relay = None;
            }
            if let Some(forked) = self.running.remove(&pid) {
                let _ = kill(Pid::from_raw(-pid.as_raw()), Signal::SIGKILL);
                reports.push((forked.socket, status));
            }
        }
        if reports.is_empty() {
            return;
        }
        // No spare may start its command while this decides and cleans up.
        if let Some(lock) = self.lock.take() {
            match Flock::lock(lock, FlockArg::LockExclusive) {
                Ok(locked) => {
                    if self.idle() {
                        self.kill_leftovers();
                        self.tmp.clear();
                    }
                    self.lock = locked.unlock().ok();
                }
                Err((lock, _)) => self.lock = Some(lock),
            }
        }
        for (socket, status) in reports {
            let mut message = [0u8; 5];
            message[0] = ENDED;
            message[1..].copy_from_slice(&status.to_le_bytes());
            // reef may have stopped waiting (the run was cancelled): nothing to report to.
            let _ = send(socket.as_raw_fd(), &message, MsgFlags::MSG_NOSIGNAL);
        }
    }

    /// Kills and reaps every process of the sandbox but this one and the relay: what
    /// commands left behind (orphans come to PID 1).
    fn kill_leftovers(&mut self) {
        loop {
            let children: Vec<Pid> = children_of_init()
                .into_iter()
                .filter(|pid| Some(*pid) != self.relay && !self.running.contains_key(pid))
                .collect();
            if children.is_empty() {
                return;
            }
            for pid in &children {
                let _ = kill(*pid, Signal::SIGKILL);
            }
            for pid in children {
                let _ = waitpid(pid, None);
            }
        }
    }
}

/// The direct children of PID 1, from `/proc`.
fn children_of_init() -> Vec<Pid> {
    std::fs::read_to_string("/proc/1/task/1/children")
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .map(Pid::from_raw)
        .collect()
}

/// Opens the root directory for the clean-up lock (a description of its own per process).
fn open_lock() -> Result<OwnedFd, String> {
    nix::fcntl::open(
        "/",
        nix::fcntl::OFlag::O_RDONLY | nix::fcntl::OFlag::O_DIRECTORY | nix::fcntl::OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    )
    .map_err(|e| format!("open the clean-up lock: {e}"))
}

/// A forked spare: reports ready (reef reads its pid and moves it into its cgroup), waits for
/// its request with its standard streams, then becomes the program. Returns an exit code only
/// when it could not. `started` is closed by the exec, telling the zygote it runs.
fn spare(spec: &HelperSpec, socket: OwnedFd, started: OwnedFd) -> i32 {
    let fail = |message: String| {
        let _ = writeln!(std::io::stderr(), "reef-sandbox: {message}");
        init::SETUP_FAILED
    };
    if sigprocmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::empty()), None).is_err()
        || nix::unistd::setsid().is_err()
    {
        return init::SETUP_FAILED;
    }
    let mut socket = UnixStream::from(socket);
    if socket.write_all(&[READY]).is_err() {
        return init::SETUP_FAILED;
    }
    let Ok((request, [stdin, stdout, stderr])) = read_request(&socket) else {
        // reef dropped the spare (its session ended) or sent something else: nothing to run.
        return init::SETUP_FAILED;
    };
    // Held until the exec closes it: the zygote does not clean up while this starts.
    let Ok(lock) = open_lock() else {
        return init::SETUP_FAILED;
    };
    let Ok(lock) = Flock::lock(lock, FlockArg::LockShared) else {
        return init::SETUP_FAILED;
    };
    let stdio = dup2_stdin(&stdin)
        .and_then(|()| dup2_stdout(&stdout))
        .and_then(|()| dup2_stderr(&stderr));
    if let Err(e) = stdio {
        return fail(format!("take the command's standard streams: {e}"));
    }
    drop((stdin, stdout, stderr, socket));
    if let Err(message) = confine::rlimits(&spec.limits) {
        return fail(message);
    }
    let argv: Result<Vec<CString>, _> = std::iter::once(request.program.as_bytes())
        .chain(request.args.iter().map(String::as_bytes))
        .map(|a| CString::new(a.to_vec()))
        .collect();
    let env: Result<Vec<CString>, _> = request.env.into_iter().map(CString::new).collect();
    let (Ok(argv), Ok(env)) = (argv, env) else {
        return fail("an argument or variable contains a NUL byte".into());
    };
    let code = init::exec(&spec.workspace.join(&request.cwd), &argv, &env);
    drop((lock, started));
    code
}

/// Reads the request reef writes on a spare's socket: its length (4 bytes, little-endian),
/// carrying the command's stdin, stdout and stderr, then the request itself.
fn read_request(socket: &UnixStream) -> Result<(WarmCommand, [OwnedFd; 3]), String> {
    let mut len = [0u8; 4];
    let mut got = 0;
    let mut fds = Vec::new();
    while got < len.len() {
        let mut space = nix::cmsg_space!([std::os::fd::RawFd; 3]);
        let mut iov = [IoSliceMut::new(&mut len[got..])];
        let msg = recvmsg::<()>(
            socket.as_raw_fd(),
            &mut iov,
            Some(&mut space),
            MsgFlags::MSG_CMSG_CLOEXEC,
        )
        .map_err(|e| e.to_string())?;
        for cmsg in msg.cmsgs().map_err(|e| e.to_string())? {
            if let ControlMessageOwned::ScmRights(raw) = cmsg {
                fds.extend(sys::own_received(&raw));
            }
        }
        if msg.bytes == 0 {
            return Err("the socket closed".into());
        }
        got += msg.bytes;
    }
    let fds: [OwnedFd; 3] = fds
        .try_into()
        .map_err(|_| "the request did not carry three streams".to_owned())?;
    let len = u32::from_le_bytes(len);
    if len > MAX_REQUEST {
        return Err(format!("a request of {len} bytes"));
    }
    let mut body = vec![0u8; len as usize];
    (&*socket)
        .read_exact(&mut body)
        .map_err(|e| e.to_string())?;
    let request = serde_json::from_slice(&body).map_err(|e| e.to_string())?;
    Ok((request, fds))
}

/// What the private `/tmp` held when the sandbox was built (the directories leading to the
/// paths mounted there, and those mounts): clearing it removes everything else.
struct Tmp {
    root: PathBuf,
    device: u64,
    kept: BTreeSet<PathBuf>,
}

impl Tmp {
    fn record(root: &Path) -> Tmp {
        let device = std::fs::symlink_metadata(root)
            .map(|m| m.dev())
            .unwrap_or(0);
        let mut tmp = Tmp {
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
                tmp.kept.insert(path);
            }
        }
        tmp
    }

    /// Removes everything the commands wrote to `/tmp`, never crossing into a mount.
    fn clear(&self) {
        let mut pending = vec![self.root.clone()];
        while let Some(dir) = pending.pop() {
            for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                let path = entry.path();
                let Ok(meta) = std::fs::symlink_metadata(&path) else {
                    continue;
                };
                if self.kept.contains(&path) {
                    if meta.is_dir() && meta.dev() == self.device {
                        pending.push(path);
                    }
                } else if meta.is_dir() {
                    let _ = std::fs::remove_dir_all(&path);
                } else {
                    let _ = std::fs::remove_file(&path);
                }
            }
        }
    }
}
