//! Integrity of installed skills: each file and the whole folder hashed with BLAKE3 into
//! `$REEF_HOME/skills.lock`, and a skill whose files changed since then refused until accepted.

use crate::error::SkillError;
use crate::folder::{FileEntry, MAX_FILE, SkillDir};
use reef_workspace::Kind;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// The lock file's name in reef's home.
pub const LOCK_FILE: &str = "skills.lock";

/// The hashes of one folder: every file's, and the folder's (over paths, kinds and file hashes).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FolderHash {
    /// Hex BLAKE3 of the whole folder.
    pub hash: String,
    /// Hex BLAKE3 of each file, by path inside the folder; folders are listed as `"dir"`.
    pub files: BTreeMap<String, String>,
}

/// What the lock knows of one installed skill.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockEntry {
    /// Where it was installed from: a path or a git URL.
    pub source: String,
    /// The revision asked for (`#REV`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rev: Option<String>,
    /// The commit it came from, for git sources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    /// The folder inside the source (empty: the source is the skill).
    #[serde(default)]
    pub subdir: String,
    /// RFC 3339 time of install or last accept.
    pub installed_at: String,
    #[serde(flatten)]
    pub hashes: FolderHash,
}

/// `skills.lock`: installed skills by name.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lock {
    #[serde(default)]
    pub skills: BTreeMap<String, LockEntry>,
}

impl Lock {
    /// Reads the lock at `path` (an absent file is an empty lock).
    pub fn read(path: &Path) -> Result<Lock, SkillError> {
        match std::fs::read_to_string(path) {
            Ok(text) => toml::from_str(&text).map_err(|e| SkillError::Lock {
                path: path.to_path_buf(),
                reason: e.to_string(),
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Lock::default()),
            Err(e) => Err(SkillError::io(path, e)),
        }
    }

    /// Writes the lock to `path` atomically (a temporary file renamed over it).
    pub fn write(&self, path: &Path) -> Result<(), SkillError> {
        let text = toml::to_string_pretty(self).map_err(|e| SkillError::Lock {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
        let text = format!(
            "# Installed skills and the BLAKE3 hashes of their files. Written by `reef skills`;\n\
             # a skill whose files no longer match is refused until `reef skills verify --accept`.\n\n{text}"
        );
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let tmp = path.with_extension(format!("lock.{}-{stamp}.tmp", std::process::id()));
        std::fs::write(&tmp, text).map_err(|e| SkillError::io(&tmp, e))?;
        std::fs::rename(&tmp, path).map_err(|e| SkillError::io(path, e))
    }
}

/// Hashes every file of `dir` (read without following links; a link is hashed as what it
/// says, so replacing a file by a link changes the hash).
pub fn hash_folder(dir: &SkillDir) -> Result<FolderHash, String> {
    let entries = dir.entries()?;
    hash_entries(dir, &entries)
}

pub(crate) fn hash_entries(dir: &SkillDir, entries: &[FileEntry]) -> Result<FolderHash, String> {
    let mut whole = blake3::Hasher::new();
    let mut files = BTreeMap::new();
    for entry in entries {
        let digest = match entry.kind {
            Kind::Dir => "dir".to_owned(),
            Kind::File => {
                let bytes = dir.read(&entry.path, MAX_FILE)?;
                blake3::hash(&bytes).to_hex().to_string()
            }
            Kind::Symlink => "link".to_owned(),
            Kind::Other => "special".to_owned(),
        };
        whole.update(entry.path.as_bytes());
        whole.update(b"\0");
        whole.update(digest.as_bytes());
        whole.update(b"\n");
        files.insert(entry.path.clone(), digest);
    }
    Ok(FolderHash {
        hash: whole.finalize().to_hex().to_string(),
        files,
    })
}

/// How one path of a skill differs from what the lock says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChangeKind {
    Added,
    Changed,
    Removed,
}

/// One path that differs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    pub path: String,
    pub kind: ChangeKind,
}

impl std::fmt::Display for Change {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self.kind {
            ChangeKind::Added => "added",
            ChangeKind::Changed => "changed",
            ChangeKind::Removed => "removed",
        };
        write!(f, "{} ({kind})", self.path)
    }
}

/// What differs between the locked hashes and the folder now, in path order.
pub fn changed_files(locked: &FolderHash, now: &FolderHash) -> Vec<Change> {
    let mut out = Vec::new();
    for (path, hash) in &now.files {
        let kind = match locked.files.get(path) {
            Some(h) if h == hash => continue,
            Some(_) => ChangeKind::Changed,
            None => ChangeKind::Added,
        };
        out.push(Change {
            path: path.clone(),
            kind,
        });
    }
    for path in locked.files.keys() {
        if !now.files.contains_key(path) {
            out.push(Change {
                path: path.clone(),
                kind: ChangeKind::Removed,
            });
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out
}
