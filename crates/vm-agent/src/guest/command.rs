//! One command in the guest: started in a process group of its own with the environment,
//! directory and limits reef sent; its stdin fed, both outputs read with a cap; stopped at
//! its timeout (SIGTERM to the group, SIGKILL after the grace period); what its group left
//! killed when it ends; then its end reported.

#![allow(
    unsafe_code,
    reason = "pre_exec runs setrlimit between fork and exec; see the SAFETY note"
)]

use super::Shared;
use super::reaper::Ended;
use crate::protocol::{CommandLimits, Exited, GuestMessage, RunCommand};
use nix::sys::resource::{Resource, setrlimit};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use std::ffi::OsStr;
use std::io::{Read, Write as _};
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::process::CommandExt as _;
use std::process::{Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// How long output is still read after the command's group is gone (something outside it
/// may hold the pipes open).
const DRAIN_AFTER_EXIT: Duration = Duration::from_millis(500);

pub(super) fn run(shared: &Shared, id: u32, command: RunCommand) {
    shared.begin(id);
    let message = match start(shared, id, &command) {
        Ok(exited) => GuestMessage::Exited { id, exited },
        Err(err) => GuestMessage::SpawnFailed {
            id,
            errno: err.raw_os_error().unwrap_or(nix::libc::EIO),
        },
    };
    shared.ended(id);
    shared.send(&message);
}

fn start(shared: &Shared, id: u32, c: &RunCommand) -> std::io::Result<Exited> {
    let mut cmd = Command::new(OsStr::from_bytes(&c.program));
    cmd.args(c.args.iter().map(|a| OsStr::from_bytes(a)))
        .env_clear()
        .current_dir(OsStr::from_bytes(&c.cwd))
        .process_group(0)
        .stdin(if c.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for entry in &c.env {
        let (name, value) = match entry.iter().position(|b| *b == b'=') {
            Some(at) => (&entry[..at], &entry[at + 1..]),
            None => (&entry[..], &[][..]),
        };
        cmd.env(OsStr::from_bytes(name), OsStr::from_bytes(value));
    }
    let limits = c.limits.clone();
    // SAFETY: the closure runs in the forked child before exec and only calls open(2),
    // write(2), close(2), setrlimit(2) and prctl(2), which are async-signal-safe; it allocates
    // nothing and takes no lock.
    unsafe {
        cmd.pre_exec(move || {
            killable_when_out_of_memory()?;
            drop_capabilities()?;
            apply_limits(&limits)
        });
    }
    let (mut child, ended) = shared.reaper.spawn(&mut cmd)?;
    let pgid = child.id() as i32;
    shared.started(id, pgid);

    let cap = usize::try_from(c.max_output).unwrap_or(usize::MAX);
    let stdout = Arc::new(Mutex::new(Captured::default()));
    let stderr = Arc::new(Mutex::new(Captured::default()));
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    if let Some(out) = child.stdout.take() {
        spawn_reader(out, Arc::clone(&stdout), cap, done_tx.clone());
    }
    if let Some(err) = child.stderr.take() {
        spawn_reader(err, Arc::clone(&stderr), cap, done_tx.clone());
    }
    drop(done_tx);
    if let (Some(mut pipe), Some(data)) = (child.stdin.take(), c.stdin.clone()) {
        std::thread::spawn(move || {
            // A command that exits without reading its input is not an error.
            let _ = pipe.write_all(&data);
        });
    }

    let (status, timed_out) = wait_or_stop(
        &ended,
        pgid,
        Duration::from_millis(c.timeout_ms),
        Duration::from_millis(c.kill_grace_ms),
    );
    // Whatever the command left in its group goes with it.
    let _ = kill(Pid::from_raw(-pgid), Signal::SIGKILL);
    let deadline = std::time::Instant::now() + DRAIN_AFTER_EXIT;
    for _ in 0..2 {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if done_rx.recv_timeout(left).is_err() {
            break;
        }
    }
    let take = |c: &Arc<Mutex<Captured>>| {
        std::mem::take(&mut *c.lock().unwrap_or_else(PoisonError::into_inner))
    };
    let (out, err) = (take(&stdout), take(&stderr));
    Ok(Exited {
        code: match status {
            Ended::Code(code) => Some(code),
            Ended::Signal(_) => None,
        },
        signal: match status {
            Ended::Signal(signal) => Some(signal),
            Ended::Code(_) => None,
        },
        timed_out,
        stdout: out.bytes,
        stderr: err.bytes,
        stdout_truncated: out.truncated,
        stderr_truncated: err.truncated,
    })
}

/// Waits for the command's end; at the timeout, SIGTERM to its group, then SIGKILL after
/// `grace`. Returns how it ended and whether the timeout fired.
fn wait_or_stop(
    ended: &Receiver<Ended>,
    pgid: i32,
    timeout: Duration,
    grace: Duration,
) -> (Ended, bool) {
    match ended.recv_timeout(timeout) {
        Ok(status) => return (status, false),
        Err(RecvTimeoutError::Disconnected) => {
            return (Ended::Signal(Signal::SIGKILL as i32), false);
        }
        Err(RecvTimeoutError::Timeout) => {}
    }
    let _ = kill(Pid::from_raw(-pgid), Signal::SIGTERM);
    if let Ok(status) = ended.recv_timeout(grace) {
        return (status, true);
    }
    let _ = kill(Pid::from_raw(-pgid), Signal::SIGKILL);
    (
        ended
            .recv()
            .unwrap_or(Ended::Signal(Signal::SIGKILL as i32)),
        true,
    )
}

#[derive(Default)]
struct Captured {
    bytes: Vec<u8>,
    truncated: bool,
}

/// Reads `pipe` to its end, keeping the first `cap` bytes; signals `done` at the end.
fn spawn_reader(
    mut pipe: impl Read + Send + 'static,
    into: Arc<Mutex<Captured>>,
    cap: usize,
    done: std::sync::mpsc::Sender<()>,
) {
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            match pipe.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    let mut c = into.lock().unwrap_or_else(PoisonError::into_inner);
                    let room = cap.saturating_sub(c.bytes.len());
                    if n > room {
                        c.truncated = true;
                    }
                    c.bytes.extend_from_slice(&buf[..n.min(room)]);
                }
            }
        }
        let _ = done.send(());
    });
}

