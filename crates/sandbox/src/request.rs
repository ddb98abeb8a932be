//! What to run ([`ExecRequest`]) and what came of it ([`ExecOutput`]).

use std::path::PathBuf;
use std::time::Duration;

/// One process to run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExecRequest {
    /// Program name (looked up on the child's PATH) or path.
    pub program: String,
    pub args: Vec<String>,
    /// The directory the command works in and may write: the landlock backend mounts it
    /// (resolved once) read-write at its real path. Also the child's HOME.
    pub workspace: PathBuf,
    /// Where the command starts, relative to `workspace` (empty: the workspace itself). The
    /// landlock backend changes into it inside the sandbox, after the workspace is mounted,
    /// so a directory swapped for a link meanwhile can only lead somewhere the sandbox shows.
    pub cwd: PathBuf,
    /// Extra variables set explicitly, after the allowed inherited ones.
    pub env: Vec<(String, String)>,
    /// Wall-clock limit; on expiry the whole process group is stopped.
    pub timeout: Duration,
    /// Bytes fed to stdin; `None` connects stdin to /dev/null.
    pub stdin: Option<Vec<u8>>,
    /// Host directories the command may read (and run from) besides what the policy shows,
    /// bound read-only at their real paths even inside a hidden path: the folders of the
    /// skills an agent has. Those inside the workspace are visible already.
    pub read_only: Vec<PathBuf>,
}

impl ExecRequest {
    /// A request running `program args…` in `workspace`, with no extra env and no stdin.
    pub fn new(
        program: impl Into<String>,
        args: Vec<String>,
        workspace: PathBuf,
        timeout: Duration,
    ) -> Self {
        Self {
            program: program.into(),
            args,
            workspace,
            cwd: PathBuf::new(),
            env: Vec::new(),
            timeout,
            stdin: None,
            read_only: Vec::new(),
        }
    }

    /// A request running `/bin/sh -c command` in `workspace`.
    pub fn shell(command: &str, workspace: PathBuf, timeout: Duration) -> Self {
        Self::new(
            "/bin/sh",
            vec!["-c".to_owned(), command.to_owned()],
            workspace,
            timeout,
        )
    }

    /// The same request starting in `dir`, a path relative to the workspace made only of
    /// plain names (checked when it runs: see [`crate::SandboxError::BadCwd`]).
    pub fn in_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cwd = dir.into();
        self
    }

    /// `cwd` as plain names only: not absolute, no `.` or `..`.
    pub(crate) fn checked_cwd(&self) -> Result<&std::path::Path, crate::SandboxError> {
        let plain = self
            .cwd
            .components()
            .all(|c| matches!(c, std::path::Component::Normal(_)));
        if plain {
            Ok(&self.cwd)
        } else {
            Err(crate::SandboxError::BadCwd {
                cwd: self.cwd.clone(),
            })
        }
    }
}

/// What a finished (or stopped) process produced.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExecOutput {
    /// Captured stdout, decoded as lossy UTF-8.
    pub stdout: String,
    /// Captured stderr, decoded as lossy UTF-8.
    pub stderr: String,
    /// Exit code, if the process exited normally.
    pub exit_code: Option<i32>,
    /// Terminating signal, if the process was killed by one.
    pub signal: Option<i32>,
    /// The timeout expired and the process group was stopped.
    pub timed_out: bool,
    /// stdout exceeded the policy's `max_output_bytes`; the excess was discarded.
    pub stdout_truncated: bool,
    /// stderr exceeded the policy's `max_output_bytes`; the excess was discarded.
    pub stderr_truncated: bool,
    /// Wall-clock time from spawn to the end of output collection.
    pub duration: Duration,
}

impl ExecOutput {
    /// Whether the process exited normally with code 0.
    pub fn success(&self) -> bool {
        self.exit_code == Some(0) && !self.timed_out
    }
}
