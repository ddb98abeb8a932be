//! Command rules for approvals: which `shell` command lines of daemon agents wait for the
//! operator. A line is lexed the way a POSIX shell reads it (quotes, escapes, comments,
//! redirections, here-documents) into every simple command it runs, those inside `$(…)`,
//! backticks, `<(…)` and subshells included. Assignments, reserved words and wrappers
//! (`sudo`, `env`, `timeout 5`, `nice -n 5`, …) are looked through, and each simple command
//! is judged on its own, so `git status; rm -rf /` cannot hide behind an allow rule for
//! `git *`.
//!
//! A simple command needs approval when it matches a dangerous pattern (`rm -rf`, …) or when
//! it is indirect: the program that really runs is not in the line as a program with its
//! arguments. That is a substitution, glob or brace expansion as the program (`X=rm; $X -rf
//! x`, `$(echo rm) -rf x`), a shell or interpreter given code in a string or on stdin
//! (`sh -c`, `bash -ec`, `… | sh`, `sh < file`, `python3 -c`, `perl -e`, `node -e`), `eval`,
//! `source`, `xargs`, `find -exec`/`-delete`, `parallel`, `watch`, `trap`, `su -c`, `awk`
//! calling `system()`, `sed`'s `e` command, or git configuration that names a program
//! (`git -c core.hooksPath=…`, `alias.*`, `GIT_SSH_COMMAND='…'`). The pattern reported then
//! names the indirection (`indirect: sh -c`, `indirect: variable as command`). These checks
//! are always on, whatever `approvals.dangerous` says. An allow rule covering the simple
//! command clears them (`shell(python3 -c *)`); code reef can read inside it (`bash -c
//! '…'`, `eval …`, `xargs rm`, `find -exec rm`) is then judged in turn.
//!
//! A script file is not indirection: `bash build.sh`, `python3 tool.py`, `./run.sh`, `make`
//! and `npm test` all run files, like any program does. Gating `bash build.sh` while
//! `./build.sh` runs would only teach agents to `chmod +x`. `source`/`.` is gated all the
//! same, because it runs in the current shell and can redefine what the rest of the line
//! means.
//!
//! This is a speed bump for an honest but careless agent, not a security boundary. A shell
//! is too expressive to judge from its text, and any program the agent writes to a file and
//! runs can still do anything the sandbox allows. The sandbox is the boundary: these rules
//! only make the agent stop and ask before the obvious destructive or opaque commands. Not
//! judged, among others: commands run elsewhere (`ssh host cmd`, `docker exec`), options
//! from variables (`rm $FLAGS x`), state set up by an earlier tool call (`export`, files),
//! and every program's private way of running another.

mod git;
mod indirect;
mod interp;
mod lex;
mod prefix;
mod tools;

use indirect::Inner;
use lex::Word;

/// How deep code inside code (`bash -c "eval '…'"`) is followed before asking anyway.
const MAX_DEPTH: usize = 8;

/// Patterns that need approval unless an allow rule covers them.
pub const DEFAULT_DANGEROUS: &[&str] = &[
    "rm -rf",
    "git reset --hard",
    "git clean -f",
    "git push --force",
    "mkfs",
    "dd",
    "shred",
    "shutdown",
    "reboot",
    "chmod -R",
    "chown -R",
];

/// What to do with a command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CommandDecision {
    /// Run it.
    Allow,
    /// Wait for the operator: `command` (one simple command of the line) matched `pattern`.
    NeedsApproval { pattern: String, command: String },
}

/// A dangerous pattern: a program and what its arguments must contain.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Pattern {
    text: String,
    program: String,
    /// Short flags that must all be present (`-rf` → r, f), case-insensitive.
    short: Vec<char>,
    /// Long flags (`--hard`) and words (`reset`) that must be present.
    words: Vec<String>,
}

/// Dangerous patterns plus allow rules (`shell(git *)`: `*` matches any text).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommandRules {
    dangerous: Vec<Pattern>,
    allow: Vec<String>,
}

impl CommandRules {
    /// Rules from pattern texts and allow rules; an allow rule is `shell(GLOB)` or `GLOB`.
    pub fn new<S: AsRef<str>>(dangerous: &[S], allow: &[S]) -> Result<CommandRules, String> {
        let dangerous = dangerous
            .iter()
            .map(|p| parse_pattern(p.as_ref()))
            .collect::<Result<_, _>>()?;
        let allow = allow
            .iter()
            .map(|a| {
                let a = a.as_ref().trim();
                let glob = a
                    .strip_prefix("shell(")
                    .and_then(|g| g.strip_suffix(')'))
                    .unwrap_or(a);
                if glob.trim().is_empty() {
                    Err(format!("allow rule {a:?} has an empty pattern"))
                } else {
                    Ok(glob.trim().to_owned())
                }
            })
            .collect::<Result<_, _>>()?;
        Ok(CommandRules { dangerous, allow })
    }

