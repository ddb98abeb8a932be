//! reef-workspace: files of an agent's workspace, opened the only safe way — beneath the
//! workspace root, never through a symbolic link, regular files and directories only.
//!
//! reef's own (unsandboxed) code uses this for every file it opens in a workspace on an
//! agent's behalf: the file tools, `MEMORY.md`, saved tool outputs. See README.md.
#![forbid(unsafe_code)]

mod error;
mod file;
mod meta;
mod open;
mod path;
mod walk;
mod workspace;

pub use error::WorkspaceError;
pub use file::EditableFile;
pub use meta::{Entry, Kind, Metadata};
pub use path::RelPath;
pub use walk::{WalkEnd, WalkOptions};
pub use workspace::Workspace;
