//! Sandbox policy: which backend confines a process, what environment it inherits, how much
//! output is kept and how gently it is stopped.

use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Environment variables copied from reef's own environment into every child by default.
pub const DEFAULT_ENV_ALLOW: &[&str] = &[
    "PATH", "LANG", "LC_ALL", "TERM", "TZ", "USER", "LOGNAME", "SHELL",
];

/// How a child process is confined.
///
/// Only [`SandboxBackend::Plain`] exists today. Kernel-enforced backends (landlock file
/// access rules, user/mount namespaces, seccomp) will be added as further variants; callers
/// should pick a backend from [`crate::probe`] rather than assume one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SandboxBackend {
    /// No kernel confinement: scrubbed environment, own process group, working directory,
    /// timeout and output caps only. A landlock backend will be added later.
    #[default]
    Plain,
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
}

impl Default for SandboxPolicy {
    fn default() -> Self {
        Self {
            backend: SandboxBackend::Plain,
            env_allow: DEFAULT_ENV_ALLOW.iter().map(|s| (*s).to_owned()).collect(),
            max_output_bytes: 1024 * 1024,
            kill_grace: Duration::from_secs(2),
        }
    }
}
