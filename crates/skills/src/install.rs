//! Installing skills into `$REEF_HOME/registry/` from a folder or a git registry, removing,
//! updating (with the diff of what changed) and verifying them. A source is read without
//! following links and every skill in it is checked before anything is written; the new
//! folders are staged, then moved into place, then pinned in `skills.lock`.

use crate::catalog::{Origin, Roots, load};
use crate::error::SkillError;
use crate::folder::{MAX_FILE, SkillDir};
use crate::git::{GitSource, fetch};
use crate::lock::{Change, FolderHash, Lock, LockEntry, changed_files, hash_folder};
use crate::manifest::SKILL_FILE;
use reef_sandbox::SandboxPolicy;
use reef_workspace::{Kind, Workspace};
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

/// Where skills are installed from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// A skill folder, or a folder of skill folders, on this machine.
    Path(PathBuf),
    /// A git repository (`URL#REV`).
    Git(GitSource),
}

impl Source {
    /// Reads `PATH`, `GIT_URL` or either with `#REV`. A local path is a git repository when a
    /// revision is given or it is one (bare or not); otherwise its folders are copied.
    pub fn parse(arg: &str, cwd: &Path) -> Result<Source, SkillError> {
        let (base, rev) = match arg.rsplit_once('#') {
            Some((base, rev)) if !rev.is_empty() => (base, Some(rev.to_owned())),
            _ => (arg, None),
        };
        if base.starts_with("https://") || base.starts_with("file://") {
            return Ok(Source::Git(GitSource {
                url: base.to_owned(),
                rev,
            }));
        }
        if base.contains("://") || base.starts_with("git@") {
            return Err(SkillError::BadUrl(format!(
                "{base}: only https:// git URLs and local paths are supported"
            )));
        }
        let path = cwd.join(base);
        let path = std::fs::canonicalize(&path).map_err(|e| {
            SkillError::BadUrl(format!(
                "{base}: not a folder or git repository on this machine ({e})"
            ))
        })?;
        let is_repo = path.join(".git").exists()
            || (path.join("HEAD").is_file() && path.join("objects").is_dir());
        if rev.is_some() || is_repo {
            return Ok(Source::Git(GitSource {
                url: format!("file://{}", path.display()),
                rev,
            }));
        }
        Ok(Source::Path(path))
    }

    fn shown(&self) -> String {
        match self {
            Source::Path(p) => p.display().to_string(),
            Source::Git(g) => g.url.clone(),
        }
    }
}

/// One skill installed (or that would be, for an update).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Installed {
    pub name: String,
    pub description: String,
    pub commit: Option<String>,
}

/// What `add` did: the skills installed and those skipped with why.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AddReport {
    pub installed: Vec<Installed>,
    pub skipped: Vec<(String, String)>,
}

/// A fetched new version of one installed skill, staged and not yet in place.
#[derive(Debug)]
pub struct UpdatePlan {
    pub name: String,
    pub from_commit: Option<String>,
    pub to_commit: Option<String>,
    /// Files added, changed or removed.
    pub changes: Vec<Change>,
    /// A unified diff of the text files that changed.
    pub diff: String,
    /// The checked copy that is installed when the plan is applied.
    copy: PathBuf,
    staged: Staged,
}

/// A staged source: removed when dropped.
#[derive(Debug)]
struct Staged {
    dir: PathBuf,
    /// The fetched tree (the source folder itself for a path source).
    tree: PathBuf,
    /// The name of a source that is itself one skill: its folder's, or the repository's.
    name: String,
    commit: Option<String>,
}

impl Drop for Staged {
    fn drop(&mut self) {
        if let Err(err) = std::fs::remove_dir_all(&self.dir)
            && err.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(dir = %self.dir.display(), "could not remove a staging folder: {err}");
        }
    }
}

/// Installs, removes, updates and verifies the skills of one reef home.
#[derive(Clone, Debug)]
pub struct Installer {
    roots: Roots,
    /// The sandbox git runs in (its network is narrowed per registry).
    policy: SandboxPolicy,
}

impl Installer {
    pub fn new(home: PathBuf, policy: SandboxPolicy) -> Self {
        Self {
            roots: Roots {
                workspace: None,
                home,
            },
            policy,
        }
    }

