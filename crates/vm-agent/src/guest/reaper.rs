//! PID 1's reaper: every process that ends in the guest (commands, and what they orphaned) is
//! reaped here, and a command's end is handed to the thread that started it. It only peeks at
//! an ended process (`WNOWAIT`) until it holds the table that spawning holds, so it never
//! reaps a child that std's `spawn` still waits for itself (an `exec` that failed).

use nix::errno::Errno;
use nix::sys::wait::{Id, WaitPidFlag, WaitStatus, waitid, waitpid};
use std::collections::HashMap;
use std::io;
use std::process::{Child, Command};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::Duration;

/// How a command's process ended.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Ended {
    Code(i32),
    Signal(i32),
}

type Table = HashMap<i32, Sender<Ended>>;

pub(crate) struct Reaper {
    table: Arc<(Mutex<Table>, Condvar)>,
}

impl Reaper {
    pub(crate) fn start() -> Self {
        let table: Arc<(Mutex<Table>, Condvar)> = Arc::default();
        let reaping = Arc::clone(&table);
        std::thread::spawn(move || reap(&reaping));
        Reaper { table }
    }

    /// Starts `command` and returns its process with where its end will be reported.
    pub(crate) fn spawn(&self, command: &mut Command) -> io::Result<(Child, Receiver<Ended>)> {
        let (lock, wake) = &*self.table;
        let mut table = lock.lock().unwrap_or_else(PoisonError::into_inner);
        let child = command.spawn()?;
        let (tx, rx) = channel();
        table.insert(child.id() as i32, tx);
        wake.notify_all();
        Ok((child, rx))
    }
}

fn reap(table: &(Mutex<Table>, Condvar)) {
    let (lock, wake) = table;
    loop {
        match waitid(Id::All, WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT) {
            Ok(peeked) => {
                let Some(pid) = peeked.pid() else { continue };
                let mut table = lock.lock().unwrap_or_else(PoisonError::into_inner);
                let ended = match waitpid(pid, Some(WaitPidFlag::WNOHANG)) {
                    Ok(WaitStatus::Exited(_, code)) => Ended::Code(code),
                    Ok(WaitStatus::Signaled(_, signal, _)) => Ended::Signal(signal as i32),
                    // Reaped meanwhile by the spawn that started it.
                    _ => continue,
                };
                if let Some(tx) = table.remove(&pid.as_raw()) {
                    let _ = tx.send(ended);
                }
            }
            Err(Errno::ECHILD) => {
                let table = lock.lock().unwrap_or_else(PoisonError::into_inner);
                let _ = wake.wait_timeout(table, Duration::from_millis(200));
            }
            Err(_) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
}
