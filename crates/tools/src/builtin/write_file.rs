//! `write_file`: creates or overwrites a file in the workspace, creating parent directories.

use crate::args::parse_args;
use crate::args::str_arg;
use crate::files::{Files, blocking, tool_error};
use async_trait::async_trait;
use reef_core::{Need, Tool, ToolContext, ToolError, ToolSpec};
use reef_workspace::WorkspaceError;
use serde::Deserialize;
use serde_json::json;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    path: String,
    content: String,
}

pub(crate) struct WriteFileTool {
    files: Files,
}

impl WriteFileTool {
    pub(crate) fn new(files: Files) -> Self {
        Self { files }
    }
}

#[async_trait]
impl Tool for WriteFileTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "write_file".into(),
            description: "Create or overwrite a file in the workspace with the given content. \
                          Missing parent directories are created. Returns the number of bytes \
                          written."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "File path relative to the workspace."},
                    "content": {"type": "string", "description": "The complete new file content."}
                },
                "required": ["path", "content"],
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
        let len = args.content.len();
        let (files, root) = (self.files.clone(), ctx.workspace.clone());
        let shown = blocking(move || {
            let ws = files.open(&root)?;
            let path = ws.resolve(&args.path).map_err(tool_error)?;
            if let Some(parent) = path.parent() {
                ws.create_dir_all(&parent).map_err(tool_error)?;
            }
            ws.write(&path, args.content.as_bytes())
                .map_err(|err| match err {
                    WorkspaceError::IsDirectory { path } => {
                        ToolError::Failed(format!("{path} is a directory; give a file path"))
                    }
                    other => tool_error(other),
                })?;
            Ok(path.display())
        })
        .await?;
        Ok(format!("wrote {len} bytes to {shown}"))
    }
}
