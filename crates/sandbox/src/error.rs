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
    /// The working directory does not exist or is not a directory; create it or pick another.
    #[error("working directory {} does not exist or is not a directory", cwd.display())]
    CwdMissing { cwd: PathBuf },
    /// Waiting for or talking to the process failed; the process group has been killed and
    /// the call may be retried.
    #[error("i/o error while running `{program}`: {source}")]
    Io {
        program: String,
        #[source]
        source: std::io::Error,
    },
}
