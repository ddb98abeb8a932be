//! Reading an operator command line (`invoke ada coder write a haiku`) into a [`Command`].

use super::spec::{CommandSpec, Kind, UsageError, shown};

/// One operator command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    /// Starts an agent, from a template (the default one when none is named), with an
    /// optional first task.
    Invoke {
        name: String,
        template: Option<String>,
        task: Option<String>,
    },
    /// Stops an agent for good; `purge` also deletes its workspace.
    Destroy {
        name: String,
        purge: bool,
    },
    List,
    /// The daemon's status, or one agent's.
    Status {
        name: Option<String>,
    },
    /// The last `lines` events of an agent.
    Logs {
        name: String,
        lines: usize,
    },
    /// Moves an agent to another configured provider.
    Model {
        name: String,
        provider: String,
    },
    Models,
    Templates,
    Persona {
        name: String,
        text: String,
    },
    Pause {
        name: String,
    },
    Resume {
        name: String,
    },
    Questions,
    Answer {
        id: String,
        text: String,
    },
    Approve {
        id: String,
    },
    Deny {
        id: String,
        reason: Option<String>,
    },
    Help {
        command: Option<String>,
    },
}

/// Log lines `logs` shows when no number is given, and the most it shows.
pub const DEFAULT_LOG_LINES: usize = 20;
pub const MAX_LOG_LINES: usize = 200;

impl Command {
    /// Parses one command line, without the front end's marker (IRC's `!`). `is_template`
    /// tells whether a word names a template, so `invoke ada coder fix it` takes `coder` as
    /// the template and `invoke ada fix it` takes all of `fix it` as the task.
    pub fn parse(line: &str, is_template: impl Fn(&str) -> bool) -> Result<Self, UsageError> {
        let line = line.trim();
        let (word, rest) = split_word(line);
        if word.is_empty() {
            return Err(UsageError::Empty);
        }
        let spec = CommandSpec::find(word).ok_or_else(|| UsageError::Unknown(shown(word)))?;
        let usage = || UsageError::Usage(spec);
        let bad = |what: String| UsageError::BadArgument { spec, what };
        // The first word of the arguments, required, and what follows it. A name or id never
        // starts with `-`, so `destroy --purge` is missing its NAME.
        let first = |rest: &str| -> Result<(String, String), UsageError> {
            let (w, r) = split_word(rest);
            if w.is_empty() || w.starts_with('-') {
                return Err(usage());
            }
            Ok((w.to_owned(), r.to_owned()))
        };
        let none = |rest: &str, command: Command| {
            if rest.is_empty() {
                Ok(command)
            } else {
                Err(bad(format!("`{}` takes no arguments", spec.name)))
            }
        };
        let text = |s: String| (!s.is_empty()).then_some(s);
        Ok(match spec.kind {
            Kind::Invoke => {
                let (name, rest) = first(rest)?;
                let (next, after) = split_word(&rest);
                let (template, task) = if !next.is_empty() && is_template(next) {
                    (Some(next.to_owned()), text(after.to_owned()))
                } else {
                    (None, text(rest))
                };
                Command::Invoke {
                    name,
                    template,
                    task,
                }
            }
            Kind::Destroy => {
                let (name, rest) = first(rest)?;
                match rest.as_str() {
                    "" => Command::Destroy { name, purge: false },
                    "--purge" => Command::Destroy { name, purge: true },
                    other if other.contains(char::is_whitespace) => return Err(usage()),
                    other => return Err(bad(format!("unknown option `{}`", shown(other)))),
                }
            }
            Kind::List => none(rest, Command::List)?,
            Kind::Models => none(rest, Command::Models)?,
            Kind::Templates => none(rest, Command::Templates)?,
            Kind::Questions => none(rest, Command::Questions)?,
            Kind::Status => {
                let (name, rest) = split_word(rest);
                if !rest.is_empty() {
                    return Err(usage());
                }
                Command::Status {
                    name: text(name.to_owned()),
                }
            }
            Kind::Logs => {
                let (name, rest) = first(rest)?;
                let lines = match rest.as_str() {
                    "" => DEFAULT_LOG_LINES,
                    n if n.contains(char::is_whitespace) => return Err(usage()),
                    n => match n.parse::<usize>() {
                        Ok(k)
                            if n.bytes().all(|b| b.is_ascii_digit())
                                && (1..=MAX_LOG_LINES).contains(&k) =>
                        {
                            k
                        }
                        _ => {
                            return Err(bad(format!(
                                "N must be a number from 1 to {MAX_LOG_LINES}, not `{}`",
                                shown(n)
                            )));
                        }
                    },
                };
                Command::Logs { name, lines }
            }
            Kind::Model => {
                let (name, rest) = first(rest)?;
                let (provider, extra) = first(&rest)?;
                if !extra.is_empty() {
                    return Err(usage());
                }
                Command::Model { name, provider }
            }
            Kind::Persona | Kind::Answer => {
                let (word, rest) = first(rest)?;
                if rest.is_empty() {
                    return Err(usage());
                }
                if spec.kind == Kind::Persona {
                    Command::Persona {
                        name: word,
                        text: rest,
                    }
                } else {
                    Command::Answer {
                        id: word,
                        text: rest,
                    }
                }
            }
            Kind::Pause | Kind::Resume | Kind::Approve => {
                let (word, rest) = first(rest)?;
                if !rest.is_empty() {
                    return Err(usage());
                }
                match spec.kind {
                    Kind::Pause => Command::Pause { name: word },
                    Kind::Resume => Command::Resume { name: word },
                    _ => Command::Approve { id: word },
                }
            }
            Kind::Deny => {
                let (id, reason) = first(rest)?;
                Command::Deny {
                    id,
                    reason: text(reason),
                }
            }
            Kind::Help => {
                let (name, rest) = split_word(rest);
                if !rest.is_empty() {
                    return Err(usage());
                }
                if !name.is_empty() && CommandSpec::find(name).is_none() {
                    return Err(UsageError::Unknown(shown(name)));
                }
                Command::Help {
                    command: text(name.to_ascii_lowercase()),
                }
            }
        })
    }
}

