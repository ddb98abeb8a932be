//! Process-group signalling and the drop guard that kills a group if `run` is cancelled.

use rustix::process::{Pid, Signal, kill_process_group};

/// Sends `signal` to the process group `pgid`. Errors (typically ESRCH: the group is
/// already gone) are ignored: there is nothing left to stop.
pub(crate) fn signal_group(pgid: Option<Pid>, signal: Signal) {
    if let Some(pgid) = pgid
        && let Err(err) = kill_process_group(pgid, signal)
    {
        tracing::trace!(pgid = pgid.as_raw_nonzero().get(), %err, "killpg failed");
    }
}

/// Kills the process group with SIGKILL when dropped, unless disarmed. Held across the
/// whole of `Sandbox::run`, so dropping the `run` future kills every process it started.
#[derive(Debug)]
pub(crate) struct GroupGuard {
    pgid: Option<Pid>,
}

impl GroupGuard {
    pub(crate) fn new(pid: Option<u32>) -> Self {
        let pgid = pid
            .and_then(|p| i32::try_from(p).ok())
            .and_then(Pid::from_raw);
        Self { pgid }
    }

    pub(crate) fn pgid(&self) -> Option<Pid> {
        self.pgid
    }

    /// Kills whatever is left of the group now and disarms the guard.
    pub(crate) fn kill_now(&mut self) {
        signal_group(self.pgid.take(), Signal::KILL);
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.kill_now();
    }
}
