//! What can go wrong opening a workspace file, each variant saying how to recover. Paths in
//! messages are workspace-relative (`.` for the root), as the agent knows them.

use std::path::PathBuf;

/// An operation on a workspace path that was refused or failed.
///
/// `InvalidPath` is bad input (fix the argument); `Outside`, `Symlink`, `Hidden` and `ReadOnly`
/// are refusals
/// that no retry will change (use another path, or a sandboxed command for links);
/// `NotFound` … `Exists` describe the file found (pick another path or operation); `Io` and
/// `Unavailable` are the host failing (retry, or report).
#[derive(Debug, thiserror::Error)]
pub enum WorkspaceError {
    /// The path given cannot name a workspace file (empty, or a NUL byte).
    #[error("invalid path {path:?}: {reason}")]
    InvalidPath { path: String, reason: String },
    /// The path, once `..` is applied, leaves the workspace (or is absolute elsewhere).
    #[error("path {path} is outside the workspace {root}; give a path inside it")]
    Outside { path: String, root: PathBuf },
    /// A component of the path is a symbolic link; reef never follows one in a workspace.
    #[error(
        "{path} goes through the symbolic link {link}, and links in the workspace are never \
         followed; use the path the link points to"
    )]
    Symlink { path: String, link: String },
    /// The path is one the sandbox hides (it holds credentials).
    #[error("{path} is hidden from agents because it holds credentials; it cannot be opened")]
    Hidden { path: String },
    /// The path is one the host acts on (`reef.toml`, `.git/hooks`, `.git/config`): agents may
    /// read it but not change it.
    #[error(
        "{path} is read-only for agents: reef or git on the host acts on it; ask the operator to \
         change it"
    )]
    ReadOnly { path: String },
    #[error("{path} does not exist in the workspace")]
    NotFound { path: String },
    #[error("{path} is a directory, not a file")]
    IsDirectory { path: String },
    /// The path (or one of its parents) exists but is not a directory.
    #[error("{path} is not a directory in the workspace")]
    NotDirectory { path: String },
    /// A FIFO, socket or device: opening or reading it could block or have side effects.
    #[error(
        "{path} is not a regular file (a FIFO, socket or device); only regular files are opened"
    )]
    NotRegular { path: String },
    #[error("{path} is {size} bytes, over the {cap}-byte read limit; read a part of it instead")]
    TooLarge { path: String, size: u64, cap: u64 },
    /// `create_new` found something (file, directory or link) already at the path.
    #[error("{path} already exists; it is left as it is")]
    Exists { path: String },
    #[error("I/O error on {path}: {source}; retry, or check the file's permissions")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// The workspace root itself cannot be opened as a directory.
    #[error("workspace {root} cannot be opened: {source}; check that it exists and is a directory")]
    Unavailable {
        root: PathBuf,
        #[source]
        source: std::io::Error,
    },
}
