//! The project `reef.toml`: read without following links, and limited to keys that cannot
//! widen what tools may do or where credentials go, unless the user trusted the file.

use crate::error::ConfigError;
use crate::layers::{Layer, Origin};
use std::io::Read as _;
use std::path::Path;

/// The largest project file read.
pub(crate) const MAX_PROJECT_FILE: u64 = 1024 * 1024;

/// Key families a project file may set only when trusted: (prefix, shown as, why).
const RESTRICTED: [(&str, &str, &str); 21] = [
    (
        "prices",
        "prices.*",
        "it could price requests at nothing and defeat cost budgets",
    ),
    ("sandbox", "sandbox.*", "it could loosen the sandbox"),
    (
        "providers",
        "providers.*",
        "it could send your API keys and prompts to another server",
    ),
    (
        "secrets",
        "secrets.*",
        "it could hand your secrets to tools",
    ),
    (
        "vault",
        "vault.*",
        "it could unlock your vault with a key file it names",
    ),
    (
        "safety",
        "safety.*",
        "it could let credentials leave unchecked",
    ),
    (
        "approvals",
        "approvals.*",
        "it could let commands run without your approval",
    ),
    (
        "tools.http_allow_private",
        "tools.http_allow_private",
        "it could let tools reach private network addresses",
    ),
    (
        "models",
        "models.*",
        "it could change where models are downloaded from and loaded from",
    ),
    ("store", "store.*", "it could move the session store"),
    (
        "daemon",
        "daemon.*",
        "it could change where the daemon listens",
    ),
    (
        "gateway",
        "gateway.*",
        "it could open a door to your agents on the network",
    ),
    (
        "channels",
        "channels.*",
        "it could connect your agents to another server",
    ),
    (
        "operators",
        "operators.*",
        "it could let anyone run operator commands",
    ),
    (
        "hooks",
        "hooks.*",
        "it could let outside requests reach your agents",
    ),
    (
        "routines",
        "routines.*",
        "it could make your agents run tasks on a schedule, spending your budget",
    ),
    (
        "scheduler",
        "scheduler.*",
        "it could let routines fire every second",
    ),
    (
        "heartbeat",
        "heartbeat.*",
        "it could wake your agents on a schedule, spending your budget",
    ),
    ("jobs", "jobs.*", "it could fail every turn as stuck"),
    (
        "cluster",
        "cluster.*",
        "it could hand your agents' state and messages to another server",
    ),
    (
        "mcp",
        "mcp.*",
        "it could start programs and connect your agents to other servers",
    ),
];

/// A key a project file may not set without trust.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RestrictedKey {
    /// The dotted key, e.g. `sandbox.backend`.
    pub key: String,
    pub family: &'static str,
    pub reason: &'static str,
}

/// The keys of `table` that need trust in a project file, family by family.
pub(crate) fn restricted_keys(table: &toml::Table) -> Vec<RestrictedKey> {
    let mut out = Vec::new();
    for (prefix, family, reason) in RESTRICTED {
        let mut parts = prefix.split('.');
        let mut value = parts.next().and_then(|first| table.get(first));
        for part in parts {
            value = value.and_then(|v| v.as_table()).and_then(|t| t.get(part));
        }
        let mut keys = Vec::new();
        match value {
            // An empty `[sandbox]` header sets nothing.
            Some(toml::Value::Table(t)) => leaves(t, prefix, &mut keys),
            Some(_) => keys.push(prefix.to_owned()),
            None => {}
        }
        out.extend(keys.into_iter().map(|key| RestrictedKey {
            key,
            family,
            reason,
        }));
    }
    out
}

/// Dotted paths of the leaves under `table`; an empty sub-table counts as a leaf.
fn leaves(table: &toml::Table, prefix: &str, out: &mut Vec<String>) {
    for (key, value) in table {
        let path = format!("{prefix}.{key}");
        match value {
            toml::Value::Table(t) if !t.is_empty() => leaves(t, &path, out),
            _ => out.push(path),
        }
    }
}

