//! Capped output capture: keep the first N bytes of a stream, read and discard the rest so
//! the writer never blocks on a full pipe; and the wait for a process's end around it, with
//! the timeout and the kill of what it left in its group.

use crate::error::SandboxError;
use crate::group::{GroupGuard, signal_group};
use crate::policy::SandboxPolicy;
use crate::request::{ExecOutput, ExecRequest};
use rustix::process::{Pid, Signal};
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// How long to keep reading output after the process group has been killed. Pipes normally
/// close at once; this only bounds the wait when a process that left the group (e.g. via
/// `setsid`) still holds them open.
const DRAIN_AFTER_EXIT: Duration = Duration::from_millis(500);
/// How long a process may take to end after SIGKILL before the run fails (a process stuck in
/// the kernel, or a warm sandbox that no longer reports).
const KILL_WAIT: Duration = Duration::from_secs(10);

/// Bytes kept from one stream plus whether anything was discarded.
#[derive(Debug, Default)]
pub(crate) struct Captured {
    pub(crate) bytes: Vec<u8>,
    pub(crate) truncated: bool,
}

impl Captured {
    fn push(&mut self, chunk: &[u8], cap: usize) {
        let room = cap.saturating_sub(self.bytes.len());
        if chunk.len() > room {
            self.truncated = true;
        }
        let take = chunk.len().min(room);
        self.bytes.extend_from_slice(&chunk[..take]);
    }

    pub(crate) fn into_string(self) -> String {
        String::from_utf8_lossy(&self.bytes).into_owned()
    }
}

/// Reads `reader` to EOF into `out`, keeping at most `cap` bytes. Read errors end the
/// capture (the process side is handled by the runner).
pub(crate) async fn drain<R: AsyncRead + Unpin>(reader: Option<R>, out: &mut Captured, cap: usize) {
    let Some(mut reader) = reader else { return };
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        match reader.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => out.push(&buf[..n], cap),
        }
    }
}

/// A started process's standard streams, as far as reef holds them.
pub(crate) struct Streams<O, E, I> {
    pub(crate) stdout: Option<O>,
    pub(crate) stderr: Option<E>,
    pub(crate) stdin: Option<I>,
}

/// How a process ended, with what it wrote.
pub(crate) struct Ended {
    out: Captured,
    err: Captured,
    status: ExitStatus,
    timed_out: bool,
}

impl Ended {
    pub(crate) fn output(self, start: Instant) -> ExecOutput {
        ExecOutput {
            stdout_truncated: self.out.truncated,
            stderr_truncated: self.err.truncated,
            stdout: self.out.into_string(),
            stderr: self.err.into_string(),
            exit_code: self.status.code(),
            signal: self.status.signal(),
            timed_out: self.timed_out,
            duration: start.elapsed(),
        }
    }
}

/// Feeds the request's stdin, reads both outputs (capped) and waits for `waiting` (the end
/// of the process), stopping its group at the timeout; then kills what is left of the group
/// and collects what is still buffered in the pipes.
pub(crate) async fn collect<O, E, I, W>(
    policy: &SandboxPolicy,
    req: &ExecRequest,
    streams: Streams<O, E, I>,
    mut guard: GroupGuard,
    waiting: W,
) -> Result<Ended, SandboxError>
where
    O: AsyncRead + Unpin,
    E: AsyncRead + Unpin,
    I: AsyncWrite + Unpin,
    W: Future<Output = std::io::Result<ExitStatus>>,
{
    let pgid = guard.pgid();
    let cap = policy.max_output_bytes;
    let mut out = Captured::default();
    let mut err = Captured::default();
    let waited = {
        let reading = async {
            tokio::join!(
                drain(streams.stdout, &mut out, cap),
                drain(streams.stderr, &mut err, cap),
                feed(streams.stdin, req.stdin.as_deref()),
            )
        };
        tokio::pin!(reading);
        let waiting = wait_or_stop(waiting, pgid, req.timeout, policy.kill_grace);
        tokio::pin!(waiting);
        let mut read_done = false;
        let waited = loop {
            tokio::select! {
                res = &mut waiting => break res,
                _ = &mut reading, if !read_done => read_done = true,
            }
        };
        // The direct child is gone: stop anything it left running in its group, then
        // collect what is still buffered in the pipes.
        guard.kill_now();
        if !read_done {
            let _drained = tokio::time::timeout(DRAIN_AFTER_EXIT, &mut reading).await;
        }
        waited
    };
    let (status, timed_out) = waited.map_err(|source| SandboxError::Io {
        program: req.program.clone(),
        source,
    })?;
    Ok(Ended {
        out,
        err,
        status,
        timed_out,
    })
}

/// Waits for `waiting`; on timeout sends SIGTERM to the group, then SIGKILL after `grace`.
/// Returns the exit status and whether the timeout fired.
async fn wait_or_stop<W: Future<Output = std::io::Result<ExitStatus>>>(
    waiting: W,
    pgid: Option<Pid>,
    timeout: Duration,
    grace: Duration,
) -> std::io::Result<(ExitStatus, bool)> {
    tokio::pin!(waiting);
    if let Ok(status) = tokio::time::timeout(timeout, waiting.as_mut()).await {
        return Ok((status?, false));
    }
    signal_group(pgid, Signal::TERM);
    if let Ok(status) = tokio::time::timeout(grace, waiting.as_mut()).await {
        return Ok((status?, true));
    }
    signal_group(pgid, Signal::KILL);
    match tokio::time::timeout(KILL_WAIT, waiting).await {
        Ok(status) => Ok((status?, true)),
        Err(_) => Err(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!("the process did not end within {KILL_WAIT:?} of SIGKILL"),
        )),
    }
}

/// Writes `data` to the child's stdin and closes it. A child that exits without reading
/// (EPIPE) is not an error.
async fn feed<I: AsyncWrite + Unpin>(pipe: Option<I>, data: Option<&[u8]>) {
    if let (Some(mut pipe), Some(data)) = (pipe, data) {
        if let Err(err) = pipe.write_all(data).await {
            tracing::debug!(%err, "child stdin closed early");
        }
        drop(pipe);
    }
}
