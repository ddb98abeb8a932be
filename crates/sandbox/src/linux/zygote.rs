//! The warm sandbox's PID 1 (a zygote): built and confined once, it then forks every command
//! of the session from itself. Each command starts as a spare, forked ahead of need: a fresh
//! process in a session and process group of its own, which reef moves into a cgroup of its
//! own and which waits for its request (program, environment, standard streams), then takes
//! its resource limits and execs. When a command ends the zygote kills what it left in its
//! group, and once no command runs, everything else (see `cleanup`), holding a lock that a
//! spare must share before it execs: no command starts before that clean-up is done. See
//! `spare` for a spare's side and `crate::warm` for reef's.

use super::cleanup::{Scratch, kill_orphans};
use super::spec::HelperSpec;
use super::{relay, spare, sys};
use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::{SigSet, SigmaskHow, Signal, kill, sigprocmask};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::sys::socket::{MsgFlags, send};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::{ForkResult, Pid};
use std::collections::BTreeMap;
use std::net::TcpListener;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};

/// The byte a request for a spare carries, with the spare's socket.
pub(crate) const SPARE: u8 = b'C';
/// The byte the zygote sends on the control socket once it is built and serves.
pub(crate) const SERVING: u8 = b'W';
/// The byte a spare sends once forked (reef reads its pid from it).
pub(crate) const READY: u8 = b'R';
/// The byte reef answers once the spare's cgroup is ready, with the cgroup v1 `tasks` files
/// the spare writes itself into (none when reef has moved it).
pub(crate) const PLACE: u8 = b'P';
/// The byte a spare answers once in its cgroup (or `E` and why it could not join).
pub(crate) const PLACED: u8 = b'K';
/// The byte before a command's wait status (an `i32`, little-endian).
pub(crate) const ENDED: u8 = b'S';
/// The largest request a command reads (program, arguments and environment).
pub(crate) const MAX_REQUEST: u32 = 16 * 1024 * 1024;

/// Serves start requests on the control socket until reef closes it, then ends the sandbox.
/// `relay` is the proxy relay's listener in `allowlist` mode; it is served by a process of
/// its own so that this one stays single-threaded and may fork.
pub(crate) fn serve(spec: &HelperSpec, relay: Option<TcpListener>) -> Result<i32, String> {
    // No core dumps and no access to this process's memory from a command's side, made
    // explicit (commands hold no capability over it anyway).
    nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_CORE, 0, 0)
        .map_err(|e| format!("setrlimit core: {e}"))?;
    nix::sys::prctl::set_dumpable(false).map_err(|e| format!("set non-dumpable: {e}"))?;
    let relay = match relay {
        Some(listener) => Some(start_relay(listener)?),
        None => None,
    };
    let control = sys::control_socket()?;
    let mut chld = SigSet::empty();
    chld.add(Signal::SIGCHLD);
    sigprocmask(SigmaskHow::SIG_BLOCK, Some(&chld), None)
        .map_err(|e| format!("block SIGCHLD: {e}"))?;
    let signals = SignalFd::with_flags(&chld, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC)
        .map_err(|e| format!("signalfd: {e}"))?;
    let scratch = Scratch::record(spec);
    // A file no command can reach (close-on-exec, and this process's descriptors are out of
    // their reach): spares lock it while they start, the zygote while it cleans up.
    let lock =
        nix::sys::memfd::memfd_create("reef-clean-up", nix::sys::memfd::MFdFlags::MFD_CLOEXEC)
            .map_err(|e| format!("create the clean-up lock: {e}"))?;
    send(control.as_raw_fd(), &[SERVING], MsgFlags::MSG_NOSIGNAL)
        .map_err(|e| format!("tell reef the sandbox is ready: {e}"))?;

    let mut zygote = Zygote {
        spec,
        running: BTreeMap::new(),
        relay,
        scratch,
        lock,
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
    // reef closed the session: nothing of it may keep running (PID 1's end kills the rest).
    Ok(0)
}

/// Forks the process that serves the proxy relay (with threads of its own).
fn start_relay(listener: TcpListener) -> Result<Pid, String> {
    match sys::fork_process().map_err(|e| format!("fork the proxy relay: {e}"))? {
        ForkResult::Child => {
            // The relay has no use for the control socket.
            drop(sys::control_socket());
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
    scratch: Scratch,
    /// Locked alone while the zygote decides whether no command runs and cleans up, and
    /// shared by a spare from its request to its exec: no command starts during a clean-up.
    lock: OwnedFd,
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
        let (bytes, fds) = match sys::recv_with_fds(control.as_fd(), &mut byte) {
            Ok(got) => got,
            Err(Errno::EINTR | Errno::EAGAIN) => return Ok(true),
            Err(e) => return Err(format!("read a request for a spare: {e}")),
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
                let code = spare::run(self.spec, socket, &self.lock, started);
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
        // No spare may start its command while this decides and cleans up: a spare holding
        // the lock is starting (so this is not idle), and one that comes for it meanwhile
        // waits until the clean-up is done. The ends are reported first, so that reef goes on
        // while this cleans up.
        let locked = sys::lock_record(&self.lock, false, false).is_ok();
        let idle = locked && self.idle();
        for (socket, status) in reports {
            let mut message = [0u8; 5];
            message[0] = ENDED;
            message[1..].copy_from_slice(&status.to_le_bytes());
            // reef may have stopped waiting (the run was cancelled): nothing to report to.
            let _ = send(socket.as_raw_fd(), &message, MsgFlags::MSG_NOSIGNAL);
        }
        if idle {
            let relay = self.relay;
            let running = &self.running;
            kill_orphans(|pid| Some(pid) == relay || running.contains_key(&pid));
            self.scratch.clear();
        }
        if locked {
            let _ = sys::unlock_record(&self.lock);
        }
    }
}
