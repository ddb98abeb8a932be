//! Errors of the turn engine that end a turn or prevent a session from starting.

use reef_core::{ModelError, SessionId};

/// Why a session could not start or a turn had to stop.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The model kept failing; the turn ends as `Failed`. Retry later or fix the provider.
    #[error(transparent)]
    Model(#[from] ModelError),
    /// The transcript could not be written or read; fatal for the session (check the disk).
    #[error("store: {0}")]
    Store(#[from] reef_store::StoreError),
    /// `--session` named a session that does not exist.
    #[error("session {0} not found")]
    NoSuchSession(SessionId),
    /// The workspace directory is unusable.
    #[error("workspace {path}: {message}")]
    Workspace { path: String, message: String },
    /// The model client could not be built from config (bad base URL, TLS setup).
    #[error("model setup: {0}")]
    Setup(String),
    /// `sandbox.required` is set but the configured backend cannot confine tools on this
    /// machine; fatal. Fix the machine (see `reef sandbox status`) or unset `sandbox.required`.
    #[error(
        "the sandbox is required (sandbox.required = true) but the {backend} backend cannot \
         run here: {reason}"
    )]
    SandboxUnavailable { backend: String, reason: String },
}
