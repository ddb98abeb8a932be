//! `LocalError`: what can go wrong loading or running a local model, and how it maps onto the
//! model error kinds every client reports.

use reef_core::{ModelError, ModelErrorKind};
use std::path::PathBuf;

#[derive(Debug, Clone, thiserror::Error)]
pub enum LocalError {
    #[error("model file {path} does not exist; fetch it with `reef models pull {name}`")]
    Missing { path: PathBuf, name: String },
    #[error("cannot load {path}: {message}")]
    Load { path: PathBuf, message: String },
    #[error("llama.cpp backend failed to start: {0}")]
    Backend(String),
    #[error("cannot render the chat template: {0}")]
    Template(String),
    #[error(
        "the prompt is {prompt_tokens} tokens, the context holds {context_tokens} (raise context_tokens or shorten the conversation)"
    )]
    ContextLength {
        prompt_tokens: usize,
        context_tokens: usize,
    },
    #[error("inference failed: {0}")]
    Decode(String),
    #[error("the inference thread has stopped")]
    Stopped,
    #[error("cancelled")]
    Cancelled,
}

impl LocalError {
    /// As a `ModelError` of `provider`.
    pub fn into_model_error(self, provider: &str) -> ModelError {
        let kind = match &self {
            LocalError::Missing { .. } => ModelErrorKind::NotFound,
            LocalError::Load { .. } | LocalError::Backend(_) | LocalError::Template(_) => {
                ModelErrorKind::BadRequest
            }
            LocalError::ContextLength { .. } => ModelErrorKind::ContextLength,
            LocalError::Decode(_) | LocalError::Stopped => ModelErrorKind::Server,
            LocalError::Cancelled => ModelErrorKind::Cancelled,
        };
        ModelError::new(provider, kind, self.to_string())
    }
}
