//! Sandbox policy: which backend confines a process, what it may see and reach, its resource
//! limits, what environment it inherits, how much output is kept and how it is stopped.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::Duration;

/// Environment variables copied from reef's own environment into every child by default.
pub const DEFAULT_ENV_ALLOW: &[&str] = &[
    "PATH", "LANG", "LC_ALL", "TERM", "TZ", "USER", "LOGNAME", "SHELL",
];

/// How a child process is confined.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SandboxBackend {
    /// No kernel confinement (config name `none`): scrubbed environment, own process group,
    /// timeout and output caps only. Used only when configured, with a warning.
    #[serde(rename = "none")]
    Plain,
    /// Kernel-enforced: new user, mount, pid, ipc, uts and network namespaces; a filesystem
    /// view where only the workspace is writable; Landlock; seccomp; rlimits and a cgroup.
    /// Applied by a re-executed helper (`HelperCommand`), so reef itself is never confined.
    #[default]
    Landlock,
    /// A lightweight virtual machine per session (QEMU's `microvm` machine, under KVM where
    /// it is usable and software emulation elsewhere): a kernel of its own, the workspace
    /// shared in over 9p, commands run by an agent inside. See [`MicrovmSettings`].
    Microvm,
}

impl SandboxBackend {
    pub fn as_str(self) -> &'static str {
        match self {
            SandboxBackend::Plain => "none",
            SandboxBackend::Landlock => "landlock",
            SandboxBackend::Microvm => "microvm",
        }
    }
}

/// What a sandboxed process may reach on the network.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NetworkMode {
    /// An empty network namespace: no TCP, UDP or DNS; only unix sockets.
    #[default]
    None,
    /// Only HTTP/HTTPS through a host-side proxy that enforces `allow_domains` and logs.
    Allowlist,
    /// The host's network.
    Full,
}

/// Resource limits of one sandboxed command (its whole process tree). `None` = no limit.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// CPU seconds (RLIMIT_CPU).
    pub cpu_secs: Option<u64>,
    /// Address space per process in bytes (RLIMIT_AS) and memory of the tree (cgroup).
    pub memory_bytes: Option<u64>,
    /// Processes in the tree (cgroup pids controller; RLIMIT_NPROC where it applies).
    pub max_processes: Option<u64>,
    /// Largest file a process may write, in bytes (RLIMIT_FSIZE).
    pub file_size_bytes: Option<u64>,
    /// Open file descriptors per process (RLIMIT_NOFILE).
    pub open_files: Option<u64>,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            cpu_secs: Some(300),
            memory_bytes: Some(2 * 1024 * 1024 * 1024),
            max_processes: Some(256),
            file_size_bytes: Some(1024 * 1024 * 1024),
            open_files: Some(1024),
        }
    }
}

/// Which virtualisation the microVM backend uses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Accelerator {
    /// KVM when this machine offers a usable one, else software emulation.
    #[default]
    Auto,
    /// KVM, or refuse to start a VM.
    Kvm,
    /// Software emulation (QEMU's TCG), even where KVM works: slow, but available anywhere.
    Tcg,
}

/// The microVM backend's settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MicrovmSettings {
    /// The QEMU program (looked up on `PATH` when it has no `/`).
    pub qemu: PathBuf,
    /// The guest image's directory: `vmlinux`, `initramfs.cpio` and their `SHA256SUMS`
    /// (built by `scripts/microvm-image`), checked before VMs boot from it.
    pub image: PathBuf,
    /// Each VM's memory, in MiB: what its commands can use together, at most.
    pub memory_mib: u32,
    pub cpus: u32,
    /// VMs kept booted ahead of need per workspace a session uses (0: boot on demand).
    pub pool: usize,
    /// With a pool, save the first booted VM and restore later ones from it instead of
    /// booting them.
    pub snapshots: bool,
    pub accelerator: Accelerator,
}

impl Default for MicrovmSettings {
    fn default() -> Self {
        Self {
            qemu: PathBuf::from("qemu-system-x86_64"),
            image: PathBuf::new(),
            memory_mib: 512,
            cpus: 1,
            pool: 1,
            snapshots: true,
            accelerator: Accelerator::Auto,
        }
    }
}

/// How to start the helper that applies a kernel backend: a program and leading arguments,
/// e.g. the `reef` binary with `sandbox-exec`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HelperCommand {
    pub program: PathBuf,
    pub args: Vec<String>,
}

/// How the sandbox runs every process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SandboxPolicy {
    pub backend: SandboxBackend,
    /// Names of variables inherited from reef's environment; everything else is dropped.
    pub env_allow: Vec<String>,
    /// Bytes kept per output stream (stdout and stderr each); the rest is read and discarded.
    pub max_output_bytes: usize,
    /// On timeout the process group gets SIGTERM, then SIGKILL after this grace period.
    pub kill_grace: Duration,
    pub network: NetworkMode,
    /// Domains reachable in `NetworkMode::Allowlist` (exact names or `*.suffix`).
    pub allow_domains: Vec<String>,
    /// Writable paths besides the working directory (which is always writable).
    pub writable: Vec<PathBuf>,
    /// Host paths never shown to a command (on top of the system secrets the sandbox always
    /// hides): the user's credential directories ([`crate::home_secrets`]), reef's home, its
    /// store, secret files. A workspace inside one of them stays visible, and nothing else of
    /// it does.
    pub hidden: Vec<PathBuf>,
    pub limits: Limits,
    /// The helper for kernel backends; `None` makes `Landlock` runs fail with a clear error.
    pub helper: Option<HelperCommand>,
    /// With the landlock backend, [`crate::Sandbox::run`] forks each command from a warm
    /// sandbox built once per session (and per workspace and read-only folders) instead of
    /// building a sandbox per command. Long-running processes and terminals always get one
    /// of their own.
    pub warm: bool,
    /// The `microvm` backend's settings (unused by the others).
    pub microvm: MicrovmSettings,
}

impl SandboxPolicy {
    /// Every path this policy hides, system secrets included, each with the real path it leads
    /// to when it is a link. reef's own file tools refuse the same paths
    /// (only those strictly inside a workspace count there, as in the sandbox).
    pub fn hidden_paths(&self) -> Vec<PathBuf> {
        crate::hidden::resolve(&self.hidden)
    }
}

impl Default for SandboxPolicy {
    fn default() -> Self {
        Self {
            backend: SandboxBackend::Plain,
            env_allow: DEFAULT_ENV_ALLOW.iter().map(|s| (*s).to_owned()).collect(),
            max_output_bytes: 1024 * 1024,
            kill_grace: Duration::from_secs(2),
            network: NetworkMode::None,
            allow_domains: Vec::new(),
            writable: Vec::new(),
            hidden: Vec::new(),
            limits: Limits::default(),
            helper: None,
            warm: true,
            microvm: MicrovmSettings::default(),
        }
    }
}
