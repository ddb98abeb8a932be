//! `search_files`: regex search over workspace files, honouring .gitignore and .ignore.

use crate::args::parse_args;
use crate::paths::{resolve, workspace_root};
use crate::text::{clip_line, looks_binary};
use async_trait::async_trait;
use ignore::WalkBuilder;
use ignore::overrides::OverrideBuilder;
use reef_core::{Tool, ToolContext, ToolError, ToolSpec};
use regex::{Regex, RegexBuilder};
use serde::Deserialize;
use serde_json::json;
use std::path::{Path, PathBuf};

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

pub(crate) struct SearchFilesTool;

#[async_trait]
impl Tool for SearchFilesTool {
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
        let root = workspace_root(ctx)?;
        let target = resolve(ctx, args.path.as_deref().unwrap_or("."))?;
        if !target.abs.exists() {
            return Err(ToolError::Failed(format!(
                "{} does not exist in the workspace",
                target.display
            )));
        }
        let search = Search {
            regex,
            root,
            target: target.abs,
            glob: args.glob,
            max,
        };
        let lines = tokio::task::spawn_blocking(move || search.run())
            .await
            .map_err(|err| ToolError::Failed(format!("search failed: {err}")))??;
        if lines.is_empty() {
            return Ok(format!(
                "no matches for /{}/ in {}",
                args.pattern, target.display
            ));
        }
        Ok(lines.join("\n") + "\n")
    }
}

struct Search {
    regex: Regex,
    root: PathBuf,
    target: PathBuf,
    glob: Option<String>,
    max: usize,
}

impl Search {
    fn run(&self) -> Result<Vec<String>, ToolError> {
        let mut builder = WalkBuilder::new(&self.target);
        builder
            .require_git(false)
            .max_filesize(Some(MAX_FILE_BYTES))
            .sort_by_file_name(|a, b| a.cmp(b))
            .filter_entry(|e| e.file_name() != ".git");
        if let Some(glob) = &self.glob {
            let overrides = OverrideBuilder::new(&self.target)
                .add(glob)
                .and_then(|b| b.build())
                .map_err(|err| {
                    ToolError::InvalidArguments(format!("glob {glob:?} is not valid: {err}"))
                })?;
            builder.overrides(overrides);
        }

        let mut lines = Vec::new();
        for entry in builder.build() {
            let Ok(entry) = entry else { continue };
            if !entry.file_type().is_some_and(|t| t.is_file()) {
                continue;
            }
            if self.search_file(entry.path(), &mut lines) {
                lines.push(format!(
                    "[stopped after {} results; narrow the pattern, path or glob, or raise max_results]",
                    self.max
                ));
                break;
            }
        }
        Ok(lines)
    }

    /// Appends matches from one file; returns true once `max` results are exceeded.
    fn search_file(&self, path: &Path, lines: &mut Vec<String>) -> bool {
        let Ok(bytes) = std::fs::read(path) else {
            return false;
        };
        if looks_binary(&bytes) {
            return false;
        }
        let text = String::from_utf8_lossy(&bytes);
        let rel = path
            .strip_prefix(&self.root)
            .unwrap_or(path)
            .to_string_lossy();
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
