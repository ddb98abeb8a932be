//! Workspace-relative paths: what the agent gives, normalised lexically. `..` is applied to the
//! text, which is exact here because nothing beneath the root is ever resolved through a link.

use crate::WorkspaceError;
use std::ffi::OsStr;
use std::fmt;
use std::path::{Component, Path, PathBuf};

/// A path inside the workspace, made only of plain names (empty for the root itself).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RelPath {
    inner: PathBuf,
}

impl RelPath {
    /// The workspace root.
    pub fn root() -> Self {
        Self {
            inner: PathBuf::new(),
        }
    }

    /// The path as plain names, empty for the root: join it to the root to get the host path.
    pub fn as_path(&self) -> &Path {
        &self.inner
    }

    pub fn is_root(&self) -> bool {
        self.inner.as_os_str().is_empty()
    }

    /// The last name, `None` for the root.
    pub fn file_name(&self) -> Option<&OsStr> {
        self.inner.file_name()
    }

    /// The directory holding this path, `None` for the root.
    pub fn parent(&self) -> Option<RelPath> {
        if self.is_root() {
            return None;
        }
        Some(Self {
            inner: self
                .inner
                .parent()
                .map(Path::to_path_buf)
                .unwrap_or_default(),
        })
    }

    /// A path already made of plain names only (from this crate's own walks).
    pub(crate) fn from_plain(inner: PathBuf) -> Self {
        Self { inner }
    }

    /// This path with one more plain name. `name` comes from a directory listing.
    pub(crate) fn child(&self, name: &OsStr) -> Self {
        Self {
            inner: self.inner.join(name),
        }
    }

    /// The text shown to the agent: relative, `.` for the root.
    pub fn display(&self) -> String {
        if self.is_root() {
            ".".to_owned()
        } else {
            self.inner.to_string_lossy().into_owned()
        }
    }
}

impl fmt::Display for RelPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.display())
    }
}

/// Turns `given` into a path beneath the workspace whose root is `roots[0]` (the canonical
/// root; any other entry is another spelling of it, e.g. as configured). Absolute paths must
/// lie under one of them; `.` is dropped and `..` removes the name before it, and popping
/// above the root is refused.
pub(crate) fn resolve(given: &str, roots: &[&Path]) -> Result<RelPath, WorkspaceError> {
    let invalid = |reason: &str| WorkspaceError::InvalidPath {
        path: given.to_owned(),
        reason: reason.to_owned(),
    };
    if given.is_empty() {
        return Err(invalid("it is empty (use \".\" for the workspace root)"));
    }
    if given.contains('\0') {
        return Err(invalid("it contains a NUL byte"));
    }
    let outside = || WorkspaceError::Outside {
        path: given.to_owned(),
        root: roots.first().map(|r| r.to_path_buf()).unwrap_or_default(),
    };
    let requested = Path::new(given);
    let relative = if requested.is_absolute() {
        // Normalise first so `/root/a/../b` and `/root/.` are recognised.
        let absolute = normalize_absolute(requested).ok_or_else(outside)?;
        roots
            .iter()
            .find_map(|root| absolute.strip_prefix(root).ok())
            .map(Path::to_path_buf)
            .ok_or_else(outside)?
    } else {
        requested.to_path_buf()
    };
    let mut inner = PathBuf::new();
    for component in relative.components() {
        match component {
            Component::Normal(name) => inner.push(name),
            Component::CurDir => {}
            Component::ParentDir => {
                if !inner.pop() {
                    return Err(outside());
                }
            }
            Component::RootDir | Component::Prefix(_) => return Err(outside()),
        }
    }
    Ok(RelPath { inner })
}

/// `path` (absolute) with `.` dropped and `..` applied; `None` when `..` climbs above `/`.
fn normalize_absolute(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::from("/");
    for component in path.components() {
        match component {
            Component::Normal(name) => out.push(name),
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::resolve;
    use crate::WorkspaceError;
    use std::path::Path;

    fn rel(given: &str) -> Result<String, WorkspaceError> {
        resolve(given, &[Path::new("/w/root"), Path::new("/link/root")]).map(|p| p.display())
    }

    #[test]
    fn normalises_lexically_and_refuses_to_climb_out() {
        assert_eq!(rel(".").unwrap(), ".");
        assert_eq!(rel("a/./b/../c").unwrap(), "a/c");
        assert_eq!(rel("a/..").unwrap(), ".");
        assert_eq!(rel("/w/root/a/../b").unwrap(), "b");
        assert_eq!(rel("/w/root").unwrap(), ".");
        assert_eq!(rel("/link/root/x").unwrap(), "x");
        for bad in [
            "..",
            "a/../..",
            "./../x",
            "/w/rootx/a",
            "/etc/passwd",
            "/w/root/..",
        ] {
            assert!(
                matches!(rel(bad), Err(WorkspaceError::Outside { .. })),
                "{bad}: {:?}",
                rel(bad)
            );
        }
        assert!(matches!(rel(""), Err(WorkspaceError::InvalidPath { .. })));
        assert!(matches!(
            rel("a\0b"),
            Err(WorkspaceError::InvalidPath { .. })
        ));
    }
}
