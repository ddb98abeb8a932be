//! Finding skills: the workspace's `skills/` and `.agents/skills/`, `$REEF_HOME/skills/` and the
//! installed ones in `$REEF_HOME/registry/` (checked against `skills.lock`). A name found in
//! several places resolves workspace > home > installed; every skill that fails a rule is kept
//! with its reason, so `reef skills list` can say why it is not used.

use crate::folder::{FileEntry, MAX_SKILL_FILE, SkillDir};
use crate::lock::{LOCK_FILE, Lock, changed_files, hash_entries};
use crate::manifest::{Manifest, Mode, Rule, SKILL_FILE, parse};
use reef_workspace::{Kind, Workspace, WorkspaceError};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Folders of a workspace that hold skills, in precedence order.
pub const WORKSPACE_DIRS: [&str; 2] = ["skills", ".agents/skills"];
/// The folder of reef's home with the user's own skills.
pub const HOME_DIR: &str = "skills";
/// The folder of reef's home with installed skills.
pub const INSTALLED_DIR: &str = "registry";
/// Programs that run a subprocess skill's tool, in the order they are looked for.
pub const ENTRY_POINTS: [&str; 3] = ["run.sh", "run.py", "main.py"];
/// The module of a WASM skill.
pub const WASM_ENTRY: &str = "main.wasm";

/// Where a skill was found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Origin {
    /// In the agent's workspace, under `dir` (`skills` or `.agents/skills`).
    Workspace { dir: &'static str },
    /// In `$REEF_HOME/skills/`.
    Home,
    /// Installed by `reef skills add` from `source`.
    Installed { source: String },
}

impl Origin {
    /// Lower wins a name conflict.
    fn rank(&self) -> u8 {
        match self {
            Origin::Workspace { .. } => 0,
            Origin::Home => 1,
            Origin::Installed { .. } => 2,
        }
    }

    /// A short label: `workspace`, `home` or `installed`.
    pub fn kind(&self) -> &'static str {
        match self {
            Origin::Workspace { .. } => "workspace",
            Origin::Home => "home",
            Origin::Installed { .. } => "installed",
        }
    }
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Origin::Workspace { dir } => write!(f, "workspace ({dir}/)"),
            Origin::Home => write!(f, "home ({HOME_DIR}/)"),
            Origin::Installed { source } => write!(f, "installed from {source}"),
        }
    }
}

/// Where the skills of one agent are looked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Roots {
    /// The agent's workspace, if it has one.
    pub workspace: Option<PathBuf>,
    /// reef's home (`$REEF_HOME`).
    pub home: PathBuf,
}

impl Roots {
    pub fn home_skills(&self) -> PathBuf {
        self.home.join(HOME_DIR)
    }

    pub fn installed(&self) -> PathBuf {
        self.home.join(INSTALLED_DIR)
    }

    pub fn lock_file(&self) -> PathBuf {
        self.home.join(LOCK_FILE)
    }
}

/// A skill that passed every check.
#[derive(Clone, Debug, PartialEq)]
pub struct Skill {
    pub manifest: Manifest,
    pub dir: SkillDir,
    pub origin: Origin,
    /// Its files and folders, relative to its folder.
    pub files: Vec<FileEntry>,
    /// The program its tool runs (`run.sh`, `main.wasm`, …), when it is a tool.
    pub entry: Option<String>,
    /// BLAKE3 (hex) of `main.wasm` when it was checked (for an installed skill, the lock's):
    /// the module must still have it when it runs.
    pub entry_hash: Option<String>,
}

impl Skill {
    pub fn name(&self) -> &str {
        &self.manifest.name
    }
}

/// One skill folder as found, valid or not, and whether another of the same name won.
#[derive(Clone, Debug)]
pub struct Found {
    /// The folder name (the skill's name when it is valid).
    pub name: String,
    pub path: PathBuf,
    pub origin: Origin,
    pub state: State,
}

#[derive(Clone, Debug)]
pub enum State {
    /// Used: no skill of the same name comes before it.
    Active(Arc<Skill>),
    /// Valid, but a skill of the same name from `by` comes first.
    Shadowed { skill: Arc<Skill>, by: Origin },
    /// Failed a check; not used.
    Invalid { reason: String },
}

/// Every skill folder found for one set of roots.
#[derive(Clone, Debug, Default)]
pub struct Catalog {
    pub found: Vec<Found>,
}

