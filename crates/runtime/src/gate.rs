//! The approval gate around `shell`: a command line that matches a dangerous pattern (and no
//! allow rule), or that asks for a `with-approval` secret, does not run; it becomes an
//! approval for the operator, and the agent is told so at once. When the operator approves,
//! the runtime runs it and delivers the output.

use crate::tools::AgentCtx;
use async_trait::async_trait;
use reef_core::{Tool, ToolContext, ToolError, ToolSpec};
use reef_security::{CommandDecision, CommandRules};
use serde_json::Value;
use std::sync::Arc;

pub(crate) struct ApprovalGate {
    pub inner: Arc<dyn Tool>,
    pub rules: CommandRules,
    pub ctx: Arc<AgentCtx>,
    /// The registry's secrets: which of them wait for approval.
    pub secrets: Arc<reef_agent::Secrets>,
}

#[async_trait]
impl Tool for ApprovalGate {
    fn spec(&self) -> ToolSpec {
        let mut spec = self.inner.spec();
        spec.description.push_str(
            " Destructive commands (rm -rf, git reset --hard, mkfs, …) and commands that hide \
             the program they run (sh -c, eval, xargs, python -c, …) wait for the operator's \
             approval instead of running; their result then arrives in your inbox. Prefer \
             plain commands, or a script file you wrote, to code in a string.",
        );
        spec
    }

    fn needs(&self, args: &Value) -> Vec<reef_core::Need> {
        self.inner.needs(args)
    }

    fn egress(&self, args: &Value) -> reef_core::Egress {
        self.inner.egress(args)
    }

    fn content_source(&self) -> Option<reef_core::ContentSource> {
        self.inner.content_source()
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<String, ToolError> {
        let line = args
            .get("command")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let asked: Vec<String> = args
            .get("secrets")
            .and_then(Value::as_array)
            .map(|names| {
                names
                    .iter()
                    .filter_map(|n| n.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        let gated = self.secrets.needing_approval(&asked);
        let (pattern, command) = match self.rules.decide(&line) {
            CommandDecision::NeedsApproval { pattern, command } => (pattern, command),
            _ if !gated.is_empty() => (format!("secret: {}", gated.join(", ")), line.clone()),
            _ => return self.inner.call(ctx, args).await,
        };
        let (runtime, me) = self.ctx.me().await?;
        let tool = self.inner.spec().name;
        let key = self.ctx.next_key(ctx, &tool, &args);
        // The operator sees which secrets the command would be given.
        let shown = if asked.is_empty() {
            line.clone()
        } else {
            format!("{line}   [given the secrets {}]", asked.join(", "))
        };
        let item = runtime
            .request_approval(&me, &tool, &args, &shown, &pattern, &key)
            .await
            .map_err(|e| ToolError::Failed(e.to_string()))?;
        if item.status != reef_store::PendingStatus::Pending {
            // The same command was asked for by an earlier attempt at this message.
            return Ok(format!(
                "`{line}` was already put to the operator by an earlier attempt (id {}): {}. {}",
                item.id,
                item.status.as_str(),
                item.answer.as_deref().unwrap_or("")
            ));
        }
        let why = if let Some(how) = pattern.strip_prefix("indirect: ") {
            format!("runs code reef cannot inspect ({how})")
        } else if let Some(names) = pattern.strip_prefix("secret: ") {
            format!("asks for {names}, given only with the operator's approval,")
        } else {
            format!("matches the dangerous pattern `{pattern}`")
        };
        Ok(format!(
            "NOT RUN: `{command}` {why}, so the whole command waits for the operator's \
             approval (id {}). If approved it runs and its output arrives in your inbox; if \
             denied or expired you are told. Do not retry it.",
            item.id
        ))
    }
}