/// Gives the command the default out-of-memory score: PID 1's (which it would inherit)
/// exempts it from the OOM killer, and a guest whose commands cannot be killed panics when
/// they take all its memory.
fn killable_when_out_of_memory() -> std::io::Result<()> {
    use nix::libc::{O_CLOEXEC, O_WRONLY, close, open, write};
    const PATH: &[u8] = b"/proc/self/oom_score_adj\0";
    // SAFETY: PATH is NUL-terminated; the descriptor is closed before returning.
    unsafe {
        let fd = open(PATH.as_ptr().cast(), O_WRONLY | O_CLOEXEC);
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let written = write(fd, b"0".as_ptr().cast(), 1);
        close(fd);
        if written != 1 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Capabilities a command (guest root) never gets: with them it could undo the layers over
/// the workspace (mounts), load modules, reach devices' memory, trace PID 1, reboot, make
/// device nodes, or reconfigure the network and the clock.
const DROPPED_CAPABILITIES: &[i32] = &[
    21, // CAP_SYS_ADMIN
    16, // CAP_SYS_MODULE
    17, // CAP_SYS_RAWIO
    19, // CAP_SYS_PTRACE
    22, // CAP_SYS_BOOT
    27, // CAP_MKNOD
    12, // CAP_NET_ADMIN
    25, // CAP_SYS_TIME
];

/// Drops [`DROPPED_CAPABILITIES`] from the bounding set, so the command's `exec` as root
/// does not grant them, and sets `no_new_privs`. Runs between fork and exec.
fn drop_capabilities() -> std::io::Result<()> {
    use nix::libc::{PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, c_ulong, prctl};
    for cap in DROPPED_CAPABILITIES {
        // SAFETY: prctl(2) with integer arguments only.
        if unsafe { prctl(PR_CAPBSET_DROP, *cap as c_ulong, 0, 0, 0) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    // SAFETY: as above.
    if unsafe { prctl(PR_SET_NO_NEW_PRIVS, 1 as c_ulong, 0, 0, 0) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

fn apply_limits(limits: &CommandLimits) -> std::io::Result<()> {
    let set = |resource, value: Option<u64>| match value {
        Some(v) => setrlimit(resource, v, v).map_err(std::io::Error::from),
        None => Ok(()),
    };
    set(Resource::RLIMIT_CPU, limits.cpu_secs)?;
    set(Resource::RLIMIT_AS, limits.address_space_bytes)?;
    set(Resource::RLIMIT_NPROC, limits.processes)?;
    set(Resource::RLIMIT_FSIZE, limits.file_size_bytes)?;
    set(Resource::RLIMIT_NOFILE, limits.open_files)?;
    Ok(())
}
