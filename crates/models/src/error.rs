//! `ModelsError`: what can go wrong fetching, verifying or removing a model, said so that the
//! user knows what to do next.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum ModelsError {
    #[error("unknown model `{name}`; known models: {known}")]
    Unknown { name: String, known: String },
    #[error("model `{0}` is not installed")]
    NotInstalled(String),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot create an HTTP client: {0}")]
    Http(String),
    /// Every source failed; each failure is listed.
    #[error("could not fetch `{name}` from any source:\n{}", .failures.iter().map(|f| format!("  - {f}")).collect::<Vec<_>>().join("\n"))]
    AllSourcesFailed {
        name: String,
        failures: Vec<SourceFailure>,
    },
}

/// Why one source failed.
#[derive(Debug, thiserror::Error)]
pub enum SourceFailure {
    #[error("{url}: {message}")]
    Fetch { url: String, message: String },
    #[error(
        "{what}: checksum mismatch: expected sha256 {expected}, got {actual} (the partial download was deleted)"
    )]
    Checksum {
        what: String,
        expected: String,
        actual: String,
    },
    #[error("{what}: {message}")]
    Archive { what: String, message: String },
    #[error("{0}")]
    Io(String),
}

impl ModelsError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        ModelsError::Io {
            path: path.into(),
            source,
        }
    }
}
