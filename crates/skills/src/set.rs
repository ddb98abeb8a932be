//! One agent's skills, found again at the start of every turn (so a skill written during a
//! turn is offered from the next): the prompt section listing them, the tools they bring, and
//! the folders its commands may read.

use crate::catalog::{Catalog, Roots, State, discover_selected, glob_match};
use crate::manifest::Mode;
use crate::tools::{CommandTool, CreateTool, SkillTool};
use reef_core::{Capabilities, Tool};
use reef_sandbox::Sandbox;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Names skill tools cannot take.
const RESERVED: [&str; 2] = ["skill", "skill_create"];

/// Limits for the skills of every agent (`[skills]`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SkillSettings {
    /// The prompt's list of skills stops before this many characters.
    pub prompt_max_chars: usize,
    /// Default timeout of a skill's own tool.
    pub timeout_secs: u64,
    /// Output of a skill's tool above this many characters keeps only head and tail.
    pub max_output_chars: usize,
    /// Which addresses a WASM skill's HTTP requests may reach besides public ones (as
    /// `http_fetch`: `tools.http_allow_private`, and host names exempt from the check).
    pub http_allow_private: bool,
    pub http_allow_hosts: Vec<String>,
    /// Whole-request limit of a WASM skill's HTTP request.
    pub http_timeout_secs: u64,
}

impl Default for SkillSettings {
    fn default() -> Self {
        Self {
            prompt_max_chars: 4000,
            timeout_secs: 60,
            max_output_chars: 10_000,
            http_allow_private: false,
            http_allow_hosts: Vec::new(),
            http_timeout_secs: 30,
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
    /// Secrets a WASM skill may have put into its requests' headers.
    secrets: Arc<reef_tools::Secrets>,
    /// The WASM engine, made on first use (shared with [`SkillSet::with_wasm`]).
    wasm: Arc<WasmRuntime>,
    #[cfg_attr(
        not(feature = "wasm"),
        allow(dead_code, reason = "only WASM skills make HTTP requests")
    )]
    http: Arc<reef_tools::GuardedHttp>,
    /// What the sandbox hides, resolved.
    #[cfg_attr(
        not(feature = "wasm"),
        allow(dead_code, reason = "only WASM skills check it")
    )]
    hidden: Arc<Vec<PathBuf>>,
}

/// The WASM engine of a process, made when the first WASM skill runs (its epoch thread
/// starts then), compiling into `cache_dir`.
pub struct WasmRuntime {
    #[cfg(feature = "wasm")]
    engine: std::sync::OnceLock<Result<Arc<reef_wasm::WasmEngine>, String>>,
    cache_dir: PathBuf,
}

impl std::fmt::Debug for WasmRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WasmRuntime")
            .field("cache_dir", &self.cache_dir)
            .finish()
    }
}

impl WasmRuntime {
    /// Compiled modules are cached in `cache_dir` (`$REEF_HOME/cache/wasm`).
    pub fn new(cache_dir: PathBuf) -> Self {
        Self {
            #[cfg(feature = "wasm")]
            engine: std::sync::OnceLock::new(),
            cache_dir,
        }
    }

