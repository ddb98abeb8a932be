//! A session's skills: found again at the start of every turn, their tools laid over the
//! session's own (see `layers.rs`), their list added to the system prompt, and their folders
//! shown read-only to the turn's commands.

use crate::session::Session;
use reef_skills::{Loaded, SkillSet};
use reef_tools::ToolRegistry;
use std::path::PathBuf;
use std::sync::Arc;

/// The skills of a session, as last loaded.
pub(crate) struct SessionSkills {
    set: Arc<SkillSet>,
    loaded: Loaded,
}

impl Session {
    /// Gives the session `skills`, loaded at the start of each turn.
    pub fn set_skills(&mut self, skills: Arc<SkillSet>) {
        self.keep_own_tools();
        self.skills = Some(SessionSkills {
            set: skills,
            loaded: Loaded::default(),
        });
    }

    /// Finds the skills again and adds their tools to `registry`: each skill tool whose
    /// name none of the session's own tools has.
    pub(crate) async fn load_skills(&mut self, registry: &mut ToolRegistry) {
        let Some(skills) = &mut self.skills else {
            return;
        };
        let (set, workspace) = (skills.set.clone(), self.opts.workspace.clone());
        let loaded = match tokio::task::spawn_blocking(move || set.load(&workspace)).await {
            Ok(loaded) => loaded,
            Err(err) => {
                tracing::warn!("loading skills failed: {err}");
                return;
            }
        };
        for tool in &loaded.tools {
            let name = tool.spec().name;
            if registry.get(&name).is_some() {
                tracing::warn!(tool = %name, "a skill's tool has the name of a tool the agent has; it is left out");
                continue;
            }
            registry.register(tool.clone());
        }
        skills.loaded = loaded;
    }

    /// The folders of the skills in use that lie outside the workspace.
    pub(crate) fn skill_folders(&self) -> Vec<PathBuf> {
        self.skills
            .as_ref()
            .map(|s| s.loaded.folders.clone())
            .unwrap_or_default()
    }

    /// The prompt's list of skills, when the model is offered the `skill` tool.
    pub(crate) fn skills_prompt(&self, offered: &[String]) -> Option<&str> {
        let skills = self.skills.as_ref()?;
        if !offered.iter().any(|n| n == "skill") {
            return None;
        }
        skills.loaded.prompt.as_deref()
    }
}
