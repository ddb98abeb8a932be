//! `skill_create`: an agent with the `skill_write` capability writes a new skill into its
//! workspace's `skills/`, checked against the format before anything is written. The skill is
//! offered from the agent's next turn.

use crate::catalog::{Origin, load};
use crate::folder::SkillDir;
use crate::manifest::{SKILL_FILE, check_name, render};
use async_trait::async_trait;
use reef_core::{Tool, ToolContext, ToolError, ToolSpec};
use reef_tools::parse_args;
use reef_workspace::{Workspace, WorkspaceError};
use serde::Deserialize;
use serde_json::json;
use std::collections::BTreeMap;
use std::path::{Component, Path};

/// Files a created skill may have besides `SKILL.md`.
const MAX_FILES: usize = 50;
/// Bytes of all its files together.
const MAX_BYTES: usize = 1024 * 1024;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    name: String,
    description: String,
    instructions: String,
    #[serde(default)]
    files: BTreeMap<String, String>,
}

pub(crate) struct CreateTool;

#[async_trait]
impl Tool for CreateTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "skill_create".into(),
            description: "Save a reusable skill in your workspace's skills/ folder: a name, a \
                description saying when to use it, Markdown instructions, and optional files \
                (scripts/…, references/…, assets/…). It is listed among your skills from your \
                next turn; load it with `skill`."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "name": {"type": "string", "description": "1-64 lowercase letters, digits and single hyphens, e.g. csv-report."},
                    "description": {"type": "string", "description": "What the skill does and when to use it (at most 1024 characters)."},
                    "instructions": {"type": "string", "description": "The Markdown instructions of SKILL.md."},
                    "files": {"type": "object", "additionalProperties": {"type": "string"}, "description": "Further files by path inside the skill, e.g. {\"scripts/report.py\": \"…\"}."}
                },
                "required": ["name", "description", "instructions"],
                "additionalProperties": false
            }),
        }
    }

    fn needs(&self, args: &serde_json::Value) -> Vec<reef_core::Need> {
        let name = args.get("name").and_then(|n| n.as_str()).unwrap_or("");
        vec![
            reef_core::Need::SkillWrite,
            reef_core::Need::WriteTree(format!("skills/{name}")),
        ]
    }

    async fn call(&self, ctx: &ToolContext, args: serde_json::Value) -> Result<String, ToolError> {
        let args: Args = parse_args(args)?;
        let workspace = ctx.workspace.clone();
        tokio::task::spawn_blocking(move || create(&workspace, args))
            .await
            .map_err(|e| ToolError::Failed(format!("writing the skill failed: {e}")))?
    }
}

fn create(workspace: &Path, args: Args) -> Result<String, ToolError> {
    let invalid = ToolError::InvalidArguments;
    check_name(&args.name).map_err(|r| invalid(r.to_string()))?;
    let text = render(&args.name, &args.description, &[], &args.instructions);
    // The same checks the loader makes, before anything is written.
    crate::manifest::parse(&text, &args.name).map_err(|r| invalid(r.to_string()))?;
    if args.files.len() > MAX_FILES {
        return Err(invalid(format!("at most {MAX_FILES} files")));
    }
    let total: usize = args.files.values().map(String::len).sum();
    if total > MAX_BYTES {
        return Err(invalid(format!(
            "the files add up to {total} bytes, over {MAX_BYTES}"
        )));
    }
    for path in args.files.keys() {
        let plain = !path.is_empty()
            && Path::new(path)
                .components()
                .all(|c| matches!(c, Component::Normal(_)));
        if !plain || path == SKILL_FILE {
            return Err(invalid(format!(
                "file {path:?} must be a relative path inside the skill (no `..`), other than \
                 {SKILL_FILE}"
            )));
        }
    }
    // A file that would be the folder of another cannot be written: refuse before writing.
    for a in args.files.keys() {
        if args.files.keys().any(|b| b.starts_with(&format!("{a}/"))) {
            return Err(invalid(format!(
                "file {a:?} is also a folder of another file; give files distinct paths"
            )));
        }
    }
    let ws = Workspace::open(workspace).map_err(|e| ToolError::Failed(e.to_string()))?;
    let failed = |e: WorkspaceError| ToolError::Failed(e.to_string());
    let dir = format!("skills/{}", args.name);
    let rel = ws.resolve(&dir).map_err(failed)?;
    match ws.metadata(&rel) {
        Err(WorkspaceError::NotFound { .. }) => {}
        Ok(_) => {
            return Err(ToolError::Failed(format!(
                "{dir} already exists; pick another name, or edit its files with the file tools"
            )));
        }
        Err(e) => return Err(failed(e)),
    }
    ws.create_dir_all(&rel).map_err(failed)?;
    let write = |file: &str, body: &str| -> Result<(), ToolError> {
        let path = ws.resolve(&format!("{dir}/{file}")).map_err(failed)?;
        if let Some(parent) = path.parent() {
            ws.create_dir_all(&parent).map_err(failed)?;
        }
        ws.create_new(&path, body.as_bytes()).map_err(failed)
    };
    write(SKILL_FILE, &text)?;
    for (path, body) in &args.files {
        write(path, body)?;
    }
    let origin = Origin::Workspace { dir: "skills" };
    load(&SkillDir::new(workspace, dir.clone()), &args.name, &origin)
        .map_err(|reason| ToolError::Failed(format!("{dir} was written but {reason}")))?;
    Ok(format!(
        "Created the skill `{}` in {dir}/ ({} file(s) besides {SKILL_FILE}). It is offered to \
         you from your next turn.",
        args.name,
        args.files.len()
    ))
}
