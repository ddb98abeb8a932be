//! The `microvm` backend: each session runs its commands in a virtual machine of its own, a
//! kernel boundary rather than namespaces of the host's kernel. QEMU's `microvm` machine boots
//! a checked guest image (`image`) directly, under KVM where it is usable and software
//! emulation elsewhere (`accel`); the workspace is shared over 9p and mounted at its own path
//! inside, with reef's read-only files and hidden paths layered over it by the guest's agent,
//! which runs every command in a process group of its own without the capabilities to undo
//! those layers (`reef_vm_agent`). A pool keeps VMs booted ahead of need (`pool`). A VM that is
//! gone before a command reached it is replaced and the command sent once more; one that ends
//! under a command fails it.

mod accel;
mod image;
mod net;
mod pool;
mod qemu;
mod snapshot;
mod vm;

pub use accel::{Acceleration, choose_acceleration};
pub use pool::{HandOut, PoolStats};

use crate::error::SandboxError;
use crate::hidden::READ_ONLY_IN_WORKSPACE;
use crate::policy::NetworkMode;
use crate::request::{ExecOutput, ExecRequest};
use crate::runner::Sandbox;
use image::GuestImage;
use pool::VmPool;
use qemu::{Launch, VmKey};
use reef_vm_agent::protocol::{
    CommandLimits, GuestMessage, HostMessage, Layer, LayerKind, RunCommand,
};
use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};
use vm::{Vm, VmFailure};

/// How long past a command's own timeout and grace the guest may take to report its end
/// before the VM counts as hung.
const ANSWER_SLACK: Duration = Duration::from_secs(30);

/// A session's VMs: its pool (created, and the image checked, at first use) and the VM its
/// commands run in.
#[derive(Default)]
pub(crate) struct Session {
    pool: OnceLock<Result<Arc<VmPool>, String>>,
    current: tokio::sync::Mutex<Option<Arc<Vm>>>,
    last: std::sync::Mutex<Option<CurrentVm>>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session").finish_non_exhaustive()
    }
}

/// The VM a session's commands run in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct CurrentVm {
    /// How it was obtained.
    pub handed_out: HandOut,
    /// Its boot, from QEMU's start to the agent's first answer.
    pub boot: Duration,
    /// QEMU's process id.
    pub qemu_pid: Option<u32>,
}

/// What a session's microVMs look like from outside.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct MicrovmStatus {
    pub acceleration: Acceleration,
    pub pool: PoolStats,
    /// The VM the session's commands run in (the last one taken).
    pub current: Option<CurrentVm>,
}

impl Sandbox {
    /// The session's pool, created at first use (the guest image is checked then).
    fn vm_pool(&self) -> Result<Arc<VmPool>, SandboxError> {
        let settings = &self.policy().microvm;
        self.microvm
            .pool
            .get_or_init(|| {
                let image = GuestImage::open(&settings.image)?;
                let (acceleration, _why) = choose_acceleration(settings.accelerator)?;
                Ok(VmPool::new(
                    Launch {
                        qemu: settings.qemu.clone(),
                        image,
                        acceleration,
                        memory_mib: settings.memory_mib,
                        cpus: settings.cpus,
                        tsc_khz: accel::tsc_khz(),
                    },
                    settings.pool,
                    settings.snapshots,
                ))
            })
            .clone()
            .map_err(|reason| SandboxError::Unavailable {
                backend: "microvm",
                reason,
            })
    }

    /// The session's microVMs: `None` before the first VM was asked for (or with another
    /// backend).
    pub fn microvm_status(&self) -> Option<MicrovmStatus> {
        let pool = self.microvm.pool.get()?.as_ref().ok()?;
        let current = *self
            .microvm
            .last
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        Some(MicrovmStatus {
            acceleration: pool.launch().acceleration,
            pool: pool.stats(),
            current,
        })
    }

    /// Starts booting the pool's VMs for commands in `workspace`, so that the session's first
    /// command finds one ready. Does nothing for other backends or with `pool = 0`.
    pub fn prepare(&self, workspace: &Path) -> Result<(), SandboxError> {
        if self.policy().backend != crate::SandboxBackend::Microvm {
            return Ok(());
        }
        let req = ExecRequest::new("true", Vec::new(), workspace.to_path_buf(), Duration::ZERO);
        let key = self.vm_key(&req)?;
        self.vm_pool()?.fill(&key);
        Ok(())
    }

