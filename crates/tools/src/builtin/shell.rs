//! `shell`: runs `/bin/sh -c command` in the workspace through the sandbox.

use crate::args::parse_args;
use crate::builtin::BuiltinConfig;
use crate::files::{Files, blocking, tool_error};
use crate::secrets::Secrets;
use crate::text::truncate_middle;
use async_trait::async_trait;
use reef_core::{Need, Tool, ToolContext, ToolError, ToolSpec};
use reef_sandbox::{ExecOutput, ExecRequest, Sandbox};
use reef_workspace::{Kind, WorkspaceError};
use serde::Deserialize;
use serde_json::json;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Longest timeout a call may ask for.
const MAX_TIMEOUT_SECS: u64 = 600;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    command: String,
    #[serde(default)]
    cwd: Option<String>,
    #[serde(default)]
    timeout_secs: Option<u64>,
    #[serde(default)]
    secrets: Vec<String>,
}

pub(crate) struct ShellTool {
    sandbox: Arc<Sandbox>,
    default_timeout_secs: u64,
    max_output_chars: usize,
    secrets: Arc<Secrets>,
    files: Files,
}

impl ShellTool {
    pub(crate) fn new(
        sandbox: Arc<Sandbox>,
        config: &BuiltinConfig,
        secrets: Arc<Secrets>,
        files: Files,
    ) -> Self {
        Self {
            sandbox,
            default_timeout_secs: config.shell_timeout_secs,
            max_output_chars: config.max_shell_output_chars,
            secrets,
            files,
        }
    }

    /// The `secrets` parameter's schema, listing what may be asked for.
    fn secrets_schema(&self) -> serde_json::Value {
        let listed: Vec<String> = self
            .secrets
            .specs()
            .iter()
            .map(|s| match &s.description {
                Some(d) => format!("{} ({d})", s.name),
                None => s.name.clone(),
            })
            .collect();
        json!({
            "type": "array",
            "items": {"type": "string", "enum": self.secrets.specs().iter().map(|s| s.name.clone()).collect::<Vec<_>>()},
            "description": format!(
                "Secrets to set as environment variables of this command only, by name; use them \
                 as $NAME in the command. Their values are never shown to you. Available: {}.",
                listed.join(", ")
            )
        })
    }
}

#[async_trait]
impl Tool for ShellTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "shell".into(),
            description: format!(
                "Run a command with /bin/sh -c in the workspace. Returns the exit code, stdout \
                 and stderr; a non-zero exit is reported, not treated as an error. Output over \
                 {} characters keeps only its beginning and end.",
                self.max_output_chars
            ),
            parameters: {
                let mut schema = json!({
                    "type": "object",
                    "properties": {
                        "command": {"type": "string", "description": "Shell command line to run."},
                        "cwd": {"type": "string", "description": "Working directory relative to the workspace (default: the workspace root). Must stay inside the workspace."},
                        "timeout_secs": {"type": "integer", "minimum": 1, "maximum": MAX_TIMEOUT_SECS, "description": format!("Seconds before the command's process group is killed (default {}).", self.default_timeout_secs)}
                    },
                    "required": ["command"],
                    "additionalProperties": false
                });
                if !self.secrets.is_empty() {
                    schema["properties"]["secrets"] = self.secrets_schema();
                }
                schema
            },
        }
    }

    fn needs(&self, args: &serde_json::Value) -> Vec<Need> {
        // A command reads and writes anything in the workspace.
        let mut needs = vec![Need::Workspace];
        if let Some(names) = args.get("secrets").and_then(|s| s.as_array()) {
            needs.extend(
                names
                    .iter()
                    .filter_map(|n| n.as_str())
                    .map(|n| Need::Secret(n.to_owned())),
            );
        }
        needs
    }

    /// A command with network access may send its command line anywhere the sandbox lets it.
    fn egress(&self, _args: &serde_json::Value) -> reef_core::Egress {
        match self.sandbox.policy().network {
            reef_sandbox::NetworkMode::None => reef_core::Egress::None,
            reef_sandbox::NetworkMode::Allowlist | reef_sandbox::NetworkMode::Full => {
                reef_core::Egress::Anywhere
            }
        }
    }

    async fn call(&self, ctx: &ToolContext, args: serde_json::Value) -> Result<String, ToolError> {
        let args: Args = parse_args(args)?;
        if args.command.trim().is_empty() {
            return Err(ToolError::InvalidArguments(
                "command must not be empty".into(),
            ));
        }
        let timeout = args.timeout_secs.unwrap_or(self.default_timeout_secs);
        if timeout == 0 || timeout > MAX_TIMEOUT_SECS {
            return Err(ToolError::InvalidArguments(format!(
                "timeout_secs must be between 1 and {MAX_TIMEOUT_SECS}, got {timeout}"
            )));
        }
        let (root, cwd) = self.start_dir(ctx, args.cwd.clone()).await?;
        let mut req =
            ExecRequest::shell(&args.command, root, Duration::from_secs(timeout)).in_dir(cwd);
        req.read_only.clone_from(&ctx.read_only);
        for name in &args.secrets {
            let used = reef_core::SecretUse {
                tool: "shell",
                skill: None,
                host: None,
                approved: false,
            };
            let value = self.secrets.read(name, &used)?;
            req.env.push((name.clone(), value));
        }
        // What the command is given is remembered before it runs.
        self.secrets.persist("shell", &args.secrets, None).await?;
        let out = self
            .sandbox
            .run(req)
            .await
            .map_err(|err| ToolError::Failed(err.to_string()))?;
        let body = format_streams(&out, self.max_output_chars);
        if out.timed_out {
            return Err(ToolError::Failed(format!(
                "timed out after {timeout} s (process group killed)\n{body}"
            )));
        }
        let status = match (out.exit_code, out.signal) {
            (Some(code), _) => format!("exit_code: {code}"),
            (None, Some(signal)) => format!("killed by signal {signal}"),
            (None, None) => "exit status unknown".to_owned(),
        };
        Ok(format!("{status}\n{body}"))
    }
}

