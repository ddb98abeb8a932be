//! The runner: spawns one process under the policy, enforces the timeout, collects capped
//! output and makes sure no process of its group outlives the call.

use crate::capture::{Streams, collect};
use crate::error::SandboxError;
use crate::group::GroupGuard;
use crate::linux::cgroup::SessionCgroup;
use crate::linux::spec::{self, HelperSpec};
use crate::policy::{NetworkMode, SandboxBackend, SandboxPolicy};
use crate::proxy::{DomainAllowList, NetProxy, NetRequest};
use crate::request::{ExecOutput, ExecRequest};
use crate::warm::Warm;
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};
use tokio::process::Command;

/// Runs processes under a [`SandboxPolicy`]. Cheap to clone; clones share the policy.
#[derive(Clone, Debug)]
pub struct Sandbox {
    /// The session's warm sandbox, started at the first warm run; ended when the last clone
    /// (and the last command running in it) is dropped. First, so that it ends before the
    /// session's cgroups are removed.
    pub(crate) warm: Arc<tokio::sync::Mutex<Option<Arc<Warm>>>>,
    /// The session's microVMs (the `microvm` backend): its pool and its current VM, stopped
    /// when the last clone is dropped.
    pub(crate) microvm: Arc<crate::microvm::Session>,
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
            warm: Arc::default(),
            microvm: Arc::default(),
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
    pub(crate) fn proxy_socket(&self) -> Result<PathBuf, SandboxError> {
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
    /// group is killed with SIGKILL. With the landlock backend and `warm` set, the command is
    /// forked from the session's warm sandbox (see [`crate::warm`]).
    pub async fn run(&self, req: ExecRequest) -> Result<ExecOutput, SandboxError> {
        check_start_dir(&req).await?;
        if self.policy.backend == SandboxBackend::Landlock && self.policy.warm {
            return self.run_warm(req).await;
        }
        if self.policy.backend == SandboxBackend::Microvm {
            return self.run_microvm(req).await;
        }
        let start = Instant::now();
        let mut child = self
            .command(&req)?
            .spawn()
            .map_err(|source| SandboxError::Spawn {
                program: req.program.clone(),
                source,
            })?;
        self.count_spawn();
        let guard = GroupGuard::new(child.id());
        let streams = Streams {
            stdout: child.stdout.take(),
            stderr: child.stderr.take(),
            stdin: child.stdin.take(),
        };
        let ended = collect(&self.policy, &req, streams, guard, child.wait()).await?;
        Ok(ended.output(start))
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
                let mut spec = self.helper_spec(req)?;
                spec.terminal = terminal;
                spec.cgroups = self.cgroup().dirs().to_vec();
                let (policy, args) = spec::encode(&spec, &req.program, &req.args)
                    .map_err(SandboxError::Unsupported)?;
                let mut cmd = Command::new(&helper.program);
                cmd.args(&helper.args).args(args);
                (cmd, Some(policy))
            }
            SandboxBackend::Microvm => {
                return Err(SandboxError::Unsupported(
                    "long-running processes and terminals are not available with the microvm \
                     backend yet; only commands that run to completion are"
                        .into(),
                ));
            }
        };
        // The plain backend starts in the directory itself; the helper enters it inside the
        // sandbox, after mounting the workspace.
        match self.policy.backend {
            SandboxBackend::Plain => cmd.current_dir(req.workspace.join(&req.cwd)),
            SandboxBackend::Landlock | SandboxBackend::Microvm => cmd.current_dir(&req.workspace),
        };
        cmd.env_clear();
        if let Some(policy) = policy_env {
            cmd.env(spec::POLICY_ENV, policy);
        }
        cmd.envs(self.command_env(req));
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

impl Sandbox {
    /// The session's cgroups, shared (created if need be).
    pub(crate) fn cgroups(&self) -> Arc<OnceLock<SessionCgroup>> {
        self.cgroup();
        Arc::clone(&self.cgroup)
    }

    /// The session's cgroups, created at the first kernel-confined run.
    pub(crate) fn cgroup(&self) -> &SessionCgroup {
        self.cgroup
            .get_or_init(|| SessionCgroup::create(&self.policy.limits))
    }

    /// The confinement of `req` under this policy (no cgroups, no terminal, not warm).
    pub(crate) fn helper_spec(&self, req: &ExecRequest) -> Result<HelperSpec, SandboxError> {
        let proxy_socket = match self.policy.network {
            NetworkMode::Allowlist => Some(self.proxy_socket()?),
            NetworkMode::None | NetworkMode::Full => None,
        };
        // Resolved once, here: the helper mounts exactly these directories, and refuses if a
        // link appears in one of them meanwhile.
        let workspace =
            std::fs::canonicalize(&req.workspace).unwrap_or_else(|_| req.workspace.clone());
        let hidden = self.policy.hidden_paths();
        if hidden.contains(&workspace) {
            return Err(SandboxError::HiddenWorkspace { workspace });
        }
        let read_only = read_only_roots(&workspace, &req.read_only, &hidden)?;
        Ok(HelperSpec {
            protocol: crate::linux::spec::HELPER_PROTOCOL,
            writable: writable_roots(&workspace, &self.policy.writable),
            read_only,
            workspace,
            cwd: req.cwd.clone(),
            hidden,
            network: self.policy.network,
            limits: self.policy.limits.clone(),
            cgroups: Vec::new(),
            proxy_socket,
            terminal: false,
            warm: false,
        })
    }

    /// The command's environment: the allowed variables of reef's own, `HOME` (the
    /// workspace), the proxy variables in `allowlist` mode, then the request's own; a later
    /// value of a name replaces an earlier one.
    pub(crate) fn command_env(&self, req: &ExecRequest) -> Vec<(OsString, OsString)> {
        let mut env = EnvList::default();
        for name in &self.policy.env_allow {
            if let Some(value) = std::env::var_os(name) {
                env.push((name.into(), value));
            }
        }
        env.push(("HOME".into(), req.workspace.clone().into_os_string()));
        if self.policy.backend != SandboxBackend::Plain
            && self.policy.network == NetworkMode::Allowlist
        {
            let url = format!("http://127.0.0.1:{}", spec::PROXY_PORT);
            for name in PROXY_VARS {
                env.push(((*name).into(), url.clone().into()));
            }
            env.push(("NO_PROXY".into(), "".into()));
            env.push(("no_proxy".into(), "".into()));
        }
        for (name, value) in &req.env {
            env.push((name.into(), value.into()));
        }
        env.0
    }
}

impl Sandbox {
    /// [`Sandbox::command_env`] as `NAME=value` entries, as a process receives them (for a
    /// command sent to a warm sandbox or a VM).
    pub(crate) fn command_env_entries(&self, req: &ExecRequest) -> Vec<Vec<u8>> {
        use std::os::unix::ffi::OsStrExt as _;
        self.command_env(req)
            .into_iter()
            .map(|(name, value)| {
                let mut entry = name.as_bytes().to_vec();
                entry.push(b'=');
                entry.extend_from_slice(value.as_bytes());
                entry
            })
            .collect()
    }
}

/// Variables in the order first set, each name once with its last value.
#[derive(Default)]
struct EnvList(Vec<(OsString, OsString)>);

impl EnvList {
    fn push(&mut self, (name, value): (OsString, OsString)) {
        match self.0.iter_mut().find(|(n, _)| *n == name) {
            Some(entry) => entry.1 = value,
            None => self.0.push((name, value)),
        }
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
    let mut policy = policy.clone();
    // One VM proves the microvm backend; a pool would boot more, only to stop them.
    policy.microvm.pool = 0;
    Sandbox::new(policy).self_test().await
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
