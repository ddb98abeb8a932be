//! The warm sandbox's PID 1 (a zygote): built and confined once, it then forks every command
//! of the session from itself. Each command gets a fresh process (its own session and process
//! group, its own resource limits), reef moves it into a cgroup of its own before it may
//! exec, and when it ends the zygote kills what it left in its group, and once no command
//! runs, every other process and everything written to the private `/tmp`, before it reports
//! the command's end. See `crate::warm` for reef's side of the conversation.

use super::spec::{HelperSpec, WarmCommand};
use super::{confine, init, relay, sys};
use nix::errno::Errno;
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

/// The byte a start request carries, with its four descriptors.
pub(crate) const START: u8 = b'C';
/// The byte the zygote sends on the control socket once it is built and serves.
pub(crate) const SERVING: u8 = b'W';
/// The byte a command sends once it knows its request (reef reads its pid from it).
pub(crate) const READY: u8 = b'R';
/// The byte reef answers once the command is in its cgroup: it may exec.
pub(crate) const GO: u8 = b'G';
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
    send(control.as_raw_fd(), &[SERVING], MsgFlags::MSG_NOSIGNAL)
        .map_err(|e| format!("tell reef the sandbox is ready: {e}"))?;

    let mut zygote = Zygote {
        spec,
        running: BTreeMap::new(),
        relay,
        tmp,
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
    /// Commands running, with the socket their end is reported on.
    running: BTreeMap<Pid, OwnedFd>,
    relay: Option<Pid>,
    tmp: Tmp,
}

impl Zygote<'_> {
    /// Receives one start request and forks its command. Returns `false` when reef has closed
    /// the control socket.
    fn accept(&mut self, control: &OwnedFd) -> Result<bool, String> {
        let mut byte = [0u8; 1];
        let mut space = nix::cmsg_space!([std::os::fd::RawFd; 4]);
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
                Err(e) => return Err(format!("read a start request: {e}")),
            };
            let mut fds = Vec::new();
            for cmsg in msg
                .cmsgs()
                .map_err(|e| format!("read a start request: {e}"))?
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
        let Ok::<[OwnedFd; 4], _>([stdin, stdout, stderr, socket]) = fds.try_into() else {
            // Not a request reef sends: ignore it (its descriptors are closed on drop).
            return Ok(true);
        };
        match sys::fork_process() {
            Ok(ForkResult::Child) => {
                let code = command(self.spec, stdin, stdout, stderr, socket);
                std::process::exit(code);
            }
            Ok(ForkResult::Parent { child }) => {
                self.running.insert(child, socket);
            }
            // reef sees the socket close before the command said it was ready.
            Err(_) => drop(socket),
        }
        Ok(true)
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
            if let Some(socket) = self.running.remove(&pid) {
                let _ = kill(Pid::from_raw(-pid.as_raw()), Signal::SIGKILL);
                reports.push((socket, status));
            }
        }
        if reports.is_empty() {
            return;
        }
        if self.running.is_empty() {
            self.kill_leftovers();
            self.tmp.clear();
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

/// The forked command: takes its descriptors, reads its request, reports ready, waits for
/// reef to place it in its cgroup, then becomes the program. Returns an exit code only when
/// it could not.
fn command(
    spec: &HelperSpec,
    stdin: OwnedFd,
    stdout: OwnedFd,
    stderr: OwnedFd,
    socket: OwnedFd,
) -> i32 {
    let fail = |message: String| {
        let _ = writeln!(std::io::stderr(), "reef-sandbox: {message}");
        init::SETUP_FAILED
    };
    if let Err(e) = sigprocmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::empty()), None) {
        return fail(format!("unblock signals: {e}"));
    }
    if let Err(e) = nix::unistd::setsid() {
        return fail(format!("setsid: {e}"));
    }
    let stdio = dup2_stdin(&stdin)
        .and_then(|()| dup2_stdout(&stdout))
        .and_then(|()| dup2_stderr(&stderr));
    if let Err(e) = stdio {
        return fail(format!("take the command's standard streams: {e}"));
    }
    drop((stdin, stdout, stderr));
    let mut socket = UnixStream::from(socket);
    let request = match read_request(&mut socket) {
        Ok(request) => request,
        // reef gave up on the run before sending it: nothing to run.
        Err(_) => return init::SETUP_FAILED,
    };
    let mut go = [0u8; 1];
    let placed = socket
        .write_all(&[READY])
        .and_then(|()| socket.read_exact(&mut go));
    if placed.is_err() || go[0] != GO {
        return init::SETUP_FAILED;
    }
    drop(socket);
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
    init::exec(&spec.workspace.join(&request.cwd), &argv, &env)
}

/// Reads the length-prefixed request reef writes on the command's socket.
fn read_request(socket: &mut UnixStream) -> Result<WarmCommand, String> {
    let mut len = [0u8; 4];
    socket.read_exact(&mut len).map_err(|e| e.to_string())?;
    let len = u32::from_le_bytes(len);
    if len > MAX_REQUEST {
        return Err(format!("a request of {len} bytes"));
    }
    let mut body = vec![0u8; len as usize];
    socket.read_exact(&mut body).map_err(|e| e.to_string())?;
    serde_json::from_slice(&body).map_err(|e| e.to_string())
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
