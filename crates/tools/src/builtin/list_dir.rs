//! `list_dir`: lists a workspace directory, optionally recursively (respecting .gitignore).

use crate::args::parse_args;
use crate::args::{dir_need, str_arg};
use crate::files::{Files, blocking, tool_error};
use async_trait::async_trait;
use reef_core::{Need, Tool, ToolContext, ToolError, ToolSpec};
use reef_workspace::{Entry, Kind, RelPath, WalkEnd, WalkOptions, Workspace, WorkspaceError};
use serde::Deserialize;
use serde_json::json;
use std::ops::ControlFlow;

const DEFAULT_MAX_ENTRIES: usize = 500;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    recursive: bool,
    #[serde(default)]
    max_entries: Option<usize>,
}

pub(crate) struct ListDirTool {
    files: Files,
}

impl ListDirTool {
    pub(crate) fn new(files: Files) -> Self {
        Self { files }
    }
}

#[async_trait]
impl Tool for ListDirTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "list_dir".into(),
            description: "List a directory in the workspace, sorted by name: directories end \
                          with `/`, files show their size, symbolic links are shown (not \
                          followed) as `name -> (symbolic link)`. With recursive=true, lists the whole \
                          tree, skipping files ignored by .gitignore/.ignore and the .git \
                          directory."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "Directory relative to the workspace (default \".\")."},
                    "recursive": {"type": "boolean", "description": "List subdirectories too (default false)."},
                    "max_entries": {"type": "integer", "minimum": 1, "description": format!("Stop after this many entries (default {DEFAULT_MAX_ENTRIES}).")}
                },
                "required": [],
                "additionalProperties": false
            }),
        }
    }

    fn needs(&self, args: &serde_json::Value) -> Vec<Need> {
        vec![dir_need(str_arg(args, "path"))]
    }

    async fn call(&self, ctx: &ToolContext, args: serde_json::Value) -> Result<String, ToolError> {
        let args: Args = parse_args(args)?;
        let max = args.max_entries.unwrap_or(DEFAULT_MAX_ENTRIES);
        if max == 0 {
            return Err(ToolError::InvalidArguments(
                "max_entries must be at least 1".into(),
            ));
        }
        let (files, root, recursive) = (self.files.clone(), ctx.workspace.clone(), args.recursive);
        let given = args.path.unwrap_or_else(|| ".".to_owned());
        let (shown, lines) = blocking(move || {
            let ws = files.open(&root)?;
            let dir = ws.resolve(&given).map_err(tool_error)?;
            let lines = if recursive {
                list_recursive(&ws, &dir, max)?
            } else {
                list_flat(&ws, &dir, max)?
            };
            Ok((dir.display(), lines))
        })
        .await?;
        if lines.is_empty() {
            return Ok(format!("{shown} is empty"));
        }
        Ok(lines.join("\n") + "\n")
    }
}

/// One listing line: `name/`, `name (N bytes)`, `name -> (symbolic link)`.
fn entry_line(name: &str, entry: &Entry) -> String {
    match entry.kind {
        Kind::Dir => format!("{name}/"),
        Kind::File => format!("{name} ({} bytes)", entry.len),
        Kind::Symlink => format!("{name} -> (symbolic link, not followed)"),
        Kind::Other => format!("{name} (FIFO, socket or device)"),
    }
}

fn list_flat(ws: &Workspace, dir: &RelPath, max: usize) -> Result<Vec<String>, ToolError> {
    let entries = ws.list(dir).map_err(tool_error)?;
    let total = entries.len();
    let mut lines: Vec<String> = entries
        .iter()
        .take(max)
        .map(|e| entry_line(&e.name().to_string_lossy(), e))
        .collect();
    if total > max {
        lines.push(format!(
            "[... {} more entries not shown; raise max_entries to see them]",
            total - max
        ));
    }
    Ok(lines)
}

/// The tree under `dir`, paths relative to it; `.gitignore`/`.ignore` honoured, `.git` left out.
fn list_recursive(ws: &Workspace, dir: &RelPath, max: usize) -> Result<Vec<String>, ToolError> {
    match ws.metadata(dir).map_err(tool_error)?.kind {
        Kind::Dir => {}
        Kind::Symlink => {
            return Err(tool_error(WorkspaceError::Symlink {
                path: dir.display(),
                link: dir.display(),
            }));
        }
        Kind::File | Kind::Other => {
            return Err(tool_error(WorkspaceError::NotDirectory {
                path: dir.display(),
            }));
        }
    }
    let options = WalkOptions {
        skip_git: true,
        limit: Some(max),
        ..WalkOptions::default()
    };
    let mut lines = Vec::new();
    let end = ws
        .walk(dir, &options, |entry| {
            let rel = entry
                .path
                .as_path()
                .strip_prefix(dir.as_path())
                .unwrap_or(entry.path.as_path());
            lines.push(entry_line(&rel.to_string_lossy(), entry));
            ControlFlow::Continue(())
        })
        .map_err(tool_error)?;
    if end == WalkEnd::Limited {
        lines.push(format!(
            "[listing stopped after {max} entries; narrow path or raise max_entries]"
        ));
    }
    Ok(lines)
}
