//! Command rules for approvals: which shell command lines must wait for the operator. A line
//! is split into its simple commands (at `;`, `&&`, `||`, `|`, `&`, newlines, `(`, `)`,
//! backticks and `$(`), wrappers such as `sudo` and `env X=1` are looked through, and each
//! simple command is checked on its own, so `git status; rm -rf /` cannot hide behind an
//! allow rule for `git *`. This is a prompt for a human, not the isolation boundary: the
//! sandbox confines whatever runs.

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
    /// pattern and no allow rule needs approval.
    pub fn decide(&self, line: &str) -> CommandDecision {
        for words in simple_commands(line) {
            let words = strip_wrappers(&words);
            let Some(program) = words.first() else {
                continue;
            };
            let program = program.rsplit('/').next().unwrap_or(program);
            let text = std::iter::once(program)
                .chain(words[1..].iter().map(String::as_str))
                .collect::<Vec<_>>()
                .join(" ");
            let Some(pattern) = self
                .dangerous
                .iter()
                .find(|p| p.matches(program, &words[1..]))
            else {
                continue;
            };
            if self.allow.iter().any(|glob| glob_match(glob, &text)) {
                continue;
            }
            return CommandDecision::NeedsApproval {
                pattern: pattern.text.clone(),
                command: text,
            };
        }
        CommandDecision::Allow
    }
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
    fn matches(&self, program: &str, args: &[String]) -> bool {
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

/// Splits a line into simple commands of shell words (quotes and backslashes honoured).
fn simple_commands(line: &str) -> Vec<Vec<String>> {
    let mut commands = Vec::new();
    let mut words: Vec<String> = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = line.chars().peekable();
    let end_word = |words: &mut Vec<String>, word: &mut String, in_word: &mut bool| {
        if *in_word {
            words.push(std::mem::take(word));
            *in_word = false;
        }
    };
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                for q in chars.by_ref() {
                    if q == '\'' {
                        break;
                    }
                    word.push(q);
                }
            }
            '"' => {
                in_word = true;
                while let Some(q) = chars.next() {
                    match q {
                        '"' => break,
                        '\\' => word.extend(chars.next()),
                        _ => word.push(q),
                    }
                }
            }
            '\\' => {
                in_word = true;
                word.extend(chars.next());
            }
            ';' | '&' | '|' | '\n' | '(' | ')' | '`' => {
                end_word(&mut words, &mut word, &mut in_word);
                if !words.is_empty() {
                    commands.push(std::mem::take(&mut words));
                }
            }
            '$' if chars.peek() == Some(&'(') => {
                end_word(&mut words, &mut word, &mut in_word);
                if !words.is_empty() {
                    commands.push(std::mem::take(&mut words));
                }
            }
            c if c.is_whitespace() => end_word(&mut words, &mut word, &mut in_word),
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    end_word(&mut words, &mut word, &mut in_word);
    if !words.is_empty() {
        commands.push(words);
    }
    commands
}

/// Drops leading `VAR=value` assignments and wrappers that run their arguments as a command.
fn strip_wrappers(words: &[String]) -> Vec<String> {
    const WRAPPERS: &[&str] = &[
        "sudo", "doas", "env", "command", "exec", "nohup", "time", "nice", "ionice", "builtin",
    ];
    let mut rest = words;
    loop {
        match rest.first() {
            Some(w) if w.contains('=') && !w.starts_with('-') && !w.starts_with('=') => {
                rest = &rest[1..];
            }
            Some(w) if WRAPPERS.contains(&w.rsplit('/').next().unwrap_or(w)) => {
                rest = &rest[1..];
                // Options of the wrapper itself (`sudo -u x`, `nice -n 5`): skip flag words
                // and, conservatively, one value after a flag that takes one.
                while let Some(flag) = rest.first().filter(|f| f.starts_with('-')) {
                    let takes_value = matches!(flag.as_str(), "-u" | "-g" | "-n" | "-c");
                    rest = &rest[1..];
                    if takes_value && !rest.is_empty() {
                        rest = &rest[1..];
                    }
                }
            }
            _ => return rest.to_vec(),
        }
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
