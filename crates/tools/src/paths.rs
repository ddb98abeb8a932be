//! Workspace path safety shared by every file tool: resolve a user-supplied path against the
//! workspace and refuse anything that ends up outside it.

use reef_core::{ToolContext, ToolError};
use std::path::{Component, Path, PathBuf};
use tokio::io::AsyncReadExt;

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

/// Reads a regular workspace file of at most `max_bytes` bytes. FIFOs, sockets and devices
/// are refused (opening a FIFO would block forever), and the read itself stops after
/// `max_bytes + 1` bytes, so a file growing after the size check cannot exhaust memory.
pub(crate) async fn read_regular(
    path: &ResolvedPath,
    max_bytes: usize,
) -> Result<Vec<u8>, ToolError> {
    let shown = &path.display;
    let cannot = |err: std::io::Error| ToolError::Failed(format!("cannot read {shown}: {err}"));
    let meta = tokio::fs::metadata(&path.abs).await.map_err(cannot)?;
    if meta.is_dir() {
        return Err(ToolError::Failed(format!(
            "{shown} is a directory; use list_dir to see its contents"
        )));
    }
    if !meta.is_file() {
        return Err(not_regular(shown));
    }
    let too_big = |len: u64| {
        ToolError::Failed(format!(
            "{shown} is {len} bytes, over the {max_bytes}-byte read limit; use search_files to \
             find the relevant lines or shell (e.g. `sed -n '100,200p' {shown}`) to read part of it"
        ))
    };
    if meta.len() > max_bytes as u64 {
        return Err(too_big(meta.len()));
    }
    let file = tokio::fs::File::open(&path.abs).await.map_err(cannot)?;
    let mut bytes = Vec::new();
    let limit = u64::try_from(max_bytes)
        .unwrap_or(u64::MAX)
        .saturating_add(1);
    file.take(limit)
        .read_to_end(&mut bytes)
        .await
        .map_err(cannot)?;
    if bytes.len() > max_bytes {
        return Err(too_big(bytes.len() as u64));
    }
    Ok(bytes)
}

/// Refuses an existing path that is neither a regular file nor a directory (a FIFO, socket
/// or device), which a write would block on or misuse.
pub(crate) fn ensure_not_special(path: &ResolvedPath) -> Result<(), ToolError> {
    match std::fs::metadata(&path.abs) {
        Ok(meta) if !meta.is_file() && !meta.is_dir() => Err(not_regular(&path.display)),
        _ => Ok(()),
    }
}

fn not_regular(shown: &str) -> ToolError {
    ToolError::Failed(format!(
        "{shown} is not a regular file (a FIFO, socket or device); file tools only handle \
         regular files"
    ))
}
