//! The grammar of `reef skills …`.

use clap::Subcommand;
use std::path::PathBuf;

#[derive(Debug, Subcommand)]
pub enum SkillsCommand {
    /// Every skill found for this directory: the workspace's skills/ and .agents/skills/,
    /// $REEF_HOME/skills/ and the installed ones; which one is used when names collide, and
    /// why an invalid one is skipped.
    List {
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
        /// The workspace to look in (default: the current directory).
        #[arg(long)]
        workspace: Option<PathBuf>,
    },
    /// One skill: where it is, its fields, its files and its instructions.
    Show {
        name: String,
        #[arg(long)]
        workspace: Option<PathBuf>,
    },
    /// Install the skills of SOURCE: a skill folder, a folder of skill folders, or a git
    /// repository (https URL or local path, `#REV` for a branch, tag or commit). git runs in
    /// the sandbox, reaching only the registry's host.
    Add {
        source: String,
        /// Install only this skill of the source.
        #[arg(long)]
        skill: Option<String>,
    },
    /// Remove an installed skill.
    Rm { name: String },
    /// Fetch the source of an installed skill (all of them without NAME) again, show the diff
    /// of what changed, and replace it when accepted.
    Update {
        name: Option<String>,
        /// Accept every update without asking.
        #[arg(long)]
        yes: bool,
    },
    /// Check installed skills against the hashes in skills.lock; --accept NAME pins a skill's
    /// files as they are now.
    Verify {
        #[arg(long, value_name = "NAME")]
        accept: Option<String>,
    },
}
