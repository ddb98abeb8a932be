//! Shared test fixture: a temporary workspace and a built-in registry.

use reef_core::{SessionId, ToolCallId, ToolContext, ToolError};
use reef_sandbox::{HelperCommand, Sandbox, SandboxBackend, SandboxPolicy};
use reef_tools::{BuiltinConfig, ToolRegistry, builtin_registry};
use serde_json::Value;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tempfile::TempDir;

pub struct Env {
    pub dir: TempDir,
    pub registry: ToolRegistry,
    pub ctx: ToolContext,
}

pub fn env() -> Env {
    env_with(BuiltinConfig::default())
}

pub fn env_with(config: BuiltinConfig) -> Env {
    env_hiding(config, &[])
}

/// An environment whose sandbox policy hides `hidden` (paths relative to the workspace).
pub fn env_hiding(config: BuiltinConfig, hidden: &[&str]) -> Env {
    let dir = tempfile::tempdir().unwrap();
    // Tools run in the real default sandbox, as they do for users.
    let sandbox = Arc::new(Sandbox::new(SandboxPolicy {
        backend: SandboxBackend::Landlock,
        helper: Some(HelperCommand {
            program: reef_test_support::sandbox_helper(),
            args: Vec::new(),
        }),
        kill_grace: Duration::from_millis(200),
        hidden: hidden.iter().map(|rel| dir.path().join(rel)).collect(),
        ..SandboxPolicy::default()
    }));
    let ctx = ToolContext {
        workspace: dir.path().to_path_buf(),
        session_id: SessionId::new(),
        call_id: ToolCallId::new(),
        read_only: Vec::new(),
    };
    Env {
        dir,
        registry: builtin_registry(sandbox, config),
        ctx,
    }
}

impl Env {
    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    pub fn write(&self, rel: &str, content: &str) {
        let path = self.root().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }

    pub fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.root().join(rel)).unwrap()
    }

    pub async fn call(&self, tool: &str, args: Value) -> Result<String, ToolError> {
        let tool = self
            .registry
            .get(tool)
            .unwrap_or_else(|| panic!("no tool {tool}"));
        tool.call(&self.ctx, args).await
    }

    pub async fn ok(&self, tool: &str, args: Value) -> String {
        match self.call(tool, args).await {
            Ok(out) => out,
            Err(err) => panic!("{tool} failed: {err}"),
        }
    }
}

/// The message of an `InvalidArguments` error; panics on anything else.
pub fn invalid(res: Result<String, ToolError>) -> String {
    match res {
        Err(ToolError::InvalidArguments(msg)) => msg,
        other => panic!("expected InvalidArguments, got {other:?}"),
    }
}

/// The message of a `Denied` error; panics on anything else.
pub fn denied(res: Result<String, ToolError>) -> String {
    match res {
        Err(ToolError::Denied(msg)) => msg,
        other => panic!("expected Denied, got {other:?}"),
    }
}

/// The message of a `Failed` error; panics on anything else.
pub fn failed(res: Result<String, ToolError>) -> String {
    match res {
        Err(ToolError::Failed(msg)) => msg,
        other => panic!("expected Failed, got {other:?}"),
    }
}