    /// `DEFAULT_DANGEROUS` with no allow rules.
    pub fn defaults() -> CommandRules {
        CommandRules {
            dangerous: DEFAULT_DANGEROUS
                .iter()
                .filter_map(|p| parse_pattern(p).ok())
                .collect(),
            allow: Vec::new(),
        }
    }

    /// Decides for a whole command line: the first simple command that matches a dangerous
    /// pattern, or runs code reef cannot see, and no allow rule needs approval.
    pub fn decide(&self, line: &str) -> CommandDecision {
        self.decide_line(line, 0)
    }

    fn decide_line(&self, line: &str, depth: usize) -> CommandDecision {
        let Some(commands) = lex::simple_commands(line) else {
            return CommandDecision::NeedsApproval {
                pattern: "indirect: nested too deep".into(),
                command: line.to_owned(),
            };
        };
        for words in commands {
            let decision = self.decide_simple(&words, depth);
            if decision != CommandDecision::Allow {
                return decision;
            }
        }
        CommandDecision::Allow
    }

    fn decide_simple(&self, words: &[Word], depth: usize) -> CommandDecision {
        let invocation = prefix::invocation(words);
        let shown = if invocation.words.is_empty() {
            words
        } else {
            invocation.words
        };
        let text = display(shown);
        let finding = indirect::inspect(&invocation);
        let pattern = invocation
            .words
            .split_first()
            .filter(|(program, _)| program.hidden_program().is_none())
            .and_then(|(program, args)| {
                let program = basename(&program.text);
                let args: Vec<&str> = args.iter().map(|w| w.text.as_str()).collect();
                self.dangerous.iter().find(|p| p.matches(program, &args))
            });
        let allowed = || self.allow.iter().any(|glob| glob_match(glob, &text));
        if let Some(pattern) = pattern.map(|p| p.text.clone()).or(finding.reason)
            && !allowed()
        {
            return CommandDecision::NeedsApproval {
                pattern,
                command: text,
            };
        }
        if !finding.inner.is_empty() && depth >= MAX_DEPTH {
            return CommandDecision::NeedsApproval {
                pattern: "indirect: nested too deep".into(),
                command: text,
            };
        }
        for inner in finding.inner {
            let decision = match inner {
                Inner::Line(line) => self.decide_line(&line, depth + 1),
                Inner::Words(words) => self.decide_simple(&words, depth + 1),
            };
            if decision != CommandDecision::Allow {
                return decision;
            }
        }
        CommandDecision::Allow
    }
}

/// The last path component: `/bin/rm` → `rm`.
fn basename(program: &str) -> &str {
    program.rsplit('/').next().unwrap_or(program)
}

/// A simple command as shown to the operator and matched by allow rules: the program's base
/// name (when written out) and the arguments, quotes removed.
fn display(words: &[Word]) -> String {
    let mut parts = Vec::with_capacity(words.len());
    for (i, word) in words.iter().enumerate() {
        if i == 0 && word.hidden_program().is_none() {
            parts.push(basename(&word.text));
        } else {
            parts.push(word.text.as_str());
        }
    }
    parts.join(" ")
}

fn parse_pattern(text: &str) -> Result<Pattern, String> {
    let mut parts = text.split_whitespace();
    let program = parts
        .next()
        .ok_or_else(|| "a dangerous pattern must not be empty".to_owned())?
        .to_owned();
    let mut short = Vec::new();
    let mut words = Vec::new();
    for part in parts {
        if let Some(flags) = part.strip_prefix('-').filter(|f| !f.starts_with('-')) {
            short.extend(flags.chars().map(|c| c.to_ascii_lowercase()));
        } else {
            words.push(part.to_owned());
        }
    }
    Ok(Pattern {
        text: text.trim().to_owned(),
        program,
        short,
        words,
    })
}

impl Pattern {
    fn matches(&self, program: &str, args: &[&str]) -> bool {
        let program_ok =
            program == self.program || program.starts_with(&format!("{}.", self.program));
        if !program_ok {
            return false;
        }
        let mut flags: Vec<char> = Vec::new();
        for arg in args {
            if let Some(long) = arg.strip_prefix("--") {
                match long {
                    "recursive" => flags.push('r'),
                    "force" => flags.push('f'),
                    _ => {}
                }
            } else if let Some(short) = arg.strip_prefix('-') {
                flags.extend(short.chars().map(|c| c.to_ascii_lowercase()));
            }
        }
        self.short.iter().all(|c| flags.contains(c))
            && self.words.iter().all(|w| {
                args.iter().any(|a| {
                    // A long flag may carry a value: `--force=yes`.
                    a == w || (w.starts_with("--") && a.starts_with(&format!("{w}=")))
                })
            })
    }
}

/// `*` matches any run of characters; everything else matches itself.
fn glob_match(glob: &str, text: &str) -> bool {
    let parts: Vec<&str> = glob.split('*').collect();
    let [first, middle @ .., last] = parts.as_slice() else {
        return glob == text;
    };
    let Some(mut rest) = text.strip_prefix(first) else {
        return false;
    };
    for part in middle {
        match rest.find(part) {
            Some(i) => rest = &rest[i + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}
