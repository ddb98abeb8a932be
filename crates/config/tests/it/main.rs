//! Integration tests for reef-config: layering, origins, validation errors, secrets, context
//! windows and compaction settings.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "test code")]

mod channels;
mod cluster;
mod context;
mod daemon_api;
mod errors;
mod hooks;
mod layering;
mod mcp;
mod memory;
mod project;
mod routines;
mod sandbox;
mod secrets;

use reef_config::{Config, ConfigError, LoadOptions};
use std::path::Path;

pub(crate) struct Fixture {
    pub dir: tempfile::TempDir,
}

impl Fixture {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("home")).unwrap();
        std::fs::create_dir_all(dir.path().join("project")).unwrap();
        Self { dir }
    }

    pub fn home(&self) -> std::path::PathBuf {
        self.dir.path().join("home")
    }

    pub fn project(&self) -> std::path::PathBuf {
        self.dir.path().join("project")
    }

    pub fn write(&self, rel: &Path, text: &str) {
        std::fs::write(self.dir.path().join(rel), text).unwrap();
    }

    pub fn load(&self, env: &[(&str, &str)], overrides: &[&str]) -> Result<Config, ConfigError> {
        let mut vars: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        vars.push(("REEF_HOME".into(), self.home().display().to_string()));
        let opts = LoadOptions::from_env(
            vars,
            Some(self.project()),
            overrides.iter().map(|s| (*s).to_owned()).collect(),
        )?;
        Config::load(&opts)
    }
}

pub(crate) const MAIN: &str = r#"
[model]
default = "main"
[providers.main]
wire_api = "openai-chat"
base_url = "http://127.0.0.1:8080/v1"
model = "gpt-4o-mini"
api_key_env = "OPENAI_API_KEY"
"#;
