//! Step-through debugging of daemon agents: the operator's breakpoints per agent, the stop a
//! turn waits at (recorded as a pending item of kind `breakpoint`, so every front end sees
//! it), and the commands that let the turn go on: step, continue, skip, edit, inspect. This
//! file holds the vocabulary; `stop.rs` the per-agent debugger a session pauses in;
//! `commands.rs` the operator's side.

mod commands;
mod stop;

pub use commands::MAX_DEBUG_WAIT;
pub(crate) use stop::Debuggers;

use crate::error::RuntimeError;
use reef_agent::StopKind;
use reef_core::Message;
use serde::Serialize;
use serde_json::Value;

/// Where an agent's turns stop.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Breakpoint {
    /// Before every model request.
    Round,
    /// Before every call of this tool; `None`: of any tool.
    Tool(Option<String>),
}

impl Breakpoint {
    /// Parses `round`, `tool` or `tool=NAME` (the `--break` syntax).
    pub fn parse(spec: &str) -> Result<Breakpoint, RuntimeError> {
        let spec = spec.trim();
        match spec.split_once('=') {
            None if spec == "round" => Ok(Breakpoint::Round),
            None if spec == "tool" => Ok(Breakpoint::Tool(None)),
            Some(("tool", name))
                if !name.is_empty()
                    && name
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') =>
            {
                Ok(Breakpoint::Tool(Some(name.to_owned())))
            }
            _ => Err(RuntimeError::invalid(
                "break",
                format!("`{spec}` is not a breakpoint; use `round`, `tool` or `tool=NAME`"),
            )),
        }
    }

    /// The `--break` text of this breakpoint.
    pub fn spec(&self) -> String {
        match self {
            Breakpoint::Round => "round".into(),
            Breakpoint::Tool(None) => "tool".into(),
            Breakpoint::Tool(Some(name)) => format!("tool={name}"),
        }
    }

    pub(crate) fn matches(&self, kind: StopKind<'_>) -> bool {
        match (self, kind) {
            (Breakpoint::Round, StopKind::Round) => true,
            (Breakpoint::Tool(None), StopKind::Tool(_)) => true,
            (Breakpoint::Tool(Some(name)), StopKind::Tool(tool)) => name == tool,
            _ => false,
        }
    }
}

/// What the operator tells an agent paused at a breakpoint.
#[derive(Clone, Debug, PartialEq)]
pub enum DebugCommand {
    /// Take the step and stop again before the next one, of any kind.
    Step,
    /// Take the step and stop only at breakpoints.
    Continue,
    /// Do not run the tool call; the model gets `error` as its result.
    Skip { error: String },
    /// Replace the tool call's arguments (a JSON object); the agent stays paused.
    Edit { arguments: Value },
    /// Show the whole context the next request carries; the agent stays paused.
    Inspect,
}

impl DebugCommand {
    /// Parses the text form: `step`, `continue`, `skip TEXT`, `edit JSON`, `inspect` (the
    /// answer to a breakpoint item, a line of `reef agent debug`).
    pub fn parse(text: &str) -> Result<DebugCommand, RuntimeError> {
        let text = text.trim();
        let (word, rest) = text
            .split_once(char::is_whitespace)
            .map_or((text, ""), |(w, r)| (w, r.trim()));
        let bare = |command: DebugCommand| {
            if rest.is_empty() {
                Ok(command)
            } else {
                Err(RuntimeError::invalid(
                    "command",
                    format!("`{word}` takes no argument"),
                ))
            }
        };
        match word {
            "step" | "s" => bare(DebugCommand::Step),
            "continue" | "c" => bare(DebugCommand::Continue),
            "inspect" | "i" => bare(DebugCommand::Inspect),
            "skip" => {
                if rest.is_empty() {
                    return Err(RuntimeError::invalid(
                        "error",
                        "`skip` needs the error text the model gets instead of the result",
                    ));
                }
                Ok(DebugCommand::Skip {
                    error: rest.to_owned(),
                })
            }
            "edit" => {
                let arguments = serde_json::from_str(rest).map_err(|e| {
                    RuntimeError::invalid(
                        "arguments",
                        format!("`edit` needs the new arguments as a JSON object: {e}"),
                    )
                })?;
                Ok(DebugCommand::Edit { arguments })
            }
            _ => Err(RuntimeError::invalid(
                "command",
                format!(
                    "`{word}` is not a debug command; use step, continue, skip TEXT, \
                     edit JSON or inspect"
                ),
            )),
        }
    }

    pub(crate) fn name(&self) -> &'static str {
        match self {
            DebugCommand::Step => "step",
            DebugCommand::Continue => "continue",
            DebugCommand::Skip { .. } => "skip",
            DebugCommand::Edit { .. } => "edit",
            DebugCommand::Inspect => "inspect",
        }
    }
}

/// An agent's debugging state as the operator sees it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DebugStatus {
    pub agent: String,
    /// `round`, `tool`, `tool=NAME`.
    pub breakpoints: Vec<String>,
    /// Whether the agent stops before its next step of any kind (after `step`).
    pub stepping: bool,
    /// Where the agent waits, if it does.
    pub paused: Option<PausedView>,
}

/// A stop an agent waits at.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PausedView {
    /// The pending item (`reef questions`).
    pub id: String,
    pub round: u32,
    /// `model_request` or `tool_call`.
    pub at: &'static str,
    pub tool: Option<String>,
    pub call_id: Option<String>,
    /// The call's arguments as they will run (after any edit).
    pub arguments: Option<Value>,
    pub edited: bool,
    pub context_tokens: u64,
    pub window: Option<u64>,
    /// Messages in the context, system prompt included.
    pub context_messages: usize,
    /// The whole context (only for `inspect`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context: Option<Vec<Message>>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn breakpoints_parse_and_print_back() {
        for spec in ["round", "tool", "tool=shell", "tool=read_file"] {
            assert_eq!(Breakpoint::parse(spec).unwrap().spec(), spec);
        }
        for bad in ["", "rounds", "tool=", "tool=a b", "shell", "tool=x=y"] {
            let err = Breakpoint::parse(bad).unwrap_err().to_string();
            assert!(err.starts_with("break: "), "{bad}: {err}");
        }
    }

    #[test]
    fn commands_parse_with_their_arguments() {
        assert_eq!(DebugCommand::parse(" step ").unwrap(), DebugCommand::Step);
        assert_eq!(DebugCommand::parse("c").unwrap(), DebugCommand::Continue);
        assert_eq!(
            DebugCommand::parse("skip not now, please").unwrap(),
            DebugCommand::Skip {
                error: "not now, please".into()
            }
        );
        assert_eq!(
            DebugCommand::parse(r#"edit {"command": "ls -la"}"#).unwrap(),
            DebugCommand::Edit {
                arguments: json!({"command": "ls -la"})
            }
        );
        for (bad, field) in [
            ("skip", "error"),
            ("edit ls", "arguments"),
            ("step now", "command"),
            ("jump", "command"),
        ] {
            let err = DebugCommand::parse(bad).unwrap_err();
            assert!(
                matches!(&err, RuntimeError::Invalid { field: f, .. } if f == field),
                "{bad}: {err}"
            );
        }
    }
}
