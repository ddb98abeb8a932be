//! `write_file`: creates or overwrites a file in the workspace, creating parent directories.

use crate::args::parse_args;
use crate::paths::{ensure_not_special, resolve};
use async_trait::async_trait;
use reef_core::{Tool, ToolContext, ToolError, ToolSpec};
use serde::Deserialize;
use serde_json::json;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    path: String,
    content: String,
}

pub(crate) struct WriteFileTool;

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

    async fn call(&self, ctx: &ToolContext, args: serde_json::Value) -> Result<String, ToolError> {
        let args: Args = parse_args(args)?;
        let path = resolve(ctx, &args.path)?;
        let shown = &path.display;
        if path.abs.is_dir() {
            return Err(ToolError::Failed(format!(
                "{shown} is a directory; give a file path"
            )));
        }
        ensure_not_special(&path)?;
        if let Some(parent) = path.abs.parent() {
            tokio::fs::create_dir_all(parent).await.map_err(|err| {
                ToolError::Failed(format!("cannot create the directory for {shown}: {err}"))
            })?;
        }
        tokio::fs::write(&path.abs, args.content.as_bytes())
            .await
            .map_err(|err| ToolError::Failed(format!("cannot write {shown}: {err}")))?;
        Ok(format!("wrote {} bytes to {shown}", args.content.len()))
    }
}