    /// Installs every valid skill in `source` (only `only`, when given).
    pub async fn add(&self, source: &Source, only: Option<&str>) -> Result<AddReport, SkillError> {
        let staged = self.stage(source).await?;
        let candidates = skill_folders(&staged.tree, &staged.name);
        if candidates.is_empty() {
            return Err(SkillError::NoSkills {
                source_name: source.shown(),
            });
        }
        let chosen: Vec<&(String, String)> = match only {
            Some(name) => {
                let hit: Vec<_> = candidates.iter().filter(|(n, _)| n == name).collect();
                if hit.is_empty() {
                    return Err(SkillError::NotInSource {
                        source_name: source.shown(),
                        name: name.to_owned(),
                        available: names(&candidates),
                    });
                }
                hit
            }
            None => candidates.iter().collect(),
        };
        let mut report = AddReport::default();
        let mut ready = Vec::new();
        // Each skill is copied out of the source once (links refused) and everything after —
        // the checks, the hashes, what is installed — works on that copy.
        for (name, rel) in chosen {
            let copy = self.copy_out(&staged, rel, name)?;
            match load(&copy_dir(&copy, name), name, &Origin::Home) {
                Ok(skill) => {
                    ready.push((name.clone(), rel.clone(), skill.manifest.description, copy))
                }
                Err(reason) => report.skipped.push((name.clone(), reason)),
            }
        }
        if ready.is_empty() {
            return Err(SkillError::NoneValid {
                source_name: source.shown(),
                reasons: report
                    .skipped
                    .iter()
                    .map(|(n, r)| format!("{n}: {r}"))
                    .collect::<Vec<_>>()
                    .join("; "),
            });
        }
        let mut lock = Lock::read(&self.roots.lock_file())?;
        for (name, rel, description, copy) in ready {
            let hashes = self.put_in_place(&copy, &name)?;
            let (source_name, rev) = match source {
                Source::Path(p) => (p.display().to_string(), None),
                Source::Git(g) => (g.url.clone(), g.rev.clone()),
            };
            lock.skills.insert(
                name.clone(),
                LockEntry {
                    source: source_name,
                    rev,
                    commit: staged.commit.clone(),
                    subdir: rel,
                    installed_at: now(),
                    hashes,
                },
            );
            // Pinned as soon as it is in place.
            lock.write(&self.roots.lock_file())?;
            report.installed.push(Installed {
                name,
                description,
                commit: staged.commit.clone(),
            });
        }
        Ok(report)
    }

    /// Removes the installed skill `name`.
    pub fn remove(&self, name: &str) -> Result<(), SkillError> {
        if crate::manifest::check_name(name).is_err() {
            return Err(SkillError::NotInstalled(name.to_owned()));
        }
        let mut lock = Lock::read(&self.roots.lock_file())?;
        let dir = self.roots.installed().join(name);
        let present = dir.symlink_metadata().is_ok();
        if lock.skills.remove(name).is_none() && !present {
            return Err(SkillError::NotInstalled(name.to_owned()));
        }
        if present {
            remove_any(&dir)?;
        }
        lock.write(&self.roots.lock_file())
    }

