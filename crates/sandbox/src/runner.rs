//! The runner: spawns one process under the policy, enforces the timeout, collects capped
//! output and makes sure no process of its group outlives the call.

use crate::capture::{Captured, drain};
use crate::error::SandboxError;
use crate::group::{GroupGuard, signal_group};
use crate::linux::cgroup::SessionCgroup;
use crate::linux::spec::{self, HelperSpec};
use crate::policy::{NetworkMode, SandboxBackend, SandboxPolicy};
use crate::proxy::{DomainAllowList, NetProxy, NetRequest};
use crate::request::{ExecOutput, ExecRequest};
use rustix::process::{Pid, Signal};
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;
use tokio::process::{Child, ChildStdin, Command};

/// How long to keep reading output after the process group has been killed. Pipes normally
/// close at once; this only bounds the wait when a process that left the group (e.g. via
/// `setsid`) still holds them open.
const DRAIN_AFTER_EXIT: Duration = Duration::from_millis(500);

/// Runs processes under a [`SandboxPolicy`]. Cheap to clone; clones share the policy.
#[derive(Clone, Debug)]
pub struct Sandbox {
    policy: Arc<SandboxPolicy>,
    /// The session's cgroups, created at the first kernel-confined run; removed when the last
    /// clone of this `Sandbox` is dropped.
    cgroup: Arc<OnceLock<SessionCgroup>>,
    /// The session's allow-list proxy, started at the first `allowlist` run; stopped when the
    /// last clone is dropped.
    proxy: Arc<Mutex<Option<NetProxy>>>,
    /// Processes started, when someone counts them.
    spawns: Option<Arc<AtomicU64>>,
}

impl Sandbox {
    pub fn new(policy: SandboxPolicy) -> Self {
        Self {
            policy: Arc::new(policy),
            cgroup: Arc::new(OnceLock::new()),
            proxy: Arc::default(),
            spawns: None,
        }
    }

