//! `TestHome`: a temporary home directory with a reef home and a workspace, removed on drop.

use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use tempfile::TempDir;

/// A hermetic home for one test: `path/.reef` (the reef home) and `path/work` (a workspace).
#[derive(Debug)]
pub struct TestHome {
    dir: TempDir,
}

impl TestHome {
    /// Creates the temporary directory with `.reef` and `work` inside.
    ///
    /// # Panics
    /// When the directories cannot be created.
    pub fn new() -> TestHome {
        let dir = match tempfile::Builder::new().prefix("reef-test-").tempdir() {
            Ok(d) => d,
            Err(e) => panic!("TestHome: cannot create a temporary directory: {e}"),
        };
        // The reef home is private, as reef itself creates it.
        for (sub, mode) in [(".reef", 0o700), ("work", 0o755)] {
            let created = std::fs::DirBuilder::new()
                .mode(mode)
                .create(dir.path().join(sub));
            if let Err(e) = created {
                panic!("TestHome: cannot create {sub}: {e}");
            }
        }
        TestHome { dir }
    }

    /// The root of the temporary home.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// `path/.reef`, the reef home (exists).
    pub fn reef_home(&self) -> PathBuf {
        self.path().join(".reef")
    }

    /// `path/work`, a workspace directory (exists).
    pub fn workspace(&self) -> PathBuf {
        self.path().join("work")
    }

    /// `reef_home/reef.toml`.
    pub fn config_path(&self) -> PathBuf {
        self.reef_home().join("reef.toml")
    }

    /// Writes `toml` to `reef_home/reef.toml` and returns its path.
    ///
    /// # Panics
    /// When the file cannot be written.
    pub fn write_config(&self, toml: &str) -> PathBuf {
        let path = self.config_path();
        if let Err(e) = std::fs::write(&path, toml) {
            panic!("TestHome: cannot write {}: {e}", path.display());
        }
        path
    }

    /// The configuration of this home alone: its `reef.toml`, no project file, no
    /// environment, no overrides.
    ///
    /// # Panics
    /// When the configuration is invalid (the test wrote a bad `reef.toml`).
    pub fn load_config(&self) -> reef_config::Config {
        let opts = reef_config::LoadOptions {
            home: self.reef_home(),
            project_dir: None,
            env: Default::default(),
            overrides: Vec::new(),
        };
        match reef_config::Config::load(&opts) {
            Ok(config) => config,
            Err(e) => panic!("TestHome: invalid configuration: {e}"),
        }
    }
}

impl Default for TestHome {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn home_has_reef_home_workspace_and_config() {
        let home = TestHome::new();
        assert!(home.reef_home().is_dir());
        assert!(home.workspace().is_dir());
        let path = home.write_config("[providers.main]\n");
        assert_eq!(std::fs::read_to_string(path).unwrap(), "[providers.main]\n");
        let root = home.path().to_path_buf();
        drop(home);
        assert!(!root.exists());
    }
}
