//! Trusted project files (`reef trust`): each file's canonical path and the SHA-256 of its
//! exact bytes, kept in `$REEF_HOME/trusted.toml`. A trusted file whose bytes changed is
//! untrusted again.

use crate::error::ConfigError;
use serde::{Deserialize, Serialize};
use sha2::Digest as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};

/// The file in `$REEF_HOME` that lists the trusted project files.
pub const TRUST_FILE: &str = "trusted.toml";

/// One trusted file, as `reef trust --list` shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TrustedFile {
    /// The canonical path recorded by `reef trust`.
    pub path: PathBuf,
    /// The SHA-256 (hex) of the bytes that were trusted.
    pub sha256: String,
    pub status: TrustStatus,
}

/// Whether a trusted file still holds the bytes that were trusted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TrustStatus {
    /// Same bytes: its keys apply.
    Unchanged,
    /// Different bytes: untrusted until `reef trust` is run again.
    Changed,
    /// The file is gone.
    Missing,
    /// The file cannot be read (a link, not a regular file, too large, no permission).
    Unreadable(String),
}

impl TrustStatus {
    /// One word: `unchanged`, `changed`, `missing` or `unreadable`.
    pub fn as_str(&self) -> &'static str {
        match self {
            TrustStatus::Unchanged => "unchanged",
            TrustStatus::Changed => "changed",
            TrustStatus::Missing => "missing",
            TrustStatus::Unreadable(_) => "unreadable",
        }
    }
}

/// What `reef trust` recorded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Trusted {
    pub path: PathBuf,
    pub sha256: String,
    /// The keys the file sets that a project file may set only when trusted.
    pub restricted_keys: Vec<String>,
    /// The file was trusted before, with these same bytes.
    pub already: bool,
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct TrustToml {
    #[serde(default)]
    trusted: Vec<Entry>,
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    path: PathBuf,
    sha256: String,
}

/// The hex SHA-256 of `bytes`.
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Where a file lives, independent of how it was named: its directory canonicalized (links
/// resolved), then its own name (the file itself is never followed). Falls back to the path
/// as given when the directory cannot be resolved.
pub(crate) fn canonical_location(path: &Path) -> PathBuf {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return path.to_owned();
    };
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    match std::fs::canonicalize(dir) {
        Ok(dir) => dir.join(name),
        Err(_) => path.to_owned(),
    }
}

/// The hash recorded for the file at `location` (a `canonical_location`), if it is trusted.
pub(crate) fn recorded_hash(home: &Path, location: &Path) -> Result<Option<String>, ConfigError> {
    Ok(load(home)?
        .trusted
        .into_iter()
        .find(|e| e.path == location)
        .map(|e| e.sha256))
}

/// `PATH`, or `PATH/reef.toml` when PATH is a directory.
fn target(path: &Path) -> PathBuf {
    if path.is_dir() {
        path.join(crate::CONFIG_FILE)
    } else {
        path.to_owned()
    }
}

/// Trusts the project file at `path` (or `path/reef.toml` for a directory) as its bytes are
/// now: they are read once (never through a link), checked, hashed and recorded.
pub fn trust(home: &Path, path: &Path) -> Result<Trusted, ConfigError> {
    let file = target(path);
    if file.file_name() != Some(std::ffi::OsStr::new(crate::CONFIG_FILE)) {
        return Err(ConfigError::NotProjectFile { path: file });
    }
    let location = canonical_location(&file);
    let bytes = crate::project::read(&location)?.ok_or_else(|| ConfigError::Read {
        path: location.clone(),
        source: std::io::ErrorKind::NotFound.into(),
    })?;
    let table = crate::project::parse(&location, &bytes)?;
    crate::layers::validate(&table, &crate::layers::Origin::File(location.clone()))?;
    let sha256 = sha256_hex(&bytes);
    let mut store = load(home)?;
    let already = store
        .trusted
        .iter()
        .any(|e| e.path == location && e.sha256 == sha256);
    store.trusted.retain(|e| e.path != location);
    store.trusted.push(Entry {
        path: location.clone(),
        sha256: sha256.clone(),
    });
    store.trusted.sort_by(|a, b| a.path.cmp(&b.path));
    save(home, &store)?;
    Ok(Trusted {
        path: location,
        sha256,
        restricted_keys: crate::project::restricted_keys(&table)
            .into_iter()
            .map(|k| k.key)
            .collect(),
        already,
    })
}

/// Every trusted file and whether it is unchanged, sorted by path.
pub fn trusted_files(home: &Path) -> Result<Vec<TrustedFile>, ConfigError> {
    Ok(load(home)?
        .trusted
        .into_iter()
        .map(|e| {
            let status = match crate::project::read(&e.path) {
                Ok(Some(bytes)) if sha256_hex(&bytes) == e.sha256 => TrustStatus::Unchanged,
                Ok(Some(_)) => TrustStatus::Changed,
                Ok(None) => TrustStatus::Missing,
                Err(err) => TrustStatus::Unreadable(err.to_string()),
            };
            TrustedFile {
                path: e.path,
                sha256: e.sha256,
                status,
            }
        })
        .collect())
}

/// Forgets the trusted file at `path` (or `path/reef.toml`); returns the path it was
/// recorded under. The file need not exist any more.
pub fn untrust(home: &Path, path: &Path) -> Result<PathBuf, ConfigError> {
    let file = target(path);
    let location = canonical_location(&file);
    let mut store = load(home)?;
    let removed = store
        .trusted
        .iter()
        .find(|e| e.path == location || e.path == file)
        .map(|e| e.path.clone())
        .ok_or(ConfigError::NotTrusted { path: location })?;
    store.trusted.retain(|e| e.path != removed);
    save(home, &store)?;
    Ok(removed)
}

fn load(home: &Path) -> Result<TrustToml, ConfigError> {
    let path = home.join(TRUST_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(TrustToml::default()),
        Err(source) => return Err(ConfigError::Read { path, source }),
    };
    toml::from_str(&text).map_err(|err| ConfigError::Syntax {
        path,
        message: err.to_string().trim_end().to_owned(),
    })
}

/// Writes the list atomically (a temporary file renamed over it), mode 0600, creating the
/// home (mode 0700) if needed.
fn save(home: &Path, store: &TrustToml) -> Result<(), ConfigError> {
    let path = home.join(TRUST_FILE);
    let write_err = |source| ConfigError::Write {
        path: path.clone(),
        source,
    };
    create_private_dir(home).map_err(|source| ConfigError::Write {
        path: home.to_owned(),
        source,
    })?;
    let body = toml::to_string(store).map_err(|err| write_err(std::io::Error::other(err)))?;
    let text = format!(
        "# Project reef.toml files trusted by `reef trust`: the canonical path and the SHA-256\n\
         # of the exact bytes trusted. A file whose bytes changed is untrusted again.\n\n{body}"
    );
    // tempfile creates the file with mode 0600.
    let mut tmp = tempfile::Builder::new()
        .prefix(".trusted.")
        .suffix(".tmp")
        .tempfile_in(home)
        .map_err(write_err)?;
    tmp.write_all(text.as_bytes()).map_err(write_err)?;
    tmp.as_file().sync_all().map_err(write_err)?;
    tmp.persist(&path).map_err(|err| write_err(err.error))?;
    Ok(())
}

#[cfg(unix)]
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt as _;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

#[cfg(not(unix))]
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_is_lowercase_hex() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
