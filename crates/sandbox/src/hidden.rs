//! What a sandbox never shows: host secrets under the system directories it mounts, the
//! user's credential directories, and whatever the policy adds (reef's home, its store,
//! secret files). The same list is what reef's own file tools refuse to open.

use std::path::{Path, PathBuf};

/// Files under the visible system directories that hold host secrets: masked even though the
/// sandbox user may own them (a reef running as root maps root's files to it).
pub(crate) const SYSTEM_FILES: &[&str] = &[
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/sudoers",
    "/etc/security/opasswd",
];

/// Directories under the visible system directories that hold host secrets.
pub(crate) const SYSTEM_DIRS: &[&str] = &["/etc/ssh", "/etc/sudoers.d", "/etc/ssl/private"];

/// Workspace files the host acts on (loaded as reef's configuration, or run by `git`), relative
/// to the workspace: read-only inside the sandbox, and for reef's own file tools.
pub const READ_ONLY_IN_WORKSPACE: &[&str] = &["reef.toml", ".git/hooks", ".git/config"];

/// Credential files and directories relative to a user's home.
const IN_HOME: &[&str] = &[
    ".ssh",
    ".reef",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".kube",
    ".gnupg",
    ".docker",
    ".netrc",
    ".git-credentials",
];

/// The credential paths of the user whose home is `home` (`~/.ssh`, `~/.aws`, …), to put in
/// [`crate::SandboxPolicy::hidden`].
pub fn home_secrets(home: &Path) -> Vec<PathBuf> {
    IN_HOME.iter().map(|rel| home.join(rel)).collect()
}

/// Every path hidden under `extra` (the policy's own list): the system secrets, then `extra`,
/// each followed by where it really leads when it is (or runs through) a symbolic link, so
/// `~/.aws -> ~/dotfiles/aws` hides `~/dotfiles/aws` too. Paths that do not exist are kept:
/// they may appear later.
pub(crate) fn resolve(extra: &[PathBuf]) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    let listed = SYSTEM_FILES
        .iter()
        .chain(SYSTEM_DIRS)
        .map(PathBuf::from)
        .chain(extra.iter().cloned());
    for path in listed {
        let real = std::fs::canonicalize(&path).ok();
        for p in std::iter::once(path).chain(real) {
            if !out.contains(&p) {
                out.push(p);
            }
        }
    }
    out
}