    fn vm_key(&self, req: &ExecRequest) -> Result<VmKey, SandboxError> {
        let spec = self.helper_spec(req)?;
        Ok(VmKey {
            workspace: spec.workspace,
            read_only: spec.read_only,
            network: spec.network,
        })
    }

    /// Runs `req` in the session's VM.
    pub(crate) async fn run_microvm(&self, req: ExecRequest) -> Result<ExecOutput, SandboxError> {
        let start = Instant::now();
        let key = self.vm_key(&req)?;
        let pool = self.vm_pool()?;
        let command = self.vm_command(&req, &key);
        let deadline = req.timeout + self.policy().kill_grace + ANSWER_SLACK;
        let mut retried = false;
        loop {
            let vm = self.session_vm(&pool, &key).await?;
            let running = vm.request(
                |id| HostMessage::Run {
                    id,
                    command: command.clone(),
                },
                Some(|id| HostMessage::Cancel { id }),
            );
            let answer = match tokio::time::timeout(deadline, running).await {
                Ok(answer) => answer,
                Err(_) => {
                    self.forget_vm(&vm).await;
                    return Err(SandboxError::Vm(format!(
                        "the VM did not report the command's end within {deadline:?}; it was \
                         stopped"
                    )));
                }
            };
            match answer {
                Ok(GuestMessage::Exited { exited: e, .. }) => {
                    return Ok(ExecOutput {
                        stdout: String::from_utf8_lossy(&e.stdout).into_owned(),
                        stderr: String::from_utf8_lossy(&e.stderr).into_owned(),
                        exit_code: e.code,
                        signal: e.signal,
                        timed_out: e.timed_out,
                        stdout_truncated: e.stdout_truncated,
                        stderr_truncated: e.stderr_truncated,
                        duration: start.elapsed(),
                    });
                }
                Ok(GuestMessage::SpawnFailed { errno, .. }) => {
                    return Err(SandboxError::Spawn {
                        program: req.program.clone(),
                        source: std::io::Error::from_raw_os_error(errno),
                    });
                }
                Ok(other) => {
                    self.forget_vm(&vm).await;
                    return Err(SandboxError::Vm(format!(
                        "the VM's agent answered a command with {other:?}"
                    )));
                }
                Err(VmFailure::Gone(why)) if !retried => {
                    tracing::warn!(%why, "the session's VM is gone; taking another");
                    self.forget_vm(&vm).await;
                    retried = true;
                }
                Err(VmFailure::Gone(why)) => return Err(SandboxError::Vm(why)),
                Err(VmFailure::Ended(why)) => {
                    self.forget_vm(&vm).await;
                    return Err(SandboxError::Vm(format!(
                        "{why}; the guest's console: {}",
                        vm.console()
                    )));
                }
            }
        }
    }

    /// The command as the guest runs it: at the same paths, with the same environment and
    /// limits as the other backends give it.
    fn vm_command(&self, req: &ExecRequest, key: &VmKey) -> RunCommand {
        let policy = self.policy();
        let env = self.command_env_entries(req);
        RunCommand {
            program: req.program.as_bytes().to_vec(),
            args: req.args.iter().map(|a| a.as_bytes().to_vec()).collect(),
            env,
            cwd: key.workspace.join(&req.cwd).as_os_str().as_bytes().to_vec(),
            stdin: req.stdin.clone(),
            timeout_ms: duration_ms(req.timeout),
            kill_grace_ms: duration_ms(policy.kill_grace),
            max_output: policy.max_output_bytes as u64,
            limits: CommandLimits {
                cpu_secs: policy.limits.cpu_secs,
                address_space_bytes: policy.limits.memory_bytes,
                processes: policy.limits.max_processes,
                file_size_bytes: policy.limits.file_size_bytes,
                open_files: policy.limits.open_files,
            },
        }
    }

    /// The session's VM for `key`: the current one, or one from the pool with its shares
    /// mounted.
    async fn session_vm(&self, pool: &Arc<VmPool>, key: &VmKey) -> Result<Arc<Vm>, SandboxError> {
        let mut current = self.microvm.current.lock().await;
        if let Some(vm) = current.as_ref()
            && vm.key == *key
            && vm.alive()
        {
            return Ok(Arc::clone(vm));
        }
        self.count_spawn();
        let (vm, how) = pool.take(key).await?;
        let vm = Arc::new(vm);
        self.mount_shares(&vm).await?;
        *self
            .microvm
            .last
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(CurrentVm {
            handed_out: how,
            boot: vm.boot_took,
            qemu_pid: vm.pid(),
        });
        *current = Some(Arc::clone(&vm));
        Ok(vm)
    }

