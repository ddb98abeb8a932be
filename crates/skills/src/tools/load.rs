//! `skill`: loads a skill's instructions when the model decides to use it, or one of its
//! files (`references/`, `assets/`, scripts) on demand, confined to the skill's folder.

use crate::catalog::{Catalog, Skill};
use crate::folder::MAX_READ;
use async_trait::async_trait;
use reef_core::{Tool, ToolContext, ToolError, ToolSpec};
use reef_tools::{looks_binary, parse_args};
use reef_workspace::Kind;
use serde::Deserialize;
use serde_json::json;
use std::path::Path;
use std::sync::Arc;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    name: String,
    #[serde(default)]
    file: Option<String>,
}

pub(crate) struct SkillTool {
    pub catalog: Arc<Catalog>,
}

#[async_trait]
impl Tool for SkillTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "skill".into(),
            description: "Load a skill: its instructions, a list of its files, and where its \
                folder is. Call it before doing a task that one of the skills listed in your \
                instructions describes, and follow what it says. With `file`, returns one file \
                of the skill (e.g. references/guide.md) instead."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "name": {"type": "string", "description": "The skill's name, as listed."},
                    "file": {"type": "string", "description": "A file inside the skill's folder, relative to it (e.g. references/forms.md)."}
                },
                "required": ["name"],
                "additionalProperties": false
            }),
        }
    }

    async fn call(&self, ctx: &ToolContext, args: serde_json::Value) -> Result<String, ToolError> {
        let args: Args = parse_args(args)?;
        let Some(skill) = self.catalog.get(&args.name).cloned() else {
            let names: Vec<&str> = self.catalog.active().map(|s| s.name()).collect();
            return Err(ToolError::InvalidArguments(format!(
                "no skill is named `{}`; the skills are: {}",
                args.name,
                names.join(", ")
            )));
        };
        let workspace = ctx.workspace.clone();
        tokio::task::spawn_blocking(move || match args.file {
            None => Ok(instructions(&skill, &workspace)),
            Some(file) => read_file(&skill, &file),
        })
        .await
        .map_err(|e| ToolError::Failed(format!("reading the skill failed: {e}")))?
    }
}

/// The skill's header, file list and instructions.
fn instructions(skill: &Skill, workspace: &Path) -> String {
    let folder = skill.dir.path();
    let m = &skill.manifest;
    let mut out = format!("# Skill `{}` ({})\n", m.name, skill.origin);
    let files: Vec<&str> = skill
        .files
        .iter()
        .filter(|f| f.kind == Kind::File && f.path != crate::SKILL_FILE)
        .map(|f| f.path.as_str())
        .collect();
    let access = if folder.starts_with(workspace) {
        "in your workspace"
    } else {
        "read-only"
    };
    out.push_str(&format!("Folder: {} ({access})\n", folder.display()));
    if !files.is_empty() {
        out.push_str(&format!(
            "Files: {}\nRead one with `skill` and `file`. Run its scripts with `shell` from your \
             workspace, by their full path (e.g. `{}`).\n",
            files.join(", "),
            example_command(&folder, &files),
        ));
    }
    if let Some(c) = &m.compatibility {
        out.push_str(&format!("Compatibility: {c}\n"));
    }
    if !m.allowed_tools.is_empty() {
        out.push_str(&format!("Tools it uses: {}\n", m.allowed_tools.join(" ")));
    }
    out.push('\n');
    out.push_str(m.body.trim());
    out
}

/// A command line running the skill's first script, to show how paths are given.
fn example_command(folder: &Path, files: &[&str]) -> String {
    let script = files
        .iter()
        .find(|f| f.starts_with("scripts/"))
        .or(files.first())
        .copied()
        .unwrap_or_default();
    let path = folder.join(script);
    match Path::new(script).extension().and_then(|e| e.to_str()) {
        Some("py") => format!("python3 {}", path.display()),
        Some("sh") => format!("sh {}", path.display()),
        Some("js") => format!("node {}", path.display()),
        _ => format!("cat {}", path.display()),
    }
}

fn read_file(skill: &Skill, file: &str) -> Result<String, ToolError> {
    let bytes = skill
        .dir
        .read(file, MAX_READ)
        .map_err(|e| ToolError::InvalidArguments(format!("{file}: {e}")))?;
    if looks_binary(&bytes) {
        return Ok(format!(
            "{file} is a binary file of {} bytes; use it by its path {}",
            bytes.len(),
            skill.dir.path().join(file).display()
        ));
    }
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}
