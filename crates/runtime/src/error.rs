//! `RuntimeError`: what an operation of the daemon can fail with, each saying how to recover.

use reef_store::StoreError;

/// A failed daemon operation. The HTTP API maps each variant to a status code.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// The named agent, room or pending item does not exist; list them and check the name.
    #[error("{0}")]
    NotFound(String),
    /// An argument is invalid; the message names it and says what is expected.
    #[error("{field}: {message}")]
    Invalid { field: String, message: String },
    /// The request conflicts with the current state (name taken, already answered, an
    /// agent that cannot go to the requested state); read the state and retry differently.
    #[error("{0}")]
    Conflict(String),
    /// The caller may not do this (a capability it does not hold).
    #[error("denied: {0}")]
    Denied(String),
    /// The daemon is shutting down; retry against the next instance.
    #[error("the daemon is shutting down")]
    ShuttingDown,
    /// Reading or writing the store failed; usually transient.
    #[error(transparent)]
    Store(StoreError),
    /// This node cannot join the cluster (its database or NATS cannot be reached, or another
    /// live node has its name); the message says which.
    #[error(transparent)]
    Cluster(#[from] crate::cluster::JoinError),
    /// Setting up an agent's model, tools or session failed; fix the configuration.
    #[error("agent setup failed: {0}")]
    Setup(String),
}

impl RuntimeError {
    pub(crate) fn invalid(field: &str, message: impl Into<String>) -> RuntimeError {
        RuntimeError::Invalid {
            field: field.to_owned(),
            message: message.into(),
        }
    }
}

impl From<StoreError> for RuntimeError {
    fn from(err: StoreError) -> RuntimeError {
        match err {
            StoreError::NotFound(what) => RuntimeError::NotFound(format!("not found: {what}")),
            StoreError::Conflict(what) => RuntimeError::Conflict(what),
            StoreError::InvalidTransition(t) => RuntimeError::Conflict(t.to_string()),
            StoreError::Ambiguous { prefix, matches } => RuntimeError::invalid(
                "id",
                format!("`{prefix}` matches {matches} items; type more of the id"),
            ),
            other => RuntimeError::Store(other),
        }
    }
}