impl ShellTool {
    /// The workspace root and, relative to it, the directory the command starts in: `cwd`
    /// resolved like a file tool's path and checked to be a directory reached without a link.
    /// The sandbox mounts the root and changes into the directory inside, where links lead only
    /// to what the sandbox shows.
    async fn start_dir(
        &self,
        ctx: &ToolContext,
        cwd: Option<String>,
    ) -> Result<(PathBuf, PathBuf), ToolError> {
        let (files, root) = (self.files.clone(), ctx.workspace.clone());
        blocking(move || {
            let ws = files.open(&root)?;
            let Some(cwd) = cwd else {
                return Ok((ws.root().to_path_buf(), PathBuf::new()));
            };
            let dir = ws.resolve(&cwd).map_err(tool_error)?;
            let shown = dir.display();
            match ws.metadata(&dir).map_err(tool_error)?.kind {
                Kind::Dir => Ok((ws.root().to_path_buf(), dir.as_path().to_path_buf())),
                Kind::Symlink => Err(tool_error(WorkspaceError::Symlink {
                    link: shown.clone(),
                    path: shown,
                })),
                Kind::File | Kind::Other => Err(ToolError::InvalidArguments(format!(
                    "cwd {shown} is not a directory in the workspace"
                ))),
            }
        })
        .await
    }
}

/// The `stdout:` and `stderr:` sections, sharing a budget of `max_chars` characters.
/// When both are long each gets half; a short stream leaves its unused share to the other.
pub fn format_streams(out: &ExecOutput, max_chars: usize) -> String {
    let o = out.stdout.chars().count();
    let e = out.stderr.chars().count();
    let (o_budget, e_budget) = if o + e <= max_chars {
        (o, e)
    } else {
        let e_budget = e.min(max_chars / 2).max(max_chars.saturating_sub(o)).min(e);
        (max_chars - e_budget, e_budget)
    };
    let section = |name: &str, text: &str, budget: usize, capped: bool| {
        let mut s = format!("{name}:");
        if text.is_empty() {
            s.push_str(" (empty)\n");
        } else {
            s.push('\n');
            s.push_str(&truncate_middle(text, budget));
            if !s.ends_with('\n') {
                s.push('\n');
            }
        }
        if capped {
            s.push_str("[output limit reached; the rest of this stream was discarded]\n");
        }
        s
    };
    let mut body = section("stdout", &out.stdout, o_budget, out.stdout_truncated);
    body.push_str(&section(
        "stderr",
        &out.stderr,
        e_budget,
        out.stderr_truncated,
    ));
    body
}
