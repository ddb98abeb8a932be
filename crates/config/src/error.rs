//! Configuration errors: each names where the bad value came from, the key, and what was expected.

use std::path::PathBuf;

/// A configuration problem. All are fatal for the command: fix the named file, variable or flag.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("config file {path} is not valid TOML: {message}")]
    Syntax { path: PathBuf, message: String },
    #[error("config error in {origin}: key `{key}`: {message}")]
    Invalid {
        origin: String,
        key: String,
        message: String,
    },
    /// A project `reef.toml` (the working directory's) sets a key that needs the user's trust.
    #[error(
        "config error in {path}: key `{key}`: a project reef.toml may not set {family} \
         ({reason}); run `reef trust` in this directory to allow it, or move it to \
         $REEF_HOME/reef.toml"
    )]
    ProjectKey {
        path: PathBuf,
        key: String,
        family: &'static str,
        reason: &'static str,
    },
    /// Like `ProjectKey`, but the file was trusted and its bytes changed since.
    #[error(
        "config error in {path}: key `{key}`: this project reef.toml changed since it was \
         trusted, and an untrusted project file may not set {family} ({reason}); review it and \
         run `reef trust` again in this directory to allow it"
    )]
    TrustChanged {
        path: PathBuf,
        key: String,
        family: &'static str,
        reason: &'static str,
    },
    /// A project `reef.toml` that is a link, not a regular file, or too large.
    #[error("config file {path} was not read: {reason}")]
    NotRead { path: PathBuf, reason: String },
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not a reef.toml: only a project's reef.toml can be trusted")]
    NotProjectFile { path: PathBuf },
    #[error("{path} is not trusted (see `reef trust --list`)")]
    NotTrusted { path: PathBuf },
    #[error("invalid -c override `{arg}`: {reason}")]
    Override { arg: String, reason: String },
    #[error("cannot find the reef home: set REEF_HOME or HOME")]
    NoHome,
    #[error(
        "no model provider is configured: add a [providers.NAME] table to {home}/reef.toml \
         (see `reef config show` and the README), or set REEF_BASE_URL and REEF_MODEL"
    )]
    NoProvider { home: PathBuf },
}
