//! Integration tests of skills: the format on real-world-shaped folders and on every rule,
//! discovery and precedence, the tools (through the real default sandbox), installs from
//! folders and git registries, and the lock.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "test code")]

mod discovery;
mod format;
mod install;
mod tools;
mod wasm;

use reef_core::{SessionId, ToolCallId, ToolContext};
use reef_sandbox::{HelperCommand, Sandbox, SandboxBackend, SandboxPolicy};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Writes a skill folder `dir/name` with `SKILL.md` = `skill_md` and the given files.
pub(crate) fn write_skill(
    dir: &Path,
    name: &str,
    skill_md: &str,
    files: &[(&str, &str)],
) -> PathBuf {
    let folder = dir.join(name);
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(folder.join("SKILL.md"), skill_md).unwrap();
    for (path, body) in files {
        let path = folder.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, body).unwrap();
    }
    folder
}

/// A minimal valid `SKILL.md` for `name`.
pub(crate) fn simple(name: &str, description: &str) -> String {
    format!(
        "---\nname: {name}\ndescription: {description}\n---\n# {name}\n\nDo the {name} thing.\n"
    )
}

/// A real-world-shaped skill: folded description, metadata map, allowed-tools, license,
/// compatibility, scripts and nested references.
pub(crate) const PDF_SKILL: &str = "---
name: pdf
description: >-
  Comprehensive PDF manipulation toolkit for extracting text and tables,
  creating new PDFs, merging and splitting documents, and handling forms.
  Use when a task involves a .pdf file.
license: Proprietary. LICENSE.txt has complete terms
compatibility: Requires python3 with pypdf
allowed-tools: Bash(python3:*) Read Write
metadata:
  author: example-org
  version: \"1.2\"
  reviewed: 2026
---

# PDF processing

Run `scripts/extract.py FILE` to get the text of a PDF.
For forms, read references/forms.md first.
";

/// A sandbox on the real default backend (landlock through the test helper) that hides
/// `hidden`, as a daemon hides reef's home.
pub(crate) fn sandbox(hidden: Vec<PathBuf>) -> Arc<Sandbox> {
    Arc::new(Sandbox::new(policy(hidden)))
}

pub(crate) fn policy(hidden: Vec<PathBuf>) -> SandboxPolicy {
    SandboxPolicy {
        backend: SandboxBackend::Landlock,
        helper: Some(HelperCommand {
            program: reef_test_support::sandbox_helper(),
            args: Vec::new(),
        }),
        kill_grace: Duration::from_millis(200),
        hidden,
        ..SandboxPolicy::default()
    }
}

/// The tool named `name` among a skill set's tools.
pub(crate) fn tool(loaded: &reef_skills::Loaded, name: &str) -> Arc<dyn reef_core::Tool> {
    loaded
        .tools
        .iter()
        .find(|t| t.spec().name == name)
        .unwrap_or_else(|| panic!("no tool {name}"))
        .clone()
}

pub(crate) fn ctx(workspace: &Path, read_only: Vec<PathBuf>) -> ToolContext {
    ToolContext {
        workspace: workspace.to_path_buf(),
        session_id: SessionId::new(),
        call_id: ToolCallId::new(),
        read_only,
    }
}
