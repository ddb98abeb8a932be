//! Secrets by reference: where a secret's value lives, never the value itself. The
//! configuration produces these; the tools read the value only when a call needs it.

use std::path::PathBuf;

/// Where a secret's value is read from, at the moment a tool call needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SecretSource {
    /// A variable in reef's own environment (never passed to tools unless asked for).
    Env(String),
    /// A file whose content, without trailing newlines, is the value.
    File(PathBuf),
}

/// A secret tools may use: its name (also the environment variable the command sees), its
/// source, and what it is for (shown to the model next to the name).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SecretSpec {
    pub name: String,
    pub source: SecretSource,
    pub description: Option<String>,
}
