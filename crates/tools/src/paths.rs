//! Workspace path safety shared by every file tool: resolve a user-supplied path against the
//! workspace and refuse anything that ends up outside it.

use reef_core::{ToolContext, ToolError};
use std::path::{Component, Path, PathBuf};

/// A path proven to lie inside the workspace.
#[derive(Clone, Debug)]
pub(crate) struct ResolvedPath {
    /// Absolute path with symlinks of its existing prefix resolved.
    pub(crate) abs: PathBuf,
    /// The path relative to the workspace root (`.` for the root itself), for messages.
    pub(crate) display: String,
}

/// The canonical workspace root.
pub(crate) fn workspace_root(ctx: &ToolContext) -> Result<PathBuf, ToolError> {
    std::fs::canonicalize(&ctx.workspace).map_err(|err| {
        ToolError::Failed(format!(
            "workspace {} is not accessible: {err}",
            ctx.workspace.display()
        ))
    })
}

/// Resolves `user_path` (relative to the workspace, or absolute inside it).
///
/// `..` is normalised lexically, then the longest existing ancestor is canonicalised (which
/// resolves symlinks) and the rest appended; the result must lie under the canonical
/// workspace root. A path running through a broken symlink is refused, since it could
/// later be created anywhere.
pub(crate) fn resolve(ctx: &ToolContext, user_path: &str) -> Result<ResolvedPath, ToolError> {
    if user_path.is_empty() {
        return Err(ToolError::InvalidArguments(
            "path must not be empty (use \".\" for the workspace root)".into(),
        ));
    }
    let root = workspace_root(ctx)?;
    let requested = Path::new(user_path);
    let candidate = if requested.is_absolute() {
        requested.to_path_buf()
    } else {
        root.join(requested)
    };
    let normalized = normalize(&candidate);
    let outside = || {
        ToolError::Denied(format!(
            "path {user_path} is outside the workspace {}",
            ctx.workspace.display()
        ))
    };

    let mut rest: Vec<&std::ffi::OsStr> = Vec::new();
    let mut current: &Path = &normalized;
    let resolved = loop {
        if std::fs::symlink_metadata(current).is_ok() {
            let canon = std::fs::canonicalize(current).map_err(|err| {
                ToolError::Denied(format!(
                    "path {user_path} goes through {}, which cannot be resolved (broken symlink?): {err}",
                    current.display()
                ))
            })?;
            break rest.iter().rev().fold(canon, |acc, part| acc.join(part));
        }
        match (current.parent(), current.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name);
                current = parent;
            }
            _ => return Err(outside()),
        }
    };

    let Ok(relative) = resolved.strip_prefix(&root) else {
        return Err(outside());
    };
    let display = if relative.as_os_str().is_empty() {
        ".".to_owned()
    } else {
        relative.to_string_lossy().into_owned()
    };
    Ok(ResolvedPath {
        abs: resolved,
        display,
    })
}

/// Removes `.` and resolves `..` against preceding components, without touching the disk.
/// `..` at the root stays at the root.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    out
}
