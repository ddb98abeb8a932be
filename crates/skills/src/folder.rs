//! One skill's folder, read the way reef reads a workspace: beneath a root it opened, never
//! through a link, regular files only. A workspace's skills are the agent's to write, so they
//! are as hostile as any other file there; installed skills are read the same way.

use reef_workspace::{Kind, RelPath, Workspace, WorkspaceError};
use std::path::PathBuf;

/// A `SKILL.md` larger than this is not read.
pub const MAX_SKILL_FILE: u64 = 256 * 1024;
/// A file the `skill` tool returns may be at most this large.
pub const MAX_READ: u64 = 256 * 1024;
/// A skill folder may hold at most this many files and folders.
pub const MAX_ENTRIES: usize = 2000;
/// Folders deeper than this inside a skill are not entered.
const MAX_DEPTH: usize = 16;
/// Largest file a skill may hold (hashing and installing read it whole).
pub const MAX_FILE: u64 = 64 * 1024 * 1024;

/// Where a skill folder is: `rel` beneath the directory `root` that reef opens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SkillDir {
    pub root: PathBuf,
    /// The folder relative to `root` (`skills/pdf` in a workspace, `pdf` in the home).
    pub rel: String,
}

/// One file or folder inside a skill, relative to the skill's folder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileEntry {
    pub path: String,
    pub kind: Kind,
    pub len: u64,
}

impl SkillDir {
    pub fn new(root: impl Into<PathBuf>, rel: impl Into<String>) -> Self {
        Self {
            root: root.into(),
            rel: rel.into(),
        }
    }

    /// The folder's path on the host.
    pub fn path(&self) -> PathBuf {
        self.root.join(&self.rel)
    }

    fn open(&self) -> Result<Workspace, WorkspaceError> {
        Workspace::open(&self.root)
    }

    /// `file` (relative to the skill folder) resolved beneath the root, refused when it leaves
    /// the folder.
    fn resolve(&self, ws: &Workspace, file: &str) -> Result<RelPath, String> {
        if file.starts_with('/') {
            return Err(format!("{file} is absolute; give a path inside the skill"));
        }
        let joined = match (self.rel.as_str(), file) {
            ("", "") => ".".to_owned(),
            ("", file) => file.to_owned(),
            (rel, "" | ".") => rel.to_owned(),
            (rel, file) => format!("{rel}/{file}"),
        };
        let rel = ws.resolve(&joined).map_err(|e| e.to_string())?;
        if !rel.as_path().starts_with(&self.rel) {
            return Err(format!("{file} is outside the skill's folder"));
        }
        Ok(rel)
    }

    /// Reads `file` inside the folder (at most `cap` bytes).
    pub fn read(&self, file: &str, cap: u64) -> Result<Vec<u8>, String> {
        let ws = self.open().map_err(|e| e.to_string())?;
        let rel = self.resolve(&ws, file)?;
        ws.read(&rel, cap).map_err(|e| shown(e, &self.rel))
    }

    /// Every file and folder inside, depth first in name order; links are listed as links and
    /// not entered. Fails when the folder holds more than [`MAX_ENTRIES`].
    pub fn entries(&self) -> Result<Vec<FileEntry>, String> {
        let ws = self.open().map_err(|e| e.to_string())?;
        let base = self.resolve(&ws, "")?;
        let mut out = Vec::new();
        let mut stack = vec![(base.clone(), 0usize)];
        while let Some((dir, depth)) = stack.pop() {
            let mut children = ws.list(&dir).map_err(|e| shown(e, &self.rel))?;
            children.reverse();
            for entry in children {
                if out.len() >= MAX_ENTRIES {
                    return Err(format!(
                        "it holds more than {MAX_ENTRIES} files and folders"
                    ));
                }
                let path = entry
                    .path
                    .as_path()
                    .strip_prefix(base.as_path())
                    .unwrap_or(entry.path.as_path())
                    .to_string_lossy()
                    .into_owned();
                if entry.kind == Kind::Dir && depth < MAX_DEPTH {
                    stack.push((entry.path.clone(), depth + 1));
                }
                out.push(FileEntry {
                    path,
                    kind: entry.kind,
                    len: entry.len,
                });
            }
        }
        out.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(out)
    }
}

/// A workspace error with paths shown relative to the skill folder.
fn shown(err: WorkspaceError, rel: &str) -> String {
    let text = err.to_string().replace("in the workspace", "in the skill");
    if rel.is_empty() {
        text
    } else {
        text.replace(&format!("{rel}/"), "")
    }
}
