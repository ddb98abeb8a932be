//! Shared helpers for the sandbox tests.

use reef_sandbox::{
    ExecRequest, HelperCommand, NetworkMode, Sandbox, SandboxBackend, SandboxPolicy,
};
use std::path::Path;
use std::time::Duration;

pub fn sandbox() -> Sandbox {
    Sandbox::new(SandboxPolicy {
        kill_grace: Duration::from_millis(200),
        ..SandboxPolicy::default()
    })
}

pub fn sh(command: &str, cwd: &Path) -> ExecRequest {
    ExecRequest::shell(command, cwd.to_path_buf(), Duration::from_secs(30))
}

/// Whether `pid` no longer runs: absent from /proc or a zombie awaiting its reaper.
pub fn is_gone(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .map(|(_, rest)| rest.trim_start().starts_with('Z'))
            .unwrap_or(false),
    }
}

/// Polls until `pid` is gone, for at most 10 s; returns whether it went.
pub async fn wait_gone(pid: i32) -> bool {
    for _ in 0..200 {
        if is_gone(pid) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

/// A policy for the kernel-enforced backend, using this crate's own helper binary; network
/// `none` and the default limits. Tests adjust fields with struct-update syntax.
pub fn confined_policy() -> SandboxPolicy {
    SandboxPolicy {
        backend: SandboxBackend::Landlock,
        network: NetworkMode::None,
        kill_grace: Duration::from_millis(200),
        helper: Some(HelperCommand {
            program: env!("CARGO_BIN_EXE_reef-sandbox-exec").into(),
            args: vec![],
        }),
        ..SandboxPolicy::default()
    }
}

/// Host pids (not zombies) whose command line contains `marker`.
pub fn processes_with(marker: &str) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|c| String::from_utf8_lossy(&c).contains(marker))
                .unwrap_or(false)
                && !is_gone(pid)
        })
        .collect()
}

/// Polls until no host process has `marker` in its command line, for at most 10 s; returns
/// the pids still running then (empty = all gone).
pub async fn wait_none_with(marker: &str) -> Vec<i32> {
    for _ in 0..200 {
        if processes_with(marker).is_empty() {
            return Vec::new();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    processes_with(marker)
}
