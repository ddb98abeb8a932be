//! `search_files`: regex search over workspace files, honouring .gitignore and .ignore.

use crate::args::parse_args;
use crate::args::{dir_need, str_arg};
use crate::files::{Files, blocking, tool_error};
use crate::text::{clip_line, looks_binary};
use async_trait::async_trait;
use ignore::overrides::{Override, OverrideBuilder};
use reef_core::{Need, Tool, ToolContext, ToolError, ToolSpec};
use reef_workspace::{Entry, Kind, RelPath, WalkOptions, Workspace};
use regex::{Regex, RegexBuilder};
use serde::Deserialize;
use serde_json::json;
use std::ops::ControlFlow;

const DEFAULT_MAX_RESULTS: usize = 200;
/// Files larger than this are skipped.
const MAX_FILE_BYTES: u64 = 10 * 1024 * 1024;
/// Matched lines are clipped to this many characters.
const MAX_LINE_CHARS: usize = 300;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    pattern: String,
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    glob: Option<String>,
    #[serde(default)]
    max_results: Option<usize>,
    #[serde(default)]
    case_insensitive: bool,
}

pub(crate) struct SearchFilesTool {
    files: Files,
}

impl SearchFilesTool {
    pub(crate) fn new(files: Files) -> Self {
        Self { files }
    }
}

#[async_trait]
impl Tool for SearchFilesTool {
    fn content_source(&self) -> Option<reef_core::ContentSource> {
        Some(reef_core::ContentSource::File)
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "search_files".into(),
            description: "Search workspace files for a regular expression (Rust regex syntax). \
                          Returns `path:line: text` lines. Files ignored by .gitignore/.ignore, \
                          hidden files and binary files are skipped."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "pattern": {"type": "string", "description": "Regular expression to search for."},
                    "path": {"type": "string", "description": "File or directory to search, relative to the workspace (default \".\")."},
                    "glob": {"type": "string", "description": "Only search files whose name matches this glob, e.g. \"*.rs\"."},
                    "max_results": {"type": "integer", "minimum": 1, "description": format!("Stop after this many matching lines (default {DEFAULT_MAX_RESULTS}).")},
                    "case_insensitive": {"type": "boolean", "description": "Match case-insensitively (default false)."}
                },
                "required": ["pattern"],
                "additionalProperties": false
            }),
        }
    }

    fn needs(&self, args: &serde_json::Value) -> Vec<Need> {
        vec![dir_need(str_arg(args, "path"))]
    }

    async fn call(&self, ctx: &ToolContext, args: serde_json::Value) -> Result<String, ToolError> {
        let args: Args = parse_args(args)?;
        let regex = RegexBuilder::new(&args.pattern)
            .case_insensitive(args.case_insensitive)
            .build()
            .map_err(|err| {
                ToolError::InvalidArguments(format!(
                    "pattern {:?} is not a valid regex: {err}",
                    args.pattern
                ))
            })?;
        let max = args.max_results.unwrap_or(DEFAULT_MAX_RESULTS);
        if max == 0 {
            return Err(ToolError::InvalidArguments(
                "max_results must be at least 1".into(),
            ));
        }
        let (files, root) = (self.files.clone(), ctx.workspace.clone());
        let given = args.path.unwrap_or_else(|| ".".to_owned());
        let glob = args.glob;
        let (shown, lines) = blocking(move || {
            let ws = files.open(&root)?;
            let target = ws.resolve(&given).map_err(tool_error)?;
            let glob = glob
                .map(|glob| {
                    OverrideBuilder::new(ws.root().join(target.as_path()))
                        .add(&glob)
                        .and_then(|b| b.build())
                        .map_err(|err| {
                            ToolError::InvalidArguments(format!(
                                "glob {glob:?} is not valid: {err}"
                            ))
                        })
                })
                .transpose()?;
            let search = Search { regex, glob, max };
            let lines = search.run(&ws, &target)?;
            Ok((target.display(), lines))
        })
        .await?;
        if lines.is_empty() {
            return Ok(format!("no matches for /{}/ in {shown}", args.pattern));
        }
        Ok(lines.join("\n") + "\n")
    }
}

struct Search {
    regex: Regex,
    /// Only files this accepts are searched (`glob`, relative to the target).
    glob: Option<Override>,
    max: usize,
}

impl Search {
    /// Matching lines of every searchable file under `target`: ignore files honoured, hidden
    /// names, `.git`, links, big and binary files skipped.
    fn run(&self, ws: &Workspace, target: &RelPath) -> Result<Vec<String>, ToolError> {
        let options = WalkOptions {
            skip_hidden: true,
            skip_git: true,
            max_file_size: Some(MAX_FILE_BYTES),
            limit: None,
        };
        let mut lines = Vec::new();
        ws.walk(target, &options, |entry| {
            if entry.kind != Kind::File || !self.globbed(ws, entry) {
                return ControlFlow::Continue(());
            }
            if self.search_file(ws, entry, &mut lines) {
                lines.push(format!(
                    "[stopped after {} results; narrow the pattern, path or glob, or raise max_results]",
                    self.max
                ));
                return ControlFlow::Break(());
            }
            ControlFlow::Continue(())
        })
        .map_err(tool_error)?;
        Ok(lines)
    }

    fn globbed(&self, ws: &Workspace, entry: &Entry) -> bool {
        self.glob.as_ref().is_none_or(|glob| {
            !glob
                .matched(ws.root().join(entry.path.as_path()), false)
                .is_ignore()
        })
    }

    /// Appends matches from one file; returns true once `max` results are exceeded.
    fn search_file(&self, ws: &Workspace, entry: &Entry, lines: &mut Vec<String>) -> bool {
        // The file may have changed since the walk saw it: it is opened the same safe way.
        let Ok(bytes) = ws.read(&entry.path, MAX_FILE_BYTES) else {
            return false;
        };
        if looks_binary(&bytes) {
            return false;
        }
        let text = String::from_utf8_lossy(&bytes);
        let rel = entry.path.display();
        for (index, line) in text.lines().enumerate() {
            if self.regex.is_match(line) {
                if lines.len() == self.max {
                    return true;
                }
                lines.push(format!(
                    "{rel}:{}: {}",
                    index + 1,
                    clip_line(line, MAX_LINE_CHARS)
                ));
            }
        }
        false
    }
}
