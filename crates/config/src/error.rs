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
