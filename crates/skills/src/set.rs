//! One agent's skills, found again at the start of every turn (so a skill written during a
//! turn is offered from the next): the prompt section listing them, the tools they bring, and
//! the folders its commands may read.

use crate::catalog::{Catalog, Roots, State, discover, glob_match};
use crate::tools::{CommandTool, CreateTool, SkillTool};
use reef_core::{Capabilities, Tool};
use reef_sandbox::Sandbox;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Limits for the skills of every agent (`[skills]`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SkillSettings {
    /// The prompt's list of skills stops before this many characters.
    pub prompt_max_chars: usize,
    /// Default timeout of a skill's own tool.
    pub timeout_secs: u64,
    /// Output of a skill's tool above this many characters keeps only head and tail.
    pub max_output_chars: usize,
}

impl Default for SkillSettings {
    fn default() -> Self {
        Self {
            prompt_max_chars: 4000,
            timeout_secs: 60,
            max_output_chars: 10_000,
        }
    }
}

/// Where an agent's skills come from and which of them it gets.
pub struct SkillSet {
    home: PathBuf,
    /// Name patterns (`pdf`, `git-*`); empty: every skill.
    select: Vec<String>,
    settings: SkillSettings,
    sandbox: Arc<Sandbox>,
    /// What the agent may do: which of the skills' tools it gets, and `skill_create` with
    /// `skill_write`.
    capabilities: Capabilities,
    /// Skipped folders already warned about, so each is logged once.
    warned: Mutex<HashSet<String>>,
}

impl std::fmt::Debug for SkillSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SkillSet")
            .field("home", &self.home)
            .field("select", &self.select)
            .field("capabilities", &self.capabilities)
            .finish()
    }
}

/// What an agent's skills are for one turn.
#[derive(Clone, Default)]
pub struct Loaded {
    pub catalog: Arc<Catalog>,
    /// `skill`, the skills' own tools and `skill_create`, as allowed.
    pub tools: Vec<Arc<dyn Tool>>,
    /// The system prompt's section listing the skills (`None`: there are none).
    pub prompt: Option<String>,
    /// Folders of the skills outside the workspace, shown read-only to commands.
    pub folders: Vec<PathBuf>,
}

impl SkillSet {
    /// Skills from `home` (reef's home) and the workspace, narrowed to `select`, with their
    /// tools run in `sandbox`.
    pub fn new(
        home: PathBuf,
        select: Vec<String>,
        settings: SkillSettings,
        sandbox: Arc<Sandbox>,
    ) -> Self {
        Self {
            home,
            select,
            settings,
            sandbox,
            capabilities: Capabilities::default(),
            warned: Mutex::new(HashSet::new()),
        }
    }

    /// Narrows the tools to what `capabilities` allow, and offers `skill_create` when they
    /// include `skill_write`.
    pub fn with_capabilities(mut self, capabilities: Capabilities) -> Self {
        self.capabilities = capabilities;
        self
    }

    /// Whether a template's `skills` list selects `name`.
    pub fn selects(&self, name: &str) -> bool {
        self.select.is_empty() || self.select.iter().any(|p| glob_match(p, name))
    }

    /// The skills as they are now for an agent working in `workspace`.
    pub fn load(&self, workspace: &Path) -> Loaded {
        let mut catalog = discover(&Roots {
            workspace: Some(workspace.to_path_buf()),
            home: self.home.clone(),
        });
        catalog.retain(|name| self.selects(name));
        self.warn_invalid(&catalog);
        let catalog = Arc::new(catalog);
        let mut tools: Vec<Arc<dyn Tool>> = Vec::new();
        let mut folders = Vec::new();
        for skill in catalog.active() {
            let folder = skill.dir.path();
            if !folder.starts_with(workspace) {
                folders.push(folder);
            }
            if skill.manifest.is_tool() {
                tools.push(Arc::new(CommandTool {
                    skill: skill.clone(),
                    sandbox: self.sandbox.clone(),
                    timeout_secs: self.settings.timeout_secs,
                    max_output_chars: self.settings.max_output_chars,
                }));
            }
        }
        let prompt = crate::prompt::section(&catalog, self.settings.prompt_max_chars);
        if catalog.active().next().is_some() {
            tools.push(Arc::new(SkillTool {
                catalog: catalog.clone(),
            }));
        }
        if self.capabilities.skill_write {
            tools.push(Arc::new(CreateTool));
        }
        tools.retain(|t| self.capabilities.allows_tool(&t.spec().name));
        Loaded {
            catalog,
            tools,
            prompt,
            folders,
        }
    }

    /// Logs each skipped skill once, naming its file and the rule it broke.
    fn warn_invalid(&self, catalog: &Catalog) {
        let mut warned = self.warned.lock().unwrap_or_else(|p| p.into_inner());
        for f in &catalog.found {
            if let State::Invalid { reason } = &f.state {
                let key = format!("{}\0{reason}", f.path.display());
                if warned.insert(key) {
                    tracing::warn!(skill = %f.path.display(), "skill skipped: {reason}");
                }
            }
        }
    }
}