    pub(crate) fn count_spawn(&self) {
        if let Some(spawns) = &self.spawns {
            spawns.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Counts every process this sandbox starts in `spawns` (shared with whoever reads it).
    #[must_use]
    pub fn counting(mut self, spawns: Arc<AtomicU64>) -> Self {
        self.spawns = Some(spawns);
        self
    }

    /// Network requests made through this session's allow-list proxy so far (the last 1,024),
    /// allowed and refused; empty unless the network mode is `allowlist`.
    pub fn network_log(&self) -> Vec<NetRequest> {
        let proxy = self.proxy.lock().unwrap_or_else(PoisonError::into_inner);
        proxy.as_ref().map(NetProxy::log).unwrap_or_default()
    }

    /// The socket of the session's proxy, started on first use.
    fn proxy_socket(&self) -> Result<PathBuf, SandboxError> {
        let mut proxy = self.proxy.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(running) = proxy.as_ref() {
            return Ok(running.socket().to_path_buf());
        }
        let started = NetProxy::start(DomainAllowList::new(&self.policy.allow_domains))
            .map_err(SandboxError::Proxy)?;
        let socket = started.socket().to_path_buf();
        *proxy = Some(started);
        Ok(socket)
    }

    /// Resource controllers the session could not set up (empty when all limits apply, or
    /// before the first confined run).
    pub fn limit_problems(&self) -> Vec<String> {
        self.cgroup
            .get()
            .map(|c| c.problems.clone())
            .unwrap_or_default()
    }

    pub fn policy(&self) -> &SandboxPolicy {
        &self.policy
    }

    /// Runs `req` to completion (or until its timeout) and returns what it produced.
    ///
    /// The child runs in its own process group with a scrubbed environment. When the direct
    /// child exits, the rest of its group is killed. If this future is dropped, the whole
    /// group is killed with SIGKILL.
    pub async fn run(&self, req: ExecRequest) -> Result<ExecOutput, SandboxError> {
        check_start_dir(&req).await?;
        let start = Instant::now();
        let mut child = self
            .command(&req)?
            .spawn()
            .map_err(|source| SandboxError::Spawn {
                program: req.program.clone(),
                source,
            })?;
        self.count_spawn();
        let mut guard = GroupGuard::new(child.id());
        let pgid = guard.pgid();

        let cap = self.policy.max_output_bytes;
        let stdout = child.stdout.take();
        let stderr = child.stderr.take();
        let stdin = child.stdin.take();
        let mut out = Captured::default();
        let mut err = Captured::default();

        let waited = {
            let reading = async {
                tokio::join!(
                    drain(stdout, &mut out, cap),
                    drain(stderr, &mut err, cap),
                    feed(stdin, req.stdin.as_deref()),
                )
            };
            tokio::pin!(reading);
            let waiting = wait_or_stop(&mut child, pgid, req.timeout, self.policy.kill_grace);
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

        Ok(ExecOutput {
            stdout_truncated: out.truncated,
            stderr_truncated: err.truncated,
            stdout: out.into_string(),
            stderr: err.into_string(),
            exit_code: status.code(),
            signal: status.signal(),
            timed_out,
            duration: start.elapsed(),
        })
    }

    pub(crate) fn command(&self, req: &ExecRequest) -> Result<Command, SandboxError> {
        self.command_for(req, false)
    }

    /// The command for `req`; with `terminal`, its stdin will be a pseudo-terminal that the
    /// helper's command takes as the controlling terminal of its own session (the caller sets
    /// the stdio; only the landlock backend offers terminals).
    pub(crate) fn command_for(
        &self,
        req: &ExecRequest,
        terminal: bool,
    ) -> Result<Command, SandboxError> {
        let (mut cmd, policy_env) = match self.policy.backend {
            SandboxBackend::Plain => {
                let mut cmd = Command::new(&req.program);
                cmd.args(&req.args);
                (cmd, None)
            }
            SandboxBackend::Landlock => {
                let helper = self.policy.helper.as_ref().ok_or(SandboxError::NoHelper)?;
                let proxy_socket = match self.policy.network {
                    NetworkMode::Allowlist => Some(self.proxy_socket()?),
                    NetworkMode::None | NetworkMode::Full => None,
                };
                // Resolved once, here: the helper mounts exactly these directories, and refuses
                // if a link appears in one of them meanwhile.
                let workspace =
                    std::fs::canonicalize(&req.workspace).unwrap_or_else(|_| req.workspace.clone());
                let hidden = self.policy.hidden_paths();
                if hidden.contains(&workspace) {
                    return Err(SandboxError::HiddenWorkspace { workspace });
                }
                let read_only = read_only_roots(&workspace, &req.read_only, &hidden)?;
                let spec = HelperSpec {
                    protocol: crate::linux::spec::HELPER_PROTOCOL,
                    writable: writable_roots(&workspace, &self.policy.writable),
                    read_only,
                    workspace,
                    cwd: req.cwd.clone(),
                    hidden,
                    network: self.policy.network,
                    limits: self.policy.limits.clone(),
                    cgroups: self
                        .cgroup
                        .get_or_init(|| SessionCgroup::create(&self.policy.limits))
                        .dirs()
                        .to_vec(),
                    proxy_socket,
                    terminal,
                };
                let (policy, args) = spec::encode(&spec, &req.program, &req.args)
                    .map_err(SandboxError::Unsupported)?;
                let mut cmd = Command::new(&helper.program);
                cmd.args(&helper.args).args(args);
                (cmd, Some(policy))
            }
        };
        // The plain backend starts in the directory itself; the helper enters it inside the
        // sandbox, after mounting the workspace.
        match self.policy.backend {
            SandboxBackend::Plain => cmd.current_dir(req.workspace.join(&req.cwd)),
            SandboxBackend::Landlock => cmd.current_dir(&req.workspace),
        };
        cmd.env_clear();
        if let Some(policy) = policy_env {
            cmd.env(spec::POLICY_ENV, policy);
        }
        for name in &self.policy.env_allow {
            if let Some(value) = std::env::var_os(name) {
                cmd.env(name, value);
            }
        }
        cmd.env("HOME", &req.workspace);
        if self.policy.backend == SandboxBackend::Landlock
            && self.policy.network == NetworkMode::Allowlist
        {
            let url = format!("http://127.0.0.1:{}", spec::PROXY_PORT);
            for name in PROXY_VARS {
                cmd.env(name, &url);
            }
            cmd.env("NO_PROXY", "").env("no_proxy", "");
        }
        for (name, value) in &req.env {
            cmd.env(name, value);
        }
        cmd.stdin(if req.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
        // A session of its own: its own process group (killed as one), and no controlling
        // terminal through which it could reach reef's.
        crate::linux::new_session(&mut cmd);
        Ok(cmd)
    }
}

/// Refuses a request whose start directory is not a plain relative path to an existing
/// directory of the workspace.
pub(crate) async fn check_start_dir(req: &ExecRequest) -> Result<(), SandboxError> {
    let start_dir = req.workspace.join(req.checked_cwd()?);
    let dir_ok = tokio::fs::metadata(&start_dir)
        .await
        .map(|m| m.is_dir())
        .unwrap_or(false);
    if dir_ok {
        Ok(())
    } else {
        Err(SandboxError::CwdMissing { cwd: start_dir })
    }
}

/// The read-only paths to bind: resolved, without those inside the workspace and not hidden
/// there (visible already) or missing on this host. One that is or holds a hidden path is refused: binding it
/// would show what the policy hides.
fn read_only_roots(
    workspace: &std::path::Path,
    read_only: &[PathBuf],
    hidden: &[PathBuf],
) -> Result<Vec<PathBuf>, SandboxError> {
    let mut roots = Vec::new();
    for path in read_only
        .iter()
        .filter_map(|p| std::fs::canonicalize(p).ok())
    {
        if hidden.iter().any(|h| h.starts_with(&path)) {
            return Err(SandboxError::HiddenReadOnly { path });
        }
        let shown = !path.starts_with(workspace) || hidden.iter().any(|h| path.starts_with(h));
        if shown && !roots.contains(&path) {
            roots.push(path);
        }
    }
    Ok(roots)
}

/// The writable paths to bind besides the workspace: resolved, and without those inside the
/// workspace or inside another writable path (already writable; binding them would resolve a
/// path the command controls). Paths missing on this host are left out.
fn writable_roots(workspace: &std::path::Path, writable: &[PathBuf]) -> Vec<PathBuf> {
    let resolved: Vec<PathBuf> = writable
        .iter()
        .filter_map(|p| std::fs::canonicalize(p).ok())
        .collect();
    let mut roots: Vec<PathBuf> = Vec::new();
    for path in &resolved {
        let nested = path.starts_with(workspace)
            || resolved
                .iter()
                .any(|other| other != path && path.starts_with(other));
        if !nested && !roots.contains(path) {
            roots.push(path.clone());
        }
    }
    roots
}

/// Variables that point HTTP clients (curl, pip, git, npm, Python, Go…) at the proxy relay.
const PROXY_VARS: &[&str] = &[
    "http_proxy",
    "https_proxy",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "all_proxy",
    "ALL_PROXY",
];

/// Proves the policy's backend works on this machine by running `true` under it. For the
/// landlock backend, the error carries the helper's own explanation of the failed step.
pub async fn self_test(policy: &SandboxPolicy) -> Result<(), SandboxError> {
    Sandbox::new(policy.clone()).self_test().await
}

impl Sandbox {
    /// Runs `true` in this session (which also sets up its cgroup, so `limit_problems` is
    /// meaningful afterwards). For the landlock backend, the error carries the helper's own
    /// explanation of the failed step.
    pub async fn self_test(&self) -> Result<(), SandboxError> {
        let out = self
            .run(ExecRequest::new(
                "true",
                Vec::new(),
                std::env::temp_dir(),
                Duration::from_secs(20),
            ))
            .await?;
        if out.exit_code == Some(0) {
            return Ok(());
        }
        let reason = out
            .stderr
            .lines()
            .find(|l| l.starts_with("reef-sandbox:"))
            .map(|l| l.trim_start_matches("reef-sandbox:").trim().to_owned())
            .unwrap_or_else(|| {
                format!(
                    "`true` exited with {:?}: {}",
                    out.exit_code,
                    out.stderr.trim()
                )
            });
        Err(SandboxError::Unavailable {
            backend: self.policy.backend.as_str(),
            reason,
        })
    }
}

/// Waits for the child; on timeout sends SIGTERM to its group, then SIGKILL after `grace`.
/// Returns the exit status and whether the timeout fired.
async fn wait_or_stop(
    child: &mut Child,
    pgid: Option<Pid>,
    timeout: Duration,
    grace: Duration,
) -> std::io::Result<(ExitStatus, bool)> {
    if let Ok(status) = tokio::time::timeout(timeout, child.wait()).await {
        return Ok((status?, false));
    }
    signal_group(pgid, Signal::TERM);
    if let Ok(status) = tokio::time::timeout(grace, child.wait()).await {
        return Ok((status?, true));
    }
    signal_group(pgid, Signal::KILL);
    Ok((child.wait().await?, true))
}

/// Writes `data` to the child's stdin and closes it. A child that exits without reading
/// (EPIPE) is not an error.
async fn feed(pipe: Option<ChildStdin>, data: Option<&[u8]>) {
    if let (Some(mut pipe), Some(data)) = (pipe, data) {
        if let Err(err) = pipe.write_all(data).await {
            tracing::debug!(%err, "child stdin closed early");
        }
        drop(pipe);
    }
}
