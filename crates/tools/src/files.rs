//! The file tools' only way into the workspace: reef-workspace (beneath the root, no link ever
//! followed, regular files only, the sandbox's hidden paths refused and the files the host
//! acts on read-only, as inside the sandbox), run off the async
//! runtime, with its errors turned into results the model can act on.

use reef_core::ToolError;
use reef_workspace::{Workspace, WorkspaceError};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Opens agents' workspaces for the file tools, refusing the paths the sandbox hides.
#[derive(Clone, Debug, Default)]
pub(crate) struct Files {
    hidden: Arc<[PathBuf]>,
}

impl Files {
    /// `hidden`: absolute paths the sandbox never shows (`SandboxPolicy::hidden_paths`).
    pub(crate) fn new(hidden: Vec<PathBuf>) -> Self {
        Self {
            hidden: hidden.into(),
        }
    }

    /// The workspace at `root`. Blocking: call it inside [`blocking`].
    pub(crate) fn open(&self, root: &Path) -> Result<Workspace, ToolError> {
        Ok(Workspace::open(root)
            .map_err(tool_error)?
            .with_hidden(&self.hidden)
            .with_read_only(reef_sandbox::READ_ONLY_IN_WORKSPACE))
    }
}

/// Runs blocking workspace I/O on the blocking pool.
pub(crate) async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, ToolError> + Send + 'static,
) -> Result<T, ToolError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|err| ToolError::Failed(format!("the file operation crashed: {err}")))?
}

/// The result the model gets for `err`: refusals are `Denied` (a link also says what can
/// follow it), bad paths `InvalidArguments`, everything else `Failed`.
pub(crate) fn tool_error(err: WorkspaceError) -> ToolError {
    match err {
        WorkspaceError::InvalidPath { .. } => ToolError::InvalidArguments(err.to_string()),
        WorkspaceError::Symlink { .. } => ToolError::Denied(format!(
            "{err}. File tools do not follow symbolic links; the shell tool, which runs inside \
             the sandbox, can."
        )),
        WorkspaceError::Outside { .. }
        | WorkspaceError::Hidden { .. }
        | WorkspaceError::ReadOnly { .. } => ToolError::Denied(err.to_string()),
        _ => ToolError::Failed(err.to_string()),
    }
}

/// [`tool_error`] for reading a file whole (`read_file`, `edit_file`): what to use instead of
/// a directory or an oversized file.
pub(crate) fn read_error(err: WorkspaceError) -> ToolError {
    match err {
        WorkspaceError::IsDirectory { path } => ToolError::Failed(format!(
            "{path} is a directory; use list_dir to see its contents"
        )),
        WorkspaceError::TooLarge { path, size, cap } => ToolError::Failed(format!(
            "{path} is {size} bytes, over the {cap}-byte read limit; use search_files to find \
             the relevant lines or shell (e.g. `sed -n '100,200p' {path}`) to read part of it"
        )),
        other => tool_error(other),
    }
}
