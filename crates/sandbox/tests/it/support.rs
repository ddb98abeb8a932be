//! Shared helpers for the sandbox tests.

use reef_sandbox::{ExecRequest, Sandbox, SandboxPolicy};
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