    /// Each installed skill with the files that changed since it was installed (empty: intact).
    #[allow(
        clippy::type_complexity,
        reason = "a list of (name, result) pairs reads plainly"
    )]
    pub fn verify(&self) -> Result<Vec<(String, Result<Vec<Change>, String>)>, SkillError> {
        let lock = Lock::read(&self.roots.lock_file())?;
        let mut out = Vec::new();
        for (name, entry) in &lock.skills {
            let dir = SkillDir::new(self.roots.installed(), name.clone());
            let result = hash_folder(&dir).map(|now| changed_files(&entry.hashes, &now));
            out.push((name.clone(), result));
        }
        Ok(out)
    }

    /// Accepts the installed skill `name` as its files are now.
    pub fn accept(&self, name: &str) -> Result<FolderHash, SkillError> {
        let mut lock = Lock::read(&self.roots.lock_file())?;
        let entry = lock
            .skills
            .get_mut(name)
            .ok_or_else(|| SkillError::NotInstalled(name.to_owned()))?;
        let dir = SkillDir::new(self.roots.installed(), name.to_owned());
        let hashes = hash_folder(&dir).map_err(|reason| SkillError::BadSource {
            path: dir.path().display().to_string(),
            reason,
        })?;
        entry.hashes = hashes.clone();
        entry.installed_at = now();
        lock.write(&self.roots.lock_file())?;
        Ok(hashes)
    }

    /// Fetches the source of `name` (every installed skill when `None`) again and stages what
    /// changed; nothing is replaced until [`Installer::apply`].
    pub async fn plan_update(&self, name: Option<&str>) -> Result<Vec<UpdatePlan>, SkillError> {
        let lock = Lock::read(&self.roots.lock_file())?;
        let names: Vec<String> = match name {
            Some(n) if lock.skills.contains_key(n) => vec![n.to_owned()],
            Some(n) => return Err(SkillError::NotInstalled(n.to_owned())),
            None => lock.skills.keys().cloned().collect(),
        };
        let mut plans = Vec::new();
        for name in names {
            let entry = &lock.skills[&name];
            let source =
                if entry.source.starts_with("https://") || entry.source.starts_with("file://") {
                    Source::Git(GitSource {
                        url: entry.source.clone(),
                        rev: entry.rev.clone(),
                    })
                } else {
                    Source::Path(PathBuf::from(&entry.source))
                };
            let staged = self.stage(&source).await?;
            // The copy (links refused, `.git` left out) is what is diffed, hashed and, if
            // accepted, installed: the source is read once.
            let copy = self.copy_out(&staged, &entry.subdir, &name)?;
            let new_dir = copy_dir(&copy, &name);
            let skill =
                load(&new_dir, &name, &Origin::Home).map_err(|reason| SkillError::BadSource {
                    path: format!("{}/{}", source.shown(), entry.subdir),
                    reason,
                })?;
            let new_hash = hash_folder(&skill.dir).map_err(|reason| SkillError::BadSource {
                path: new_dir.path().display().to_string(),
                reason,
            })?;
            let old_dir = SkillDir::new(self.roots.installed(), name.clone());
            let changes = changed_files(&entry.hashes, &new_hash);
            let diff = crate::diff::folders(&old_dir, &new_dir, &changes);
            plans.push(UpdatePlan {
                name,
                from_commit: entry.commit.clone(),
                to_commit: staged.commit.clone(),
                changes,
                diff,
                copy,
                staged,
            });
        }
        Ok(plans)
    }

    /// Puts a planned update in place and pins it.
    pub fn apply(&self, plan: UpdatePlan) -> Result<(), SkillError> {
        let mut lock = Lock::read(&self.roots.lock_file())?;
        let entry = lock
            .skills
            .get_mut(&plan.name)
            .ok_or_else(|| SkillError::NotInstalled(plan.name.clone()))?;
        entry.hashes = self.put_in_place(&plan.copy, &plan.name)?;
        entry.commit = plan.staged.commit.clone();
        entry.installed_at = now();
        lock.write(&self.roots.lock_file())
    }

    /// Makes `source` readable as a folder: a path as it is, a git registry cloned.
    async fn stage(&self, source: &Source) -> Result<Staged, SkillError> {
        let dir = self.new_staging()?;
        match source {
            Source::Path(path) => Ok(Staged {
                dir,
                tree: path.clone(),
                name: path
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default(),
                commit: None,
            }),
            Source::Git(git) => {
                let repo = git
                    .url
                    .trim_end_matches('/')
                    .rsplit('/')
                    .next()
                    .unwrap_or_default();
                let mut staged = Staged {
                    tree: dir.join("checkout"),
                    name: repo.trim_end_matches(".git").to_owned(),
                    dir,
                    commit: None,
                };
                staged.commit = Some(fetch(&self.policy, git, &staged.dir, "checkout").await?);
                Ok(staged)
            }
        }
    }

    fn new_staging(&self) -> Result<PathBuf, SkillError> {
        let base = self.roots.installed().join(".staging");
        std::fs::create_dir_all(&base).map_err(|e| SkillError::io(&base, e))?;
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let dir = base.join(format!("{}-{stamp}", std::process::id()));
        std::fs::create_dir(&dir).map_err(|e| SkillError::io(&dir, e))?;
        Ok(dir)
    }

    /// Copies the skill at `rel` in the staged tree into the staging folder, refusing links
    /// and special files (leaving out a `.git` folder at its top).
    fn copy_out(&self, staged: &Staged, rel: &str, name: &str) -> Result<PathBuf, SkillError> {
        let src = SkillDir::new(&staged.tree, rel.to_owned());
        let bad = |path: &str, reason: String| SkillError::BadSource {
            path: format!("{}/{path}", src.path().display()),
            reason,
        };
        let entries = src.entries().map_err(|r| bad("", r))?;
        let dest = staged.dir.join("out").join(name);
        std::fs::create_dir_all(&dest).map_err(|e| SkillError::io(&dest, e))?;
        for entry in entries {
            if entry.path == ".git" || entry.path.starts_with(".git/") {
                continue;
            }
            let target = dest.join(&entry.path);
            match entry.kind {
                Kind::Dir => {
                    std::fs::create_dir_all(&target).map_err(|e| SkillError::io(&target, e))?;
                }
                Kind::File => {
                    let bytes = src
                        .read(&entry.path, MAX_FILE)
                        .map_err(|r| bad(&entry.path, r))?;
                    if let Some(parent) = target.parent() {
                        std::fs::create_dir_all(parent).map_err(|e| SkillError::io(parent, e))?;
                    }
                    std::fs::write(&target, bytes).map_err(|e| SkillError::io(&target, e))?;
                    // Scripts stay executable; nothing more than 0755 is kept.
                    let mode = std::fs::symlink_metadata(src.path().join(&entry.path))
                        .map_or(0o644, |m| m.permissions().mode())
                        & 0o755;
                    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(mode))
                        .map_err(|e| SkillError::io(&target, e))?;
                }
                Kind::Symlink => {
                    return Err(bad(
                        &entry.path,
                        "is a symbolic link; skills are installed only \
                        from real files"
                            .into(),
                    ));
                }
                Kind::Other => {
                    return Err(bad(&entry.path, "is not a regular file".into()));
                }
            }
        }
        Ok(dest)
    }

    /// Moves the copied folder to `registry/NAME` (replacing an older one) and hashes it there.
    fn put_in_place(&self, copy: &Path, name: &str) -> Result<FolderHash, SkillError> {
        let installed = self.roots.installed();
        let target = installed.join(name);
        let old = copy.with_file_name(format!(".old-{name}"));
        let replacing = target.symlink_metadata().is_ok();
        if replacing {
            std::fs::rename(&target, &old).map_err(|e| SkillError::io(&target, e))?;
        }
        if let Err(err) = std::fs::rename(copy, &target) {
            if replacing && let Err(back) = std::fs::rename(&old, &target) {
                tracing::warn!(skill = name, "could not put the old version back: {back}");
            }
            return Err(SkillError::io(&target, err));
        }
        hash_folder(&SkillDir::new(installed, name.to_owned())).map_err(|reason| {
            SkillError::BadSource {
                path: target.display().to_string(),
                reason,
            }
        })
    }
}

