//! The agent as `/init` of a microVM: boot (`boot`), then serve reef's messages on the
//! virtio-serial port until it closes. Commands run concurrently, one thread and one process
//! group each (`command`); PID 1 reaps every process (`reaper`). Once no command runs, what
//! commands left behind is killed and `/tmp` and `/dev/shm` are emptied, so the next command
//! starts from a clean guest.

mod boot;
mod command;
mod net;
mod reaper;
mod resume;

use crate::protocol::{self, GuestMessage, HostMessage};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use std::collections::HashMap;
use std::ffi::OsStr;
use std::fs::File;
use std::io::{self, Write as _};
use std::os::unix::ffi::OsStrExt as _;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

/// The agent's own log line, on the serial console (the guest's only log).
#[allow(clippy::print_stderr, reason = "the guest's log is its serial console")]
fn log(message: &str) {
    eprintln!("reef-vm-agent: {message}");
}

/// Runs the agent; returns only if it cannot go on (the VM then ends).
pub fn main() -> i32 {
    if std::process::id() != 1 {
        log("runs only as /init of a reef microVM");
        return 2;
    }
    let port = match boot::boot() {
        Ok(port) => port,
        Err(err) => {
            log(&format!("boot failed: {err}"));
            return 1;
        }
    };
    match serve(port) {
        Ok(()) => log("reef closed the port"),
        Err(err) => log(&format!("the port failed: {err}")),
    }
    1
}

/// What the command threads share.
pub(crate) struct Shared {
    /// The port, for answers (one frame at a time).
    out: Mutex<File>,
    /// Commands running, by id, with their process groups.
    running: Mutex<HashMap<u32, i32>>,
    reaper: reaper::Reaper,
    /// Where reef's shares are mounted: kept when scratch space is cleared.
    mounts: Mutex<Vec<PathBuf>>,
}

impl Shared {
    pub(crate) fn send(&self, message: &GuestMessage) {
        let mut out = self.out.lock().unwrap_or_else(PoisonError::into_inner);
        if let Err(err) = protocol::write_frame(&mut *out, &message.encode()) {
            log(&format!("cannot answer reef: {err}"));
        }
    }

    /// Marks command `id` as starting, before its process exists, so that the clean-up after
    /// another command's end cannot kill it.
    pub(crate) fn begin(&self, id: u32) {
        self.lock_running().insert(id, 0);
    }

    /// Records the process group of command `id`, for `Cancel`.
    pub(crate) fn started(&self, id: u32, pgid: i32) {
        if let Some(entry) = self.lock_running().get_mut(&id) {
            *entry = pgid;
        }
    }

    /// Marks command `id` ended; when it was the last, clears what commands left.
    pub(crate) fn ended(&self, id: u32) {
        let mut running = self.lock_running();
        running.remove(&id);
        if running.is_empty() {
            // Every process but PID 1: what commands left running, in any group or session.
            let _ = kill(Pid::from_raw(-1), Signal::SIGKILL);
            let mounts = self.mounts.lock().unwrap_or_else(PoisonError::into_inner);
            if let Err(err) = boot::clear_scratch(&mounts) {
                log(&format!("cannot clear /tmp and /dev/shm: {err}"));
            }
        }
    }

    fn lock_running(&self) -> std::sync::MutexGuard<'_, HashMap<u32, i32>> {
        self.running.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn serve(port: File) -> io::Result<()> {
    let mut input = port.try_clone()?;
    let shared = Arc::new(Shared {
        out: Mutex::new(port),
        running: Mutex::new(HashMap::new()),
        reaper: reaper::Reaper::start(),
        mounts: Mutex::default(),
    });
    while let Some(frame) = protocol::read_frame(&mut input)? {
        let message = match HostMessage::decode(&frame) {
            Ok(message) => message,
            Err(err) => {
                log(&format!("ignoring a damaged message: {err}"));
                continue;
            }
        };
        match message {
            HostMessage::Hello => shared.send(&GuestMessage::Hello {
                version: protocol::VERSION,
            }),
            HostMessage::Mount {
                id,
                tag,
                path,
                read_only,
                layers,
            } => {
                let error = match boot::mount_share(&tag, &path, read_only, &layers) {
                    Ok(()) => {
                        let mut mounts =
                            shared.mounts.lock().unwrap_or_else(PoisonError::into_inner);
                        mounts.push(PathBuf::from(OsStr::from_bytes(&path)));
                        String::new()
                    }
                    Err(err) => err.to_string(),
                };
                shared.send(&GuestMessage::Done { id, error });
            }
            HostMessage::Run { id, command } => {
                let shared = Arc::clone(&shared);
                std::thread::spawn(move || command::run(&shared, id, command));
            }
            HostMessage::Resumed {
                id,
                seed,
                unix_nanos,
            } => {
                let error = resume::resumed(&seed, unix_nanos)
                    .err()
                    .map(|e| e.to_string())
                    .unwrap_or_default();
                shared.send(&GuestMessage::Done { id, error });
            }
            HostMessage::Proxy { id } => {
                let started = boot::open_named_port(protocol::NET_PORT_NAME).and_then(net::start);
                let error = started.err().map(|e| e.to_string()).unwrap_or_default();
                shared.send(&GuestMessage::Done { id, error });
            }
            HostMessage::Cancel { id } => {
                if let Some(pgid) = shared.lock_running().get(&id).filter(|p| **p > 0) {
                    let _ = kill(Pid::from_raw(-pgid), Signal::SIGKILL);
                }
            }
        }
    }
    let _ = std::io::stderr().flush();
    Ok(())
}
