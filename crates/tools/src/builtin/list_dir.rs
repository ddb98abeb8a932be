//! `list_dir`: lists a workspace directory, optionally recursively (respecting .gitignore).

use crate::args::parse_args;
use crate::paths::resolve;
use async_trait::async_trait;
use ignore::WalkBuilder;
use reef_core::{Tool, ToolContext, ToolError, ToolSpec};
use serde::Deserialize;
use serde_json::json;
use std::path::Path;

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

pub(crate) struct ListDirTool;

#[async_trait]
impl Tool for ListDirTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "list_dir".into(),
            description: "List a directory in the workspace, sorted by name: directories end \
                          with `/`, files show their size. With recursive=true, lists the whole \
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

    async fn call(&self, ctx: &ToolContext, args: serde_json::Value) -> Result<String, ToolError> {
        let args: Args = parse_args(args)?;
        let max = args.max_entries.unwrap_or(DEFAULT_MAX_ENTRIES);
        if max == 0 {
            return Err(ToolError::InvalidArguments(
                "max_entries must be at least 1".into(),
            ));
        }
        let dir = resolve(ctx, args.path.as_deref().unwrap_or("."))?;
        if !dir.abs.is_dir() {
            return Err(ToolError::Failed(format!(
                "{} is not a directory in the workspace",
                dir.display
            )));
        }
        let recursive = args.recursive;
        let shown = dir.display.clone();
        let lines = tokio::task::spawn_blocking(move || {
            if recursive {
                list_recursive(&dir.abs, max)
            } else {
                list_flat(&dir.abs, max)
            }
        })
        .await
        .map_err(|err| ToolError::Failed(format!("listing {shown} failed: {err}")))??;
        if lines.is_empty() {
            return Ok(format!("{shown} is empty"));
        }
        Ok(lines.join("\n") + "\n")
    }
}

fn entry_line(name: &str, path: &Path) -> String {
    match std::fs::metadata(path) {
        Ok(meta) if meta.is_dir() => format!("{name}/"),
        Ok(meta) => format!("{name} ({} bytes)", meta.len()),
        Err(_) => format!("{name} (unreadable or broken link)"),
    }
}

fn list_flat(dir: &Path, max: usize) -> Result<Vec<String>, ToolError> {
    let read = std::fs::read_dir(dir)
        .map_err(|err| ToolError::Failed(format!("cannot list {}: {err}", dir.display())))?;
    let mut entries: Vec<(String, std::path::PathBuf)> = read
        .filter_map(Result::ok)
        .map(|e| (e.file_name().to_string_lossy().into_owned(), e.path()))
        .collect();
    entries.sort();
    let total = entries.len();
    let mut lines: Vec<String> = entries
        .iter()
        .take(max)
        .map(|(name, path)| entry_line(name, path))
        .collect();
    if total > max {
        lines.push(format!(
            "[... {} more entries not shown; raise max_entries to see them]",
            total - max
        ));
    }
    Ok(lines)
}

fn list_recursive(dir: &Path, max: usize) -> Result<Vec<String>, ToolError> {
    let walker = WalkBuilder::new(dir)
        .hidden(false)
        .require_git(false)
        .sort_by_file_name(|a, b| a.cmp(b))
        .filter_entry(|e| e.file_name() != ".git")
        .build();
    let mut lines = Vec::new();
    for entry in walker {
        let Ok(entry) = entry else { continue };
        if entry.depth() == 0 {
            continue;
        }
        if lines.len() == max {
            lines.push(format!(
                "[listing stopped after {max} entries; narrow path or raise max_entries]"
            ));
            break;
        }
        let rel = entry
            .path()
            .strip_prefix(dir)
            .unwrap_or(entry.path())
            .to_string_lossy()
            .into_owned();
        lines.push(entry_line(&rel, entry.path()));
    }
    Ok(lines)
}