/// The skill folders of a source: the folder itself when it has a `SKILL.md`, else its
/// sub-folders that have one (and those of a `skills/` folder in it), as (name, path inside).
fn skill_folders(tree: &Path, own_name: &str) -> Vec<(String, String)> {
    let Ok(ws) = Workspace::open(tree) else {
        return Vec::new();
    };
    let has_skill = |rel: &str| {
        ws.resolve(&format!("{rel}/{SKILL_FILE}"))
            .and_then(|p| ws.metadata(&p))
            .is_ok()
    };
    if has_skill(".") {
        return vec![(own_name.to_owned(), String::new())];
    }
    let mut out = Vec::new();
    for base in [".", "skills"] {
        let Ok(rel) = ws.resolve(base) else { continue };
        let Ok(entries) = ws.list(&rel) else { continue };
        for entry in entries.iter().filter(|e| e.kind == Kind::Dir) {
            let name = entry.name().to_string_lossy().into_owned();
            let path = entry.path.as_path().to_string_lossy().into_owned();
            if !name.starts_with('.') && has_skill(&path) && !out.iter().any(|(n, _)| n == &name) {
                out.push((name, path));
            }
        }
    }
    out
}

/// The copied skill `name` in the staging folder `copy` (`…/out/NAME`).
fn copy_dir(copy: &Path, name: &str) -> SkillDir {
    SkillDir::new(copy.parent().unwrap_or(copy), name.to_owned())
}

fn names(candidates: &[(String, String)]) -> String {
    candidates
        .iter()
        .map(|(n, _)| n.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

fn remove_any(path: &Path) -> Result<(), SkillError> {
    let meta = path
        .symlink_metadata()
        .map_err(|e| SkillError::io(path, e))?;
    if meta.is_dir() {
        std::fs::remove_dir_all(path)
    } else {
        std::fs::remove_file(path)
    }
    .map_err(|e| SkillError::io(path, e))
}

fn now() -> String {
    time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}
