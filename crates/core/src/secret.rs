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

/// What reef remembers of a secret value an agent's command was given, so that a later
/// session of the same agent still redacts it: never the value, only its length, a salted
/// SHA-256 of it and a 32-bit rolling hash that picks out candidate windows of an output
/// before the SHA-256 is checked (see `reef_security::fingerprint`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SecretFingerprint {
    /// The secret's name, shown in place of the value (`[secret NAME]`).
    pub name: String,
    /// Length of the value in bytes.
    pub len: usize,
    /// The value's rolling hash, truncated to 32 bits.
    pub probe: u32,
    /// Random bytes hashed before the value.
    pub salt: Vec<u8>,
    /// SHA-256 of `salt || value`.
    pub hash: Vec<u8>,
}