impl Catalog {
    /// The skills in use, by name.
    pub fn active(&self) -> impl Iterator<Item = &Arc<Skill>> {
        self.found.iter().filter_map(|f| match &f.state {
            State::Active(skill) => Some(skill),
            _ => None,
        })
    }

    /// The skill in use named `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<Skill>> {
        self.active().find(|s| s.name() == name)
    }
}

/// Finds every skill under `roots`.
pub fn discover(roots: &Roots) -> Catalog {
    discover_selected(roots, &|_| true)
}

/// Finds the skills under `roots` whose folder name `keep` accepts; the others are not read
/// (nor, when installed, hashed).
pub fn discover_selected(roots: &Roots, keep: &dyn Fn(&str) -> bool) -> Catalog {
    let mut found = Vec::new();
    if let Some(ws) = &roots.workspace {
        for dir in WORKSPACE_DIRS {
            scan(ws, dir, &Origin::Workspace { dir }, keep, &mut found);
        }
    }
    scan(&roots.home_skills(), "", &Origin::Home, keep, &mut found);
    scan_installed(roots, keep, &mut found);
    // Stable: within one origin the folders stay in name order.
    found.sort_by_key(|f| f.origin.rank());
    let mut catalog = Catalog { found: Vec::new() };
    for mut f in found {
        if let State::Active(skill) = &f.state {
            let winner = catalog
                .found
                .iter()
                .find(|w| matches!(&w.state, State::Active(s) if s.name() == skill.name()));
            if let Some(w) = winner {
                f.state = State::Shadowed {
                    skill: skill.clone(),
                    by: w.origin.clone(),
                };
            }
        }
        catalog.found.push(f);
    }
    catalog
}

/// The skill folders in `root`/`sub` (`sub` empty: `root` itself holds them).
fn scan(
    root: &Path,
    sub: &str,
    origin: &Origin,
    keep: &dyn Fn(&str) -> bool,
    out: &mut Vec<Found>,
) {
    let ws = match Workspace::open(root) {
        Ok(ws) => ws,
        Err(_) => return, // no such directory: no skills there
    };
    let base = match ws.resolve(if sub.is_empty() { "." } else { sub }) {
        Ok(rel) => rel,
        Err(_) => return,
    };
    let entries = match ws.list(&base) {
        Ok(entries) => entries,
        Err(WorkspaceError::NotFound { .. } | WorkspaceError::NotDirectory { .. }) => return,
        Err(err) => {
            out.push(Found {
                name: sub.to_owned(),
                path: root.join(sub),
                origin: origin.clone(),
                state: State::Invalid {
                    reason: format!("its skills folder cannot be read: {err}"),
                },
            });
            return;
        }
    };
    for entry in entries {
        let name = entry.name().to_string_lossy().into_owned();
        if name.starts_with('.') || !keep(&name) {
            continue;
        }
        let rel = entry.path.as_path().to_string_lossy().into_owned();
        let dir = SkillDir::new(root, rel);
        let state = match entry.kind {
            Kind::Dir => load(&dir, &name, origin),
            Kind::Symlink => Err(
                "it is a symbolic link; skills are read only from real folders, \
                 so replace the link with the folder"
                    .to_owned(),
            ),
            Kind::File | Kind::Other => continue, // a README beside the skills
        };
        out.push(Found {
            path: dir.path(),
            name,
            origin: origin.clone(),
            state: match state {
                Ok(skill) => State::Active(Arc::new(skill)),
                Err(reason) => State::Invalid { reason },
            },
        });
    }
}