    #[cfg(feature = "wasm")]
    pub(crate) fn engine(&self) -> Result<Arc<reef_wasm::WasmEngine>, String> {
        self.engine
            .get_or_init(|| {
                reef_wasm::WasmEngine::new(Some(self.cache_dir.clone()))
                    .map(Arc::new)
                    .map_err(|e| e.to_string())
            })
            .clone()
    }
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
        let http = reef_tools::GuardedHttp::new(
            reef_security::SsrfPolicy {
                allow_private: settings.http_allow_private,
                allow_hosts: settings.http_allow_hosts.clone(),
            },
            std::time::Duration::from_secs(settings.http_timeout_secs),
            2 * 1024 * 1024,
        );
        let hidden = Arc::new(sandbox.policy().hidden_paths());
        Self {
            wasm: Arc::new(WasmRuntime::new(home.join("cache").join("wasm"))),
            home,
            select,
            settings,
            sandbox,
            capabilities: Capabilities::default(),
            warned: Mutex::new(HashSet::new()),
            secrets: Arc::new(reef_tools::Secrets::new(Vec::new())),
            http: Arc::new(http),
            hidden,
        }
    }

    /// Secrets WASM skills may name in their requests' headers: the agent's own (its tool
    /// registry's), so values they use are redacted and remembered like `shell`'s.
    pub fn with_secrets(mut self, secrets: Arc<reef_tools::Secrets>) -> Self {
        self.secrets = secrets;
        self
    }

    /// Runs WASM skills on the process's `wasm` runtime instead of one of their own.
    pub fn with_wasm(mut self, wasm: Arc<WasmRuntime>) -> Self {
        self.wasm = wasm;
        self
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
        let catalog = discover_selected(
            &Roots {
                workspace: Some(workspace.to_path_buf()),
                home: self.home.clone(),
            },
            &|name| self.selects(name),
        );
        self.warn_invalid(&catalog);
        let catalog = Arc::new(catalog);
        let mut tools: Vec<Arc<dyn Tool>> = Vec::new();
        let mut folders = Vec::new();
        if catalog.active().next().is_some() {
            tools.push(Arc::new(SkillTool {
                catalog: catalog.clone(),
            }));
        }
        if self.capabilities.skill_write {
            tools.push(Arc::new(CreateTool));
        }
        for skill in catalog.active() {
            // Folders outside the workspace, and those of home or installed skills wherever
            // they are (reef's home may lie inside a workspace, hidden there).
            if !matches!(skill.origin, crate::catalog::Origin::Workspace { .. }) {
                folders.push(skill.dir.path());
            }
            if !skill.manifest.is_tool() {
                continue;
            }
            if RESERVED.contains(&skill.name()) {
                self.warn_once(
                    &format!("{}\0reserved", skill.dir.path().display()),
                    "a skill cannot be a tool named like reef's skill tools; it is left out",
                );
                continue;
            }
            match skill.manifest.tool_mode() {
                Mode::Subprocess => tools.push(Arc::new(CommandTool {
                    skill: skill.clone(),
                    sandbox: self.sandbox.clone(),
                    timeout_secs: self.settings.timeout_secs,
                    max_output_chars: self.settings.max_output_chars,
                })),
                #[cfg(feature = "wasm")]
                Mode::Wasm => tools.push(Arc::new(crate::tools::WasmTool {
                    skill: skill.clone(),
                    wasm: self.wasm.clone(),
                    // The agent reaches the network only if it may fetch.
                    http: self
                        .capabilities
                        .allows_tool("http_fetch")
                        .then(|| self.http.clone()),
                    secrets: self.secrets.clone(),
                    max_output_chars: self.settings.max_output_chars,
                    hidden: self.hidden.clone(),
                    plain_http_hosts: self.settings.http_allow_hosts.clone(),
                })),
                #[cfg(not(feature = "wasm"))]
                Mode::Wasm => {
                    tracing::warn!(skill = %skill.name(), "a WASM skill is not offered: reef was built without WASM support");
                }
            }
        }
        let prompt = crate::prompt::section(&catalog, self.settings.prompt_max_chars);
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
        for f in &catalog.found {
            if let State::Invalid { reason } = &f.state {
                self.warn_once(
                    &format!("{}\0{reason}", f.path.display()),
                    &format!("skill {} skipped: {reason}", f.path.display()),
                );
            }
        }
    }

    /// Logs `message` the first time `key` is seen: skills are found again every turn.
    fn warn_once(&self, key: &str, message: &str) {
        let mut warned = self.warned.lock().unwrap_or_else(|p| p.into_inner());
        if warned.insert(key.to_owned()) {
            tracing::warn!("{message}");
        }
    }
}
