//! Errors from running a process in the sandbox.

use std::path::PathBuf;

/// Why a process could not be run (a process that ran and failed is not an error: see
/// [`crate::ExecOutput`]).
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// The program could not be started: check that it exists, is executable and is on PATH.
    #[error("could not start `{program}`: {source}")]
    Spawn {
        program: String,
        #[source]
        source: std::io::Error,
    },
    /// The workspace (or the start directory in it) does not exist or is not a directory;
    /// create it or pick another.
    #[error("working directory {} does not exist or is not a directory", cwd.display())]
    CwdMissing { cwd: PathBuf },
    /// The start directory must be a relative path of plain names inside the workspace.
    #[error(
        "the start directory {} must be relative to the workspace, without `.` or `..`",
        cwd.display()
    )]
    BadCwd { cwd: PathBuf },
    /// The workspace is itself a path the sandbox hides (it holds credentials, e.g. reef's
    /// home): run from another directory.
    #[error(
        "the workspace {} is a directory reef hides from agents (it holds credentials); run \
         from another directory",
        workspace.display()
    )]
    HiddenWorkspace { workspace: PathBuf },
    /// A read-only path of the request is, or holds, a path the sandbox hides: it cannot be
    /// shown to a command. Keep such folders elsewhere.
    #[error(
        "{} cannot be shown to a command: it is or holds a directory reef hides from agents",
        path.display()
    )]
    HiddenReadOnly { path: PathBuf },
    /// The landlock backend needs a helper program (`reef sandbox-exec`) and none is configured.
    #[error(
        "the landlock backend needs its helper program (reef sandbox-exec); none is configured"
    )]
    NoHelper,
    /// The policy asks for something this build cannot enforce; change the policy.
    #[error("unsupported sandbox policy: {0}")]
    Unsupported(String),
    /// The allow-list proxy for `network = allowlist` could not start (its socket lives in
    /// the system temporary directory: check that it exists and is writable).
    #[error("could not start the sandbox's network proxy: {0}")]
    Proxy(#[source] std::io::Error),
    /// The kernel backend could not be set up on this machine (the helper said why).
    #[error("the {backend} sandbox does not work on this machine: {reason}")]
    Unavailable {
        backend: &'static str,
        reason: String,
    },
    /// The session's warm sandbox failed around a command (it could not be placed in its
    /// cgroup, or the sandbox ended while it ran); its processes have been killed and the call
    /// may be retried, which starts a new warm sandbox.
    #[error("the session's warm sandbox failed: {0}")]
    Warm(String),
    /// The session's microVM failed around a command (it ended while the command ran, or
    /// stopped answering and was stopped); the command's processes are gone with it, and the
    /// call may be retried, which takes or boots another VM.
    #[error("the session's VM failed: {0}")]
    Vm(String),
    /// Waiting for or talking to the process failed; the process group has been killed and
    /// the call may be retried.
    #[error("i/o error while running `{program}`: {source}")]
    Io {
        program: String,
        #[source]
        source: std::io::Error,
    },
}
