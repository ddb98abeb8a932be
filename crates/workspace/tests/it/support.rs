//! A workspace next to a directory outside it holding a secret.

use reef_workspace::Workspace;
use std::path::{Path, PathBuf};

pub const SECRET: &str = "host-secret-token";

pub struct Fixture {
    _tmp: tempfile::TempDir,
    pub root: PathBuf,
    pub outside: PathBuf,
}

impl Fixture {
    pub fn new() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("ws");
        let outside = tmp.path().join("outside");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("secret.txt"), SECRET).unwrap();
        Self {
            _tmp: tmp,
            root,
            outside,
        }
    }

    pub fn ws(&self) -> Workspace {
        Workspace::open(&self.root).unwrap()
    }

    pub fn write(&self, rel: &str, content: &str) {
        let path = self.root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }

    pub fn link(&self, target: impl AsRef<Path>, rel: &str) {
        std::os::unix::fs::symlink(target, self.root.join(rel)).unwrap();
    }

    /// Names in the outside directory, sorted.
    pub fn outside_names(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(&self.outside)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    /// The secret is still there, unchanged, and nothing else appeared outside.
    pub fn assert_outside_untouched(&self) {
        assert_eq!(self.outside_names(), ["secret.txt"]);
        assert_eq!(
            std::fs::read_to_string(self.outside.join("secret.txt")).unwrap(),
            SECRET
        );
    }
}

impl Fixture {
    /// The text of a workspace file, read directly.
    pub fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.root.join(rel)).unwrap()
    }
}
