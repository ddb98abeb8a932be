//! The workspace as the small profile's checks see it: beneath the root, never through a link
//! (the workspace is the agent's; a link could point anywhere), and never at a path the
//! sandbox hides, so a check tells the model nothing its tools could not.

use reef_workspace::{Kind, Metadata, Workspace, WorkspaceError};
use std::path::{Path, PathBuf};

/// The workspace root and the paths hidden in it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Files<'a> {
    root: &'a Path,
    hidden: &'a [PathBuf],
}

impl<'a> Files<'a> {
    pub(crate) fn new(root: &'a Path, hidden: &'a [PathBuf]) -> Self {
        Self { root, hidden }
    }

    /// What is at `given`.
    fn lookup(&self, given: &str) -> Result<Metadata, WorkspaceError> {
        let ws = Workspace::open(self.root)?.with_hidden(self.hidden);
        ws.resolve(given).and_then(|rel| ws.metadata(&rel))
    }

    /// Whether `given` is certainly not in the workspace. A path that cannot be looked up
    /// safely (a link on the way, a hidden path) counts as present, so it never earns a note.
    pub(super) fn absent(&self, given: &str) -> bool {
        matches!(self.lookup(given), Err(WorkspaceError::NotFound { .. }))
    }

    /// Whether `given` is a file with something in it.
    pub(super) fn holds_text(&self, given: &str) -> bool {
        self.lookup(given)
            .is_ok_and(|m| m.kind == Kind::File && m.len > 0)
    }

    /// Whether `given` names a file or directory.
    pub(super) fn present(&self, given: &str) -> bool {
        self.lookup(given)
            .is_ok_and(|m| matches!(m.kind, Kind::File | Kind::Dir))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hidden_paths_and_links_are_not_looked_at() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir(root.join(".reef")).unwrap();
        std::fs::write(root.join(".reef/token"), "secret").unwrap();
        std::fs::write(root.join("a.txt"), "text").unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("b.txt"), "text").unwrap();
        std::os::unix::fs::symlink(outside.path(), root.join("out")).unwrap();
        let hidden = [root.join(".reef")];
        let files = Files::new(root, &hidden);
        assert!(files.holds_text("a.txt"));
        // Positive controls: the hidden file and the file through the link hold text.
        assert!(root.join(".reef/token").metadata().unwrap().len() > 0);
        assert!(root.join("out/b.txt").metadata().unwrap().len() > 0);
        assert!(!files.holds_text(".reef/token") && !files.present(".reef/token"));
        assert!(!files.absent(".reef/token"), "not reported missing either");
        assert!(!files.holds_text("out/b.txt") && !files.absent("out/b.txt"));
        assert!(files.absent("c.txt"));
    }
}
