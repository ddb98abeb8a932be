//! Exit codes of the `reef` command (documented in the README) and error classification.

/// The command did what was asked.
pub const OK: u8 = 0;
/// An unexpected runtime failure (I/O, store).
pub const RUNTIME: u8 = 1;
/// Bad usage or configuration: fix the command line or the config file.
pub const USAGE: u8 = 2;
/// The model provider failed (unreachable, auth, rejected request) and the turn could not finish,
/// or the message does not fit the model's context window even after compaction.
pub const MODEL: u8 = 3;
/// The turn stopped on a budget (maximum rounds or wall-clock time) before a final answer.
pub const BUDGET: u8 = 4;
/// Interrupted by Ctrl-C.
pub const INTERRUPTED: u8 = 130;

/// A typed error that chose its own exit code.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct Exit {
    pub code: u8,
    pub message: String,
}

impl Exit {
    /// A failure while doing what was asked (exit code 1).
    pub fn runtime(message: impl Into<String>) -> anyhow::Error {
        anyhow::Error::new(Exit {
            code: RUNTIME,
            message: message.into(),
        })
    }

    pub fn usage(message: impl Into<String>) -> anyhow::Error {
        anyhow::Error::new(Exit {
            code: USAGE,
            message: message.into(),
        })
    }
}

/// Chooses the exit code for an error that reached `main`.
pub fn classify(err: &anyhow::Error) -> u8 {
    for cause in err.chain() {
        if let Some(exit) = cause.downcast_ref::<Exit>() {
            return exit.code;
        }
        if cause.downcast_ref::<reef_config::ConfigError>().is_some() {
            return USAGE;
        }
        if cause.downcast_ref::<reef_core::ModelError>().is_some() {
            return MODEL;
        }
        if let Some(agent) = cause.downcast_ref::<reef_agent::AgentError>() {
            return match agent {
                reef_agent::AgentError::Model(_) | reef_agent::AgentError::Setup(_) => MODEL,
                reef_agent::AgentError::NoSuchSession(_)
                | reef_agent::AgentError::Workspace { .. } => USAGE,
                reef_agent::AgentError::Store(_)
                | reef_agent::AgentError::SandboxUnavailable { .. } => RUNTIME,
            };
        }
        if let Some(store) = cause.downcast_ref::<reef_store::StoreError>()
            && matches!(
                store,
                reef_store::StoreError::NotFound(_)
                    | reef_store::StoreError::Ambiguous { .. }
                    | reef_store::StoreError::Invalid { .. }
            )
        {
            return USAGE;
        }
    }
    RUNTIME
}
