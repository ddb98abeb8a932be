//! What can go wrong installing, updating or checking skills, each variant saying how to
//! recover. (A skill that fails its checks while loading is not an error: it is listed as
//! invalid with its [`crate::Rule`].)

use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum SkillError {
    /// The source given to `add` holds no skill: point at a skill folder or a folder of them.
    #[error("{source_name} holds no skill folder (a folder with a SKILL.md)")]
    NoSkills { source_name: String },
    /// Every skill in the source failed its checks; nothing was installed.
    #[error("no valid skill in {source_name}: {reasons}")]
    NoneValid {
        source_name: String,
        reasons: String,
    },
    /// `--skill NAME` named a skill the source does not have.
    #[error("{source_name} has no skill named `{name}`; it has: {available}")]
    NotInSource {
        source_name: String,
        name: String,
        available: String,
    },
    /// The named skill is not installed (see `reef skills list`).
    #[error("no installed skill is named `{0}`; see `reef skills list`")]
    NotInstalled(String),
    /// A file of the source cannot be installed (a link, a device, too large): fix the source.
    #[error("{path}: {reason}")]
    BadSource { path: String, reason: String },
    /// Fetching a git registry failed; nothing was installed. Check the URL, the revision and
    /// the network allowance.
    #[error("could not fetch {url}: {reason}")]
    Fetch { url: String, reason: String },
    /// The argument is not a path or a git URL reef can fetch.
    #[error("{0}")]
    BadUrl(String),
    /// `skills.lock` cannot be read or written: fix or remove the file.
    #[error("skills lock {}: {reason}", path.display())]
    Lock { path: PathBuf, reason: String },
    /// The sandbox could not run git; see `reef sandbox status`.
    #[error("the sandbox could not run git: {0}")]
    Sandbox(#[from] reef_sandbox::SandboxError),
    /// The file system failed; retry, or check permissions and free space.
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl SkillError {
    pub(crate) fn io(path: &Path, source: std::io::Error) -> Self {
        SkillError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}
