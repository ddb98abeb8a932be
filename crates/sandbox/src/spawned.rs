//! Long-running processes (a server spoken to over its stdin and stdout): started under the
//! same policy as [`Sandbox::run`], kept until the caller drops them, and then killed with
//! everything they started.

use crate::error::SandboxError;
use crate::group::GroupGuard;
use crate::request::ExecRequest;
use crate::runner::{Sandbox, check_start_dir};
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use tokio::io::AsyncReadExt;
use tokio::process::{Child, ChildStdin, ChildStdout};

/// How much of the end of a spawned process's stderr is kept for error reports.
const STDERR_TAIL: usize = 8 * 1024;

/// A process started by [`Sandbox::spawn`]. Its stdin and stdout belong to the caller; the
/// last [`STDERR_TAIL`] bytes of its stderr are kept. Dropping it kills its whole process
/// group (and with it the sandbox's PID namespace).
#[derive(Debug)]
pub struct Spawned {
    /// Keeps the session's cgroups (and proxy) for as long as the process runs: the helper
    /// joins them after it starts, and a caller may drop its `Sandbox` first.
    _sandbox: Sandbox,
    child: Child,
    guard: GroupGuard,
    stdin: Option<ChildStdin>,
    stdout: Option<ChildStdout>,
    stderr: Arc<Mutex<Vec<u8>>>,
}

impl Spawned {
    /// The process's stdout and stdin, once: the channel to speak to it.
    pub fn take_io(&mut self) -> Option<(ChildStdout, ChildStdin)> {
        Some((self.stdout.take()?, self.stdin.take()?))
    }

    /// The host PID of the started process (the sandbox helper, for the landlock backend).
    pub fn id(&self) -> Option<u32> {
        self.child.id()
    }

    /// The end of what the process wrote to stderr so far, as lossy UTF-8.
    pub fn stderr_tail(&self) -> String {
        let tail = self.stderr.lock().unwrap_or_else(PoisonError::into_inner);
        String::from_utf8_lossy(&tail).into_owned()
    }

    /// Its exit status, if it has exited.
    pub fn try_status(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Waits for it to exit.
    pub async fn wait(&mut self) -> std::io::Result<ExitStatus> {
        self.child.wait().await
    }

    /// Kills its process group now (SIGKILL); [`Spawned::wait`] then returns promptly.
    pub fn kill(&mut self) {
        self.guard.kill_now();
    }
}

impl Sandbox {
    /// Starts `req` and returns at once with the running process, its stdin and stdout piped
    /// to the caller. `req.timeout` and `req.stdin` do not apply: the process runs until it
    /// exits or the [`Spawned`] is dropped or killed. Everything else is as for
    /// [`Sandbox::run`]: the same confinement, environment and process group.
    pub async fn spawn(&self, req: ExecRequest) -> Result<Spawned, SandboxError> {
        check_start_dir(&req).await?;
        let mut cmd = self.command(&req)?;
        cmd.stdin(Stdio::piped());
        let mut child = cmd.spawn().map_err(|source| SandboxError::Spawn {
            program: req.program.clone(),
            source,
        })?;
        self.count_spawn();
        let guard = GroupGuard::new(child.id());
        let stderr = Arc::new(Mutex::new(Vec::new()));
        if let Some(mut pipe) = child.stderr.take() {
            let tail = stderr.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 4096];
                while let Ok(n @ 1..) = pipe.read(&mut buf).await {
                    let mut tail = tail.lock().unwrap_or_else(PoisonError::into_inner);
                    tail.extend_from_slice(&buf[..n]);
                    let excess = tail.len().saturating_sub(STDERR_TAIL);
                    tail.drain(..excess);
                }
            });
        }
        Ok(Spawned {
            _sandbox: self.clone(),
            stdin: child.stdin.take(),
            stdout: child.stdout.take(),
            child,
            guard,
            stderr,
        })
    }
}