/// Reads a project file: not through a link, only a regular file, at most 1 MiB.
/// `Ok(None)` when there is no file.
pub(crate) fn read(path: &Path) -> Result<Option<Vec<u8>>, ConfigError> {
    let not_read = |reason: String| ConfigError::NotRead {
        path: path.to_owned(),
        reason,
    };
    let mut file = match open_no_follow(path) {
        Ok(file) => file,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(err) if err.raw_os_error() == Some(libc::ELOOP) => {
            return Err(not_read(
                "it is a symbolic link (a project reef.toml must be a regular file)".into(),
            ));
        }
        Err(source) => {
            return Err(ConfigError::Read {
                path: path.to_owned(),
                source,
            });
        }
    };
    let read_err = |source| ConfigError::Read {
        path: path.to_owned(),
        source,
    };
    let meta = file.metadata().map_err(read_err)?;
    if !meta.file_type().is_file() {
        let kind = if meta.is_dir() {
            "a directory"
        } else {
            "a special file"
        };
        return Err(not_read(format!(
            "it is {kind}, not a regular file (a project reef.toml must be a regular file)"
        )));
    }
    let mut bytes = Vec::new();
    (&mut file)
        .take(MAX_PROJECT_FILE + 1)
        .read_to_end(&mut bytes)
        .map_err(read_err)?;
    if bytes.len() as u64 > MAX_PROJECT_FILE {
        return Err(not_read("it is larger than 1 MiB".into()));
    }
    Ok(Some(bytes))
}

#[cfg(unix)]
fn open_no_follow(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt as _;
    // O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused after fstat).
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
}

#[cfg(not(unix))]
fn open_no_follow(path: &Path) -> std::io::Result<std::fs::File> {
    if std::fs::symlink_metadata(path)?.file_type().is_symlink() {
        return Err(std::io::Error::other(
            "it is a symbolic link (a project reef.toml must be a regular file)",
        ));
    }
    std::fs::File::open(path)
}

/// Parses the bytes of a config file into a table, naming the file on failure.
pub(crate) fn parse(path: &Path, bytes: &[u8]) -> Result<toml::Table, ConfigError> {
    let syntax = |message: String| ConfigError::Syntax {
        path: path.to_owned(),
        message,
    };
    let text =
        std::str::from_utf8(bytes).map_err(|err| syntax(format!("not UTF-8 text ({err})")))?;
    text.parse::<toml::Table>()
        .map_err(|err| syntax(err.to_string().trim_end().to_owned()))
}

/// The project layer: the file's keys, refused unless allowed or the file is trusted.
pub(crate) fn layer(home: &Path, path: &Path) -> Result<Option<Layer>, ConfigError> {
    let Some(bytes) = read(path)? else {
        return Ok(None);
    };
    let table = parse(path, &bytes)?;
    crate::layers::validate(&table, &Origin::File(path.to_owned()))?;
    let restricted = restricted_keys(&table);
    let Some(first) = restricted.first() else {
        return Ok(Some(Layer {
            origin: Origin::File(path.to_owned()),
            table,
        }));
    };
    let digest = crate::trust::sha256_hex(&bytes);
    let location = crate::trust::canonical_location(path);
    match crate::trust::recorded_hash(home, &location)? {
        Some(recorded) if recorded == digest => Ok(Some(Layer {
            origin: Origin::TrustedFile(path.to_owned()),
            table,
        })),
        Some(_) => Err(ConfigError::TrustChanged {
            path: path.to_owned(),
            key: first.key.clone(),
            family: first.family,
            reason: first.reason,
        }),
        None => Err(ConfigError::ProjectKey {
            path: path.to_owned(),
            key: first.key.clone(),
            family: first.family,
            reason: first.reason,
        }),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "test code")]
    use super::*;

    fn keys(text: &str) -> Vec<String> {
        restricted_keys(&text.parse::<toml::Table>().unwrap())
            .into_iter()
            .map(|k| k.key)
            .collect()
    }

    #[test]
    fn only_restricted_families_are_reported() {
        assert!(keys("[agent]\nmax_rounds = 3\n[tools]\nshell_timeout_secs = 5\n").is_empty());
        assert!(keys("[sandbox]\n[model]\ndefault = \"main\"\n").is_empty());
        assert_eq!(keys("[sandbox]\nbackend = \"none\"\n"), ["sandbox.backend"]);
        assert_eq!(keys("[providers.x]\n"), ["providers.x"]);
        assert_eq!(
            keys("[tools]\nhttp_allow_private = false\n"),
            ["tools.http_allow_private"]
        );
        assert_eq!(keys("store = 3\n"), ["store"]);
    }
}
