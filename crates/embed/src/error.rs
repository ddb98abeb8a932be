//! Why a local embedding model could not be loaded or run.

use std::path::PathBuf;

/// A failure loading or running the local embedding model.
#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    /// A model file is missing: `reef models pull` fetches it.
    #[error("{path}: not found (run `reef models pull {model}`)")]
    Missing { path: PathBuf, model: String },
    /// A file is there but unreadable or malformed; pulling the model again replaces it.
    #[error("{path}: {message}")]
    BadFile { path: PathBuf, message: String },
    /// The forward pass failed (a bug or an out-of-memory); the texts were not embedded.
    #[error("embedding failed: {0}")]
    Compute(String),
}
