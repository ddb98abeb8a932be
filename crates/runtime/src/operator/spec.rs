//! The operator commands' names, usages and summaries: what `help` shows, and which command
//! a name is.

/// A command's name, its arguments as `help` shows them, and what it does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CommandSpec {
    pub name: &'static str,
    pub args: &'static str,
    pub summary: &'static str,
    pub(super) kind: Kind,
}

/// Which command a spec is, so parsing matches every one exhaustively.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    Invoke,
    Destroy,
    List,
    Status,
    Logs,
    Model,
    Models,
    Templates,
    Persona,
    Pause,
    Resume,
    Questions,
    Answer,
    Approve,
    Deny,
    Help,
}

/// Every command, in the order `help` lists them.
pub const COMMANDS: &[CommandSpec] = &[
    spec(
        Kind::Invoke,
        "invoke",
        "NAME [TEMPLATE] [task…]",
        "start an agent, with a first task",
    ),
    spec(
        Kind::Destroy,
        "destroy",
        "NAME [--purge]",
        "stop an agent for good (--purge: delete its workspace)",
    ),
    spec(Kind::List, "list", "", "the agents and their states"),
    spec(
        Kind::Status,
        "status",
        "[NAME]",
        "the daemon's status, or one agent's",
    ),
    spec(
        Kind::Logs,
        "logs",
        "NAME [N]",
        "an agent's last N events (default 20, at most 200)",
    ),
    spec(
        Kind::Model,
        "model",
        "NAME PROVIDER",
        "move an agent to another provider",
    ),
    spec(Kind::Models, "models", "", "the configured providers"),
    spec(Kind::Templates, "templates", "", "the agent templates"),
    spec(
        Kind::Persona,
        "persona",
        "NAME TEXT",
        "set an agent's persona",
    ),
    spec(
        Kind::Pause,
        "pause",
        "NAME",
        "pause an agent after its current turn",
    ),
    spec(Kind::Resume, "resume", "NAME", "resume a paused agent"),
    spec(
        Kind::Questions,
        "questions",
        "",
        "the questions agents are waiting on",
    ),
    spec(Kind::Answer, "answer", "ID TEXT", "answer a question"),
    spec(Kind::Approve, "approve", "ID", "approve a pending action"),
    spec(Kind::Deny, "deny", "ID [reason]", "deny a pending action"),
    spec(
        Kind::Help,
        "help",
        "[COMMAND]",
        "the commands, or one command's usage",
    ),
];

const fn spec(
    kind: Kind,
    name: &'static str,
    args: &'static str,
    summary: &'static str,
) -> CommandSpec {
    CommandSpec {
        name,
        args,
        summary,
        kind,
    }
}

/// `name args` of a command, as `help` and usage errors show it.
pub(super) fn usage(spec: &CommandSpec) -> String {
    if spec.args.is_empty() {
        spec.name.to_owned()
    } else {
        format!("{} {}", spec.name, spec.args)
    }
}

impl CommandSpec {
    /// The command's usage line: `invoke NAME [TEMPLATE] [task…]`.
    pub fn usage(&self) -> String {
        usage(self)
    }

    /// The command named `name` (any case).
    pub fn find(name: &str) -> Option<&'static CommandSpec> {
        COMMANDS.iter().find(|c| c.name.eq_ignore_ascii_case(name))
    }
}

/// What is wrong with a command line, in one line fit to send back as the answer.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum UsageError {
    #[error("no command given; try `help`")]
    Empty,
    #[error("unknown command `{0}`; try `help`")]
    Unknown(String),
    #[error("usage: {}", usage(.0))]
    Usage(&'static CommandSpec),
    #[error("{what}; usage: {}", usage(.spec))]
    BadArgument {
        spec: &'static CommandSpec,
        what: String,
    },
}

/// A word of the input as an error shows it: control characters escaped, at most 40
/// characters, so the answer stays one line whatever the front end passed in.
pub(super) fn shown(word: &str) -> String {
    let escaped: String = word.escape_debug().collect();
    match escaped.char_indices().nth(40) {
        Some((cut, _)) => format!("{}…", &escaped[..cut]),
        None => escaped,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::operator::Command;

    fn parse(line: &str) -> Result<Command, UsageError> {
        Command::parse(line, |t| t == "coder")
    }

    #[test]
    fn help_covers_every_command_once() {
        let mut names: Vec<&str> = COMMANDS.iter().map(|c| c.name).collect();
        let all = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), all);
        for spec in COMMANDS {
            assert!(!spec.summary.is_empty());
            // Each parses to something or to its own usage error, never to `unknown`.
            let parsed = parse(spec.name);
            assert!(
                !matches!(parsed, Err(UsageError::Unknown(_) | UsageError::Empty)),
                "{}",
                spec.name
            );
        }
        assert_eq!(
            CommandSpec::find("LOGS").map(CommandSpec::usage).as_deref(),
            Some("logs NAME [N]")
        );
    }
}