/// Installed skills, each checked against its entry in `skills.lock`.
fn scan_installed(roots: &Roots, keep: &dyn Fn(&str) -> bool, out: &mut Vec<Found>) {
    let start = out.len();
    scan(
        &roots.installed(),
        "",
        &Origin::Installed {
            source: "an unknown source".into(),
        },
        keep,
        out,
    );
    if out.len() == start {
        return;
    }
    let lock = Lock::read(&roots.lock_file());
    for f in &mut out[start..] {
        let entry = match &lock {
            Ok(lock) => lock.skills.get(&f.name),
            Err(err) => {
                f.state = State::Invalid {
                    reason: err.to_string(),
                };
                continue;
            }
        };
        let Some(entry) = entry else {
            f.state = State::Invalid {
                reason: format!(
                    "it is not in {LOCK_FILE}; install it with `reef skills add`, or remove it"
                ),
            };
            continue;
        };
        f.origin = Origin::Installed {
            source: match &entry.rev {
                Some(rev) => format!("{}#{rev}", entry.source),
                None => entry.source.clone(),
            },
        };
        let State::Active(skill) = &f.state else {
            continue;
        };
        let now = match hash_entries(&skill.dir, &skill.files) {
            Ok(now) => now,
            Err(reason) => {
                f.state = State::Invalid { reason };
                continue;
            }
        };
        if now.hash != entry.hashes.hash {
            let changed = changed_files(&entry.hashes, &now);
            f.state = State::Invalid {
                reason: format!(
                    "its files changed since it was installed ({}); check them, then accept \
                     them with `reef skills verify --accept {}` or reinstall it",
                    changed
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(", "),
                    f.name
                ),
            };
        } else if let State::Active(skill) = &mut f.state {
            let mut pinned = (**skill).clone();
            pinned.origin = f.origin.clone();
            if pinned.entry_hash.is_some() {
                pinned.entry_hash = entry.hashes.files.get(WASM_ENTRY).cloned();
            }
            *skill = Arc::new(pinned);
        }
    }
}

/// Reads and checks the skill in `dir`, whose folder is named `folder`.
pub fn load(dir: &SkillDir, folder: &str, origin: &Origin) -> Result<Skill, String> {
    let bytes = dir
        .read(SKILL_FILE, MAX_SKILL_FILE)
        .map_err(|e| format!("{SKILL_FILE}: {e}"))?;
    let text = String::from_utf8(bytes).map_err(|_| format!("{SKILL_FILE} is not UTF-8 text"))?;
    let manifest = parse(&text, folder).map_err(|rule| format!("{SKILL_FILE}: {rule}"))?;
    let files = dir.entries()?;
    let entry = entry_point(&manifest, &files).map_err(|rule| format!("{SKILL_FILE}: {rule}"))?;
    let entry_hash = match entry.as_deref() {
        Some(WASM_ENTRY) => {
            let bytes = dir
                .read(WASM_ENTRY, crate::folder::MAX_FILE)
                .map_err(|e| format!("{WASM_ENTRY}: {e}"))?;
            Some(blake3::hash(&bytes).to_hex().to_string())
        }
        _ => None,
    };
    Ok(Skill {
        manifest,
        dir: dir.clone(),
        origin: origin.clone(),
        files,
        entry,
        entry_hash,
    })
}

/// The program a tool skill runs: the first of [`ENTRY_POINTS`] present as a regular file, or
/// `main.wasm`.
fn entry_point(manifest: &Manifest, files: &[FileEntry]) -> Result<Option<String>, Rule> {
    if !manifest.is_tool() {
        return Ok(None);
    }
    let present = |name: &str| files.iter().any(|f| f.path == name && f.kind == Kind::File);
    match manifest.tool_mode() {
        Mode::Subprocess => ENTRY_POINTS
            .iter()
            .find(|n| present(n))
            .map(|n| Some((*n).to_owned()))
            .ok_or_else(|| {
                Rule::Executable(format!(
                    "it declares parameters but its folder has none of {} to run",
                    ENTRY_POINTS.join(", ")
                ))
            }),
        Mode::Wasm => {
            if present(WASM_ENTRY) {
                Ok(Some(WASM_ENTRY.to_owned()))
            } else {
                Err(Rule::Executable(format!(
                    "it has `mode: wasm` but no {WASM_ENTRY} in its folder"
                )))
            }
        }
    }
}

/// Whether `name` matches `pattern`, where `*` matches any run of characters and `?` one.
pub fn glob_match(pattern: &str, name: &str) -> bool {
    fn go(p: &[u8], n: &[u8]) -> bool {
        match (p.first(), n.first()) {
            (None, None) => true,
            (Some(b'*'), _) => go(&p[1..], n) || (!n.is_empty() && go(p, &n[1..])),
            (Some(b'?'), Some(_)) => go(&p[1..], &n[1..]),
            (Some(a), Some(b)) if a == b => go(&p[1..], &n[1..]),
            _ => false,
        }
    }
    go(pattern.as_bytes(), name.as_bytes())
}