    /// Mounts the workspace (with its layers) and the read-only folders in a VM just handed
    /// out.
    async fn mount_shares(&self, vm: &Vm) -> Result<(), SandboxError> {
        let key = vm.key.clone();
        let layers = self.workspace_layers(&key.workspace);
        vm.mounted
            .get_or_try_init(|| async {
                // The host's system directories first: a workspace beneath one still shows.
                let mut mounts: Vec<_> = qemu::system_shares()
                    .into_iter()
                    .map(|(tag, path)| (tag.to_owned(), path.to_path_buf(), true, self.masks(path)))
                    .collect();
                mounts.push((
                    qemu::WORKSPACE_TAG.to_owned(),
                    key.workspace.clone(),
                    false,
                    layers,
                ));
                for (i, path) in key.read_only.iter().enumerate() {
                    mounts.push((qemu::read_only_tag(i), path.clone(), true, Vec::new()));
                }
                if key.network == NetworkMode::Allowlist {
                    self.connect_proxy(vm).await?;
                }
                for (tag, path, read_only, layers) in mounts {
                    let answer = vm
                        .request(
                            |id| HostMessage::Mount {
                                id,
                                tag: tag.clone(),
                                path: path.as_os_str().as_bytes().to_vec(),
                                read_only,
                                layers,
                            },
                            None,
                        )
                        .await;
                    match answer {
                        Ok(GuestMessage::Done { error, .. }) if error.is_empty() => {}
                        Ok(GuestMessage::Done { error, .. }) => {
                            return Err(SandboxError::Vm(format!(
                                "the VM could not mount {}: {error}",
                                path.display()
                            )));
                        }
                        Ok(other) => {
                            return Err(SandboxError::Vm(format!(
                                "the VM's agent answered a mount with {other:?}"
                            )));
                        }
                        Err(VmFailure::Gone(why) | VmFailure::Ended(why)) => {
                            return Err(SandboxError::Vm(why));
                        }
                    }
                }
                Ok(())
            })
            .await
            .map(drop)
    }

    /// Joins an `allowlist` VM's network port to the session's proxy, and has the guest listen
    /// for its commands' connections.
    async fn connect_proxy(&self, vm: &Vm) -> Result<(), SandboxError> {
        let proxy = self.proxy_socket()?;
        let task = tokio::spawn(net::serve(vm.net_socket(), proxy));
        *vm.net
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(task);
        match vm.request(|id| HostMessage::Proxy { id }, None).await {
            Ok(GuestMessage::Done { error, .. }) if error.is_empty() => Ok(()),
            Ok(GuestMessage::Done { error, .. }) => Err(SandboxError::Vm(format!(
                "the VM could not start its proxy listener: {error}"
            ))),
            Ok(other) => Err(SandboxError::Vm(format!(
                "the VM's agent answered Proxy with {other:?}"
            ))),
            Err(VmFailure::Gone(why) | VmFailure::Ended(why)) => Err(SandboxError::Vm(why)),
        }
    }

    /// What the guest layers over the workspace: `.git` pinned, reef's read-only files made
    /// read-only, hidden paths inside it masked (relative paths; missing ones are skipped
    /// inside).
    fn workspace_layers(&self, workspace: &Path) -> Vec<Layer> {
        let mut layers = vec![Layer {
            kind: LayerKind::Pin,
            path: b".git".to_vec(),
        }];
        for path in READ_ONLY_IN_WORKSPACE {
            layers.push(Layer {
                kind: LayerKind::ReadOnly,
                path: path.as_bytes().to_vec(),
            });
        }
        layers.extend(self.masks(workspace));
        layers
    }

    /// Masks over the hidden paths strictly inside `base` (relative paths).
    fn masks(&self, base: &Path) -> Vec<Layer> {
        self.policy()
            .hidden_paths()
            .iter()
            .filter_map(|hidden| hidden.strip_prefix(base).ok())
            .filter(|inside| !inside.as_os_str().is_empty())
            .map(|inside| Layer {
                kind: LayerKind::Mask,
                path: inside.as_os_str().as_bytes().to_vec(),
            })
            .collect()
    }

    /// Drops the session's VM if it is `vm` (it is stopped once no command holds it).
    async fn forget_vm(&self, vm: &Arc<Vm>) {
        let mut current = self.microvm.current.lock().await;
        if current.as_ref().is_some_and(|c| Arc::ptr_eq(c, vm)) {
            *current = None;
        }
    }
}

fn duration_ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