/// The first whitespace-separated word of `s` and the rest, trimmed.
fn split_word(s: &str) -> (&str, &str) {
    let s = s.trim();
    match s.split_once(char::is_whitespace) {
        Some((word, rest)) => (word, rest.trim()),
        None => (s, ""),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(line: &str) -> Result<Command, UsageError> {
        Command::parse(line, |t| t == "coder")
    }

    #[test]
    fn every_command_parses() {
        assert_eq!(
            parse("invoke ada coder write a haiku about reefs into haiku.txt"),
            Ok(Command::Invoke {
                name: "ada".into(),
                template: Some("coder".into()),
                task: Some("write a haiku about reefs into haiku.txt".into()),
            })
        );
        assert_eq!(
            parse("INVOKE ada fix   the build"),
            Ok(Command::Invoke {
                name: "ada".into(),
                template: None,
                task: Some("fix   the build".into()),
            })
        );
        // A task whose first word names a template takes it as the template: the front end
        // says which template it used, so the operator sees the choice.
        assert_eq!(
            parse("invoke ada coder"),
            Ok(Command::Invoke {
                name: "ada".into(),
                template: Some("coder".into()),
                task: None,
            })
        );
        assert_eq!(
            parse("invoke ada"),
            Ok(Command::Invoke {
                name: "ada".into(),
                template: None,
                task: None
            })
        );
        assert_eq!(
            parse("destroy ada --purge"),
            Ok(Command::Destroy {
                name: "ada".into(),
                purge: true
            })
        );
        assert_eq!(parse("list"), Ok(Command::List));
        assert_eq!(parse("status"), Ok(Command::Status { name: None }));
        assert_eq!(
            parse("status ada"),
            Ok(Command::Status {
                name: Some("ada".into())
            })
        );
        assert_eq!(
            parse("logs ada 5"),
            Ok(Command::Logs {
                name: "ada".into(),
                lines: 5
            })
        );
        assert_eq!(
            parse("logs ada"),
            Ok(Command::Logs {
                name: "ada".into(),
                lines: DEFAULT_LOG_LINES
            })
        );
        assert_eq!(
            parse("model ada backup"),
            Ok(Command::Model {
                name: "ada".into(),
                provider: "backup".into()
            })
        );
        assert_eq!(
            parse("persona ada a terse poet"),
            Ok(Command::Persona {
                name: "ada".into(),
                text: "a terse poet".into()
            })
        );
        assert_eq!(
            parse("pause ada"),
            Ok(Command::Pause { name: "ada".into() })
        );
        assert_eq!(
            parse("resume ada"),
            Ok(Command::Resume { name: "ada".into() })
        );
        assert_eq!(parse("questions"), Ok(Command::Questions));
        assert_eq!(
            parse("answer q1 use the staging db"),
            Ok(Command::Answer {
                id: "q1".into(),
                text: "use the staging db".into()
            })
        );
        assert_eq!(
            parse("approve a7"),
            Ok(Command::Approve { id: "a7".into() })
        );
        assert_eq!(
            parse("deny a7 too risky"),
            Ok(Command::Deny {
                id: "a7".into(),
                reason: Some("too risky".into())
            })
        );
        assert_eq!(parse("models"), Ok(Command::Models));
        assert_eq!(parse("templates"), Ok(Command::Templates));
        assert_eq!(parse("help"), Ok(Command::Help { command: None }));
        assert_eq!(
            parse("help Invoke"),
            Ok(Command::Help {
                command: Some("invoke".into())
            })
        );
    }

    #[test]
    fn bad_lines_get_one_line_naming_the_usage() {
        let err = |line: &str| parse(line).unwrap_err().to_string();
        assert_eq!(err(""), "no command given; try `help`");
        assert_eq!(err("   "), "no command given; try `help`");
        assert_eq!(err("nuke all"), "unknown command `nuke`; try `help`");
        assert_eq!(err("destroy"), "usage: destroy NAME [--purge]");
        assert_eq!(
            err("destroy ada --force"),
            "unknown option `--force`; usage: destroy NAME [--purge]"
        );
        assert_eq!(
            err("logs ada many"),
            "N must be a number from 1 to 200, not `many`; usage: logs NAME [N]"
        );
        assert!(err("logs ada 0").starts_with("N must be a number"));
        assert!(err("logs ada 201").starts_with("N must be a number"));
        assert_eq!(err("model ada"), "usage: model NAME PROVIDER");
        assert_eq!(err("model ada a b"), "usage: model NAME PROVIDER");
        assert_eq!(err("persona ada"), "usage: persona NAME TEXT");
        assert_eq!(err("answer q1"), "usage: answer ID TEXT");
        assert_eq!(err("pause"), "usage: pause NAME");
        assert_eq!(err("pause a b"), "usage: pause NAME");
        assert_eq!(err("list all"), "`list` takes no arguments; usage: list");
        assert_eq!(err("help nuke"), "unknown command `nuke`; try `help`");
        assert_eq!(err("status a b"), "usage: status [NAME]");
        assert_eq!(err("destroy --purge"), "usage: destroy NAME [--purge]");
        assert_eq!(
            err("destroy ada x\nQUIT :bye"),
            "usage: destroy NAME [--purge]"
        );
        assert!(err("logs ada +5").starts_with("N must be a number"));
        assert_eq!(err("logs ada 5 6"), "usage: logs NAME [N]");
        assert_eq!(err("invoke -x"), "usage: invoke NAME [TEMPLATE] [task…]");
        assert_eq!(err("nuke\x01"), "unknown command `nuke\\u{1}`; try `help`");
        assert!(!err(&"x".repeat(500)).contains(&"x".repeat(41)));
        for line in ["invoke", "deny", "approve", "resume", "logs"] {
            assert!(err(line).starts_with("usage: "), "{line}");
        }
    }
}
