//! `read_file`: returns a text file from the workspace, whole or a line range.

use crate::args::parse_args;
use crate::args::str_arg;
use crate::builtin::BuiltinConfig;
use crate::files::{Files, blocking, read_error, tool_error};
use crate::text::looks_binary;
use async_trait::async_trait;
use reef_core::{Need, Tool, ToolContext, ToolError, ToolSpec};
use serde::Deserialize;
use serde_json::json;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    path: String,
    #[serde(default)]
    start_line: Option<usize>,
    #[serde(default)]
    end_line: Option<usize>,
}

pub(crate) struct ReadFileTool {
    max_bytes: usize,
    files: Files,
}

impl ReadFileTool {
    pub(crate) fn new(config: &BuiltinConfig, files: Files) -> Self {
        Self {
            max_bytes: config.max_read_bytes,
            files,
        }
    }
}

#[async_trait]
impl Tool for ReadFileTool {
    fn content_source(&self) -> Option<reef_core::ContentSource> {
        Some(reef_core::ContentSource::File)
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "read_file".into(),
            description: format!(
                "Read a UTF-8 text file in the workspace. Give start_line/end_line to read a \
                 range (1-based, inclusive); the result then starts with a `path (lines a-b of N)` \
                 header. Binary files and files over {} bytes are refused.",
                self.max_bytes
            ),
            parameters: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "File path relative to the workspace."},
                    "start_line": {"type": "integer", "minimum": 1, "description": "First line to return, 1-based (default 1)."},
                    "end_line": {"type": "integer", "minimum": 1, "description": "Last line to return, inclusive (default: last line)."}
                },
                "required": ["path"],
                "additionalProperties": false
            }),
        }
    }

    fn needs(&self, args: &serde_json::Value) -> Vec<Need> {
        str_arg(args, "path")
            .map(|p| Need::Read(p.to_owned()))
            .into_iter()
            .collect()
    }

    async fn call(&self, ctx: &ToolContext, args: serde_json::Value) -> Result<String, ToolError> {
        let args: Args = parse_args(args)?;
        let (files, root, cap) = (self.files.clone(), ctx.workspace.clone(), self.max_bytes);
        let (shown, bytes) = blocking(move || {
            let ws = files.open(&root)?;
            let path = ws.resolve(&args.path).map_err(tool_error)?;
            let bytes = ws.read(&path, cap as u64).map_err(read_error)?;
            Ok((path.display(), bytes))
        })
        .await?;
        let shown = &shown;
        if looks_binary(&bytes) {
            return Err(ToolError::Failed(format!(
                "{shown} looks like a binary file (it contains NUL bytes); it is not shown"
            )));
        }
        let text = String::from_utf8(bytes).map_err(|_| {
            ToolError::Failed(format!("{shown} is not valid UTF-8 text; it is not shown"))
        })?;

        if args.start_line.is_none() && args.end_line.is_none() {
            return Ok(text);
        }
        select_lines(shown, &text, args.start_line, args.end_line)
    }
}

fn select_lines(
    shown: &str,
    text: &str,
    start: Option<usize>,
    end: Option<usize>,
) -> Result<String, ToolError> {
    let lines: Vec<&str> = text.lines().collect();
    let total = lines.len();
    let start = start.unwrap_or(1);
    if start == 0 {
        return Err(ToolError::InvalidArguments(
            "start_line is 1-based and must be at least 1".into(),
        ));
    }
    if start > total {
        return Err(ToolError::InvalidArguments(format!(
            "start_line {start} is past the end of {shown}, which has {total} lines"
        )));
    }
    let end = end.unwrap_or(total);
    if end < start {
        return Err(ToolError::InvalidArguments(format!(
            "end_line {end} is before start_line {start}"
        )));
    }
    let end = end.min(total);
    let mut out = format!("{shown} (lines {start}-{end} of {total})\n");
    for line in &lines[start - 1..end] {
        out.push_str(line);
        out.push('\n');
    }
    Ok(out)
}
