//! reef-skills: Agent Skills folders (`SKILL.md` with YAML front matter, then instructions,
//! with optional `scripts/`, `references/` and `assets/`) and the older dialects reef reads
//! (`parameters`, `mode`). Skills are found in the workspace, reef's home and the installed
//! registry; listed by name and description in the prompt; loaded through the `skill` tool;
//! and their code runs only in the sandbox. Installed skills are pinned by BLAKE3 hashes in
//! `skills.lock`.

mod catalog;
mod diff;
mod error;
mod folder;
mod git;
mod install;
mod lock;
mod manifest;
mod params;
mod prompt;
mod set;
mod tools;

pub use catalog::{
    Catalog, ENTRY_POINTS, Found, HOME_DIR, INSTALLED_DIR, Origin, Roots, Skill, State, WASM_ENTRY,
    WORKSPACE_DIRS, discover, glob_match,
};
pub use error::SkillError;
pub use folder::{FileEntry, SkillDir};
pub use git::GitSource;
pub use install::{AddReport, Installed, Installer, Source, UpdatePlan};
pub use lock::{Change, ChangeKind, FolderHash, LOCK_FILE, Lock, LockEntry, hash_folder};
pub use manifest::{
    MAX_COMPATIBILITY, MAX_DESCRIPTION, MAX_NAME, Manifest, Mode, Rule, SKILL_FILE, parse,
};
pub use params::{Param, schema};
pub use set::{Loaded, SkillSet, SkillSettings, WasmRuntime};
