//! reef's side of a warm sandbox: the helper is started once per session (and per workspace
//! and read-only folders), and its PID 1 forks every command (see `linux::zygote`). Commands
//! start as spares, forked ahead of need: reef asks for one with a socket of its own, learns
//! its pid from the kernel-attached credentials of its first message, and moves it into a
//! cgroup of its own. A command then takes a spare, sends it the request with its standard
//! streams, and reads how it ended; while it runs, the next spare is made. A sandbox that is
//! gone before a command started is replaced and the command tried once more; one that dies
//! while a command runs fails that command, which is never run twice.

mod helper;
mod spares;

use crate::capture::{Streams, collect};
use crate::error::SandboxError;
use crate::group::GroupGuard;
use crate::linux::spec::{HelperSpec, WarmCommand};
use crate::policy::HelperCommand;
use crate::request::{ExecOutput, ExecRequest};
use crate::runner::Sandbox;
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::{Arc, PoisonError};
use std::time::{Duration, Instant};
use tokio::net::unix::pipe;

pub(crate) use helper::Warm;

/// How long a warm sandbox may take to be built before the run fails as timed out (the
/// request's own timeout when shorter).
const BUILD_TIMEOUT: Duration = Duration::from_secs(30);

/// Why a command could not run in a warm sandbox.
pub(super) enum Launch {
    /// The sandbox was gone before the command could start: a fresh one may run it.
    Gone(String),
    /// The command started (or could not be placed safely): not to be retried.
    Failed(SandboxError),
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
            env: self.command_env_entries(&req),
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
        if let Err(e) = spares::send_request(&spare.socket, &frame, [&in_r, &out_w, &err_w]).await {
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
        let running = collect(
            self.policy(),
            req,
            streams,
            guard,
            spares::ended(&mut spare.socket),
        );
        let (ended, ()) = tokio::join!(running, warm.replenish(self));
        // What the command left in its cgroup is killed, and the cgroup kept.
        drop(spare);
        Ok(ended.map_err(Launch::Failed)?.output(start))
    }
}
