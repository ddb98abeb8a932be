//! `edit_file`: exact-string replacement in a workspace file.

use crate::args::parse_args;
use crate::args::str_arg;
use crate::builtin::BuiltinConfig;
use crate::files::{Files, blocking, read_error, tool_error};
use async_trait::async_trait;
use reef_core::{Need, Tool, ToolContext, ToolError, ToolSpec};
use serde::Deserialize;
use serde_json::json;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    path: String,
    old_string: String,
    new_string: String,
    #[serde(default)]
    replace_all: bool,
}

pub(crate) struct EditFileTool {
    max_bytes: usize,
    files: Files,
}

impl EditFileTool {
    pub(crate) fn new(config: &BuiltinConfig, files: Files) -> Self {
        Self {
            max_bytes: config.max_read_bytes,
            files,
        }
    }
}

#[async_trait]
impl Tool for EditFileTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "edit_file".into(),
            description: "Replace an exact string in a workspace file. old_string must occur \
                          exactly once unless replace_all is true; include surrounding lines to \
                          make it unique."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "File path relative to the workspace."},
                    "old_string": {"type": "string", "description": "Exact text to replace, whitespace included."},
                    "new_string": {"type": "string", "description": "Replacement text."},
                    "replace_all": {"type": "boolean", "description": "Replace every occurrence instead of requiring exactly one (default false)."}
                },
                "required": ["path", "old_string", "new_string"],
                "additionalProperties": false
            }),
        }
    }

    fn needs(&self, args: &serde_json::Value) -> Vec<Need> {
        str_arg(args, "path")
            .map(|p| Need::Write(p.to_owned()))
            .into_iter()
            .collect()
    }

    async fn call(&self, ctx: &ToolContext, args: serde_json::Value) -> Result<String, ToolError> {
        let args: Args = parse_args(args)?;
        if args.old_string.is_empty() {
            return Err(ToolError::InvalidArguments(
                "old_string must not be empty; use write_file to create a file".into(),
            ));
        }
        if args.old_string == args.new_string {
            return Err(ToolError::InvalidArguments(
                "old_string and new_string are identical; nothing to change".into(),
            ));
        }
        let (files, root, cap) = (self.files.clone(), ctx.workspace.clone(), self.max_bytes);
        blocking(move || {
            let ws = files.open(&root)?;
            let path = ws.resolve(&args.path).map_err(tool_error)?;
            let file = ws.open_for_edit(&path, cap as u64).map_err(read_error)?;
            let (count, text) = edit(&path.display(), file.contents(), &args)?;
            file.replace(text.as_bytes()).map_err(tool_error)?;
            let noun = if count == 1 {
                "occurrence"
            } else {
                "occurrences"
            };
            Ok(format!("replaced {count} {noun} in {}", path.display()))
        })
        .await
    }
}

/// The new text and how many occurrences were replaced.
fn edit(shown: &str, bytes: &[u8], args: &Args) -> Result<(usize, String), ToolError> {
    let text = std::str::from_utf8(bytes).map_err(|_| {
        ToolError::Failed(format!(
            "{shown} is not valid UTF-8 text; it cannot be edited"
        ))
    })?;
    let count = text.matches(args.old_string.as_str()).count();
    if count == 0 {
        return Err(ToolError::Failed(format!(
            "old_string not found in {shown}"
        )));
    }
    if count > 1 && !args.replace_all {
        return Err(ToolError::Failed(format!(
            "old_string occurs {count} times in {shown}; add surrounding context to make it \
             unique, or set replace_all to true to replace every occurrence"
        )));
    }
    let updated = if args.replace_all {
        text.replace(&args.old_string, &args.new_string)
    } else {
        text.replacen(&args.old_string, &args.new_string, 1)
    };
    Ok((count, updated))
}
