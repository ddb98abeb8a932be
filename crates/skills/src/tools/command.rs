//! A skill that declares `parameters` as a tool of its own: its arguments checked against
//! them, then its `run.sh` / `run.py` / `main.py` run in the sandbox with the arguments as JSON
//! on stdin and as `REEF_ARG_*` variables, the workspace as the working directory and the
//! skill's folder read-only.

use crate::catalog::Skill;
use crate::params::{arg_env, check_args, schema};
use async_trait::async_trait;
use reef_core::{Tool, ToolContext, ToolError, ToolSpec};
use reef_sandbox::{ExecRequest, Sandbox};
use reef_tools::{format_streams, truncate_middle};
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

pub(crate) struct CommandTool {
    pub skill: Arc<Skill>,
    pub sandbox: Arc<Sandbox>,
    pub timeout_secs: u64,
    pub max_output_chars: usize,
}

#[async_trait]
impl Tool for CommandTool {
    fn content_source(&self) -> Option<reef_core::ContentSource> {
        Some(reef_core::ContentSource::Skill)
    }

    /// Its command may send its arguments anywhere the sandbox lets it.
    fn egress(&self, _args: &Value) -> reef_core::Egress {
        match self.sandbox.policy().network {
            reef_sandbox::NetworkMode::None => reef_core::Egress::None,
            _ => reef_core::Egress::Anywhere,
        }
    }

    fn spec(&self) -> ToolSpec {
        let m = &self.skill.manifest;
        ToolSpec {
            name: m.name.clone(),
            description: m.description.clone(),
            parameters: schema(m.parameters.as_deref()),
        }
    }

    fn needs(&self, _args: &serde_json::Value) -> Vec<reef_core::Need> {
        // Its command runs in the agent's sandbox, which shows it the whole workspace.
        vec![reef_core::Need::Workspace]
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<String, ToolError> {
        let m = &self.skill.manifest;
        let args =
            check_args(m.parameters.as_deref(), args).map_err(ToolError::InvalidArguments)?;
        let entry = self
            .skill
            .entry
            .as_deref()
            .unwrap_or(crate::ENTRY_POINTS[0]);
        let folder = self.skill.dir.path();
        let script = folder.join(entry).to_string_lossy().into_owned();
        let program = if entry.ends_with(".py") {
            "python3"
        } else {
            "/bin/sh"
        };
        let timeout = m.timeout_secs.unwrap_or(self.timeout_secs);
        let mut req = ExecRequest::new(
            program,
            vec![script],
            ctx.workspace.clone(),
            Duration::from_secs(timeout),
        );
        req.stdin = Some(Value::Object(args.clone()).to_string().into_bytes());
        req.env = arg_env(&args);
        req.env.push((
            "REEF_SKILL_DIR".into(),
            folder.to_string_lossy().into_owned(),
        ));
        req.read_only = vec![folder];
        let out = self
            .sandbox
            .run(req)
            .await
            .map_err(|e| ToolError::Failed(e.to_string()))?;
        if out.timed_out {
            return Err(ToolError::Failed(format!(
                "`{}` timed out after {timeout} s and was stopped\n{}",
                m.name,
                format_streams(&out, self.max_output_chars)
            )));
        }
        if !out.success() {
            let status = match (out.exit_code, out.signal) {
                (Some(code), _) => format!("exited with code {code}"),
                (None, Some(signal)) => format!("was killed by signal {signal}"),
                (None, None) => "failed".to_owned(),
            };
            let stderr = if out.stderr.trim().is_empty() {
                "(no stderr)".to_owned()
            } else {
                truncate_middle(out.stderr.trim_end(), self.max_output_chars)
            };
            return Err(ToolError::Failed(format!(
                "`{}` {status}:\n{stderr}",
                m.name
            )));
        }
        let mut text = truncate_middle(&out.stdout, self.max_output_chars);
        if out.stdout_truncated {
            text.push_str("\n[output limit reached; the rest was discarded]");
        }
        Ok(text)
    }
}
