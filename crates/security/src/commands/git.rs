//! git's ways of running commands that are not in the line: configuration that names a
//! program, a hook directory or an alias (`git -c core.hooksPath=…`, `git config alias.x
//! '!…'`, `GIT_CONFIG_KEY_0=core.fsmonitor`), command strings in the environment
//! (`GIT_SSH_COMMAND='…'`, `PAGER='…'`), and subcommands that run commands (`submodule
//! foreach`, `rebase --exec`, `bisect run`, `filter-branch` filters, `--upload-pack`).
//! Harmless configuration (`git -c user.name=x commit`) and program names
//! (`GIT_PAGER=cat`) pass.

use super::indirect::{Finding, Inner, join};
use super::lex::Word;

/// A value that is a command line for a shell rather than one program's name.
fn command_line(value: &str) -> bool {
    value.contains(|c: char| c.is_whitespace() || ";|&$<>()`'\"\\!".contains(c))
}

/// Whether setting a configuration key (to `value`, when known) makes git run code reef
/// cannot see: hooks, aliases, an fsmonitor or ssh command, more configuration, or a
/// command line where git expects a program (a bare program name such as
/// `core.pager=cat` or `credential.helper=store` is fine).
fn setting_runs_code(key: &str, value: Option<&str>) -> bool {
    let lower = key.to_ascii_lowercase();
    let (section, name) = (
        lower.split('.').next().unwrap_or_default(),
        lower.rsplit('.').next().unwrap_or_default(),
    );
    let names_a_program = matches!(
        (section, name),
        ("core", "pager" | "editor" | "askpass")
            | ("sequence", "editor")
            | ("pager", _)
            | ("credential", "helper")
            | ("gpg", "program")
            | ("diff", "external")
    );
    if names_a_program && value.is_some_and(|v| !command_line(v)) {
        return false;
    }
    key_runs_code(key)
}

/// Whether a configuration key makes git run a program or read hooks, aliases or more
/// configuration from somewhere reef cannot see.
fn key_runs_code(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    let Some((section, rest)) = key.split_once('.') else {
        return false;
    };
    let (subsection, name) = match rest.rsplit_once('.') {
        Some((sub, name)) => (Some(sub), name),
        None => (None, rest),
    };
    match section {
        "alias" | "filter" | "pager" | "hook" => true,
        "core" => matches!(
            name,
            "hookspath"
                | "fsmonitor"
                | "sshcommand"
                | "pager"
                | "editor"
                | "askpass"
                | "gitproxy"
                | "alternaterefscommand"
        ),
        "include" | "includeif" => name == "path",
        "diff" => {
            name == "external" || (subsection.is_some() && matches!(name, "command" | "textconv"))
        }
        "merge" => subsection.is_some() && name == "driver",
        "mergetool" | "difftool" | "browser" | "man" => matches!(name, "cmd" | "path"),
        "credential" => name == "helper",
        "gpg" => name == "program",
        "sequence" => name == "editor",
        "uploadpack" => name == "packobjectshook",
        "remote" => matches!(name, "uploadpack" | "receivepack"),
        "protocol" => name == "allow",
        "interactive" => name == "difffilter",
        "web" => name == "browser",
        "sendemail" => matches!(name, "smtpserver" | "tocmd" | "cccmd" | "sendmailcmd"),
        "trailer" => matches!(name, "command" | "cmd"),
        _ => false,
    }
}

/// Variables whose value other programs run as a command line.
const COMMAND_VARIABLES: &[&str] = &[
    "GIT_SSH_COMMAND",
    "GIT_EDITOR",
    "GIT_SEQUENCE_EDITOR",
    "GIT_PAGER",
    "GIT_PROXY_COMMAND",
    "EDITOR",
    "VISUAL",
    "PAGER",
    "MANPAGER",
    "SYSTEMD_PAGER",
    "SUDO_EDITOR",
    "FCEDIT",
    "BROWSER",
    "LESSOPEN",
    "LESSCLOSE",
];

/// Assignments that make git (or a pager/editor user) run code: a command line in a
/// variable (`GIT_SSH_COMMAND='ssh -i k; …'`; a bare program name such as `GIT_PAGER=cat`
/// is fine) or configuration injected through the environment.
pub(super) fn environment<'a>(assignments: impl IntoIterator<Item = &'a Word>) -> Option<String> {
    assignments.into_iter().find_map(|word| {
        let (name, value) = word.text.split_once('=')?;
        let name = name.trim_end_matches('+');
        let command_line = COMMAND_VARIABLES.contains(&name) && command_line(value);
        let config = name == "GIT_CONFIG_PARAMETERS"
            || (name.starts_with("GIT_CONFIG_KEY_") && key_runs_code(value));
        let command_line = command_line && !value.is_empty();
        (command_line || config).then(|| format!("indirect: {name}"))
    })
}

/// `git …`: global `-c`/`--config-env` and subcommands that run commands.
pub(super) fn inspect(args: &[Word]) -> Finding {
    let mut i = 0;
    while let Some(word) = args.get(i) {
        let text = word.text.as_str();
        // `-c key=value` (value known) or `--config-env=key=VAR` (value in the environment).
        let setting = match text {
            "-c" | "--config-env" => {
                i += 1;
                args.get(i).map(|w| (w.text.as_str(), text == "-c"))
            }
            _ => text
                .strip_prefix("--config-env=")
                .map(|s| (s, false))
                .or_else(|| {
                    text.strip_prefix("-c")
                        .filter(|s| !s.is_empty())
                        .map(|s| (s, true))
                }),
        };
        if let Some((setting, value_known)) = setting {
            let (key, value) = match setting.split_once('=') {
                Some((key, value)) => (key, value_known.then_some(value)),
                None => (setting, None),
            };
            if setting_runs_code(key, value) {
                return Finding::new(format!("indirect: git -c {key}"));
            }
        } else if matches!(
            text,
            "-C" | "--git-dir" | "--work-tree" | "--namespace" | "--super-prefix"
        ) {
            i += 1;
        } else if !text.starts_with('-') {
            break;
        }
        i += 1;
    }
    let Some(sub) = args.get(i) else {
        return Finding::default();
    };
    let sub = sub.text.as_str();
    let rest = &args[i + 1..];
    let texts: Vec<&str> = rest.iter().map(|w| w.text.as_str()).collect();
    let value_of = |flags: &[&str]| {
        texts.iter().enumerate().find_map(|(j, t)| {
            flags.iter().find_map(|flag| {
                if t == flag {
                    Some(texts.get(j + 1).copied().unwrap_or_default())
                } else {
                    t.strip_prefix(flag)
                        .and_then(|v| v.strip_prefix('='))
                        .or_else(|| {
                            t.strip_prefix(flag)
                                .filter(|v| !v.is_empty() && flag.len() == 2)
                        })
                }
            })
        })
    };
    let transport = texts.iter().find(|t| {
        ["--upload-pack", "--receive-pack", "--exec"]
            .iter()
            .any(|f| *t == f || t.starts_with(&format!("{f}=")))
            || (sub == "clone" && **t == "-u")
    });
    let transport_subcommand = matches!(
        sub,
        "clone" | "fetch" | "pull" | "push" | "ls-remote" | "archive" | "submodule"
    );
    if let Some(flag) = transport.filter(|_| transport_subcommand) {
        let flag = flag.split('=').next().unwrap_or(flag);
        return Finding::new(format!("indirect: git {sub} {flag}"));
    }
    match sub {
        "config" => config(&texts),
        "clone" => {
            match value_of(&["-c", "--config"]).map(|s| s.split_once('=').unwrap_or((s, ""))) {
                Some((key, value)) if setting_runs_code(key, Some(value)) => {
                    Finding::new(format!("indirect: git clone -c {key}"))
                }
                _ => Finding::default(),
            }
        }
        "submodule" => match texts.iter().position(|t| *t == "foreach") {
            Some(j) => {
                let command = &rest[j + 1..];
                let start = command
                    .iter()
                    .position(|w| !w.text.starts_with('-'))
                    .unwrap_or(command.len());
                Finding::with(
                    "indirect: git submodule foreach",
                    Inner::Line(join(&command[start..])),
                )
            }
            None => Finding::default(),
        },
        "rebase" => match value_of(&["-x", "--exec"]) {
            Some(code) => Finding::with("indirect: git rebase --exec", Inner::Line(code.into())),
            None => Finding::default(),
        },
        "bisect" if texts.first() == Some(&"run") => {
            Finding::with("indirect: git bisect run", Inner::Words(rest[1..].to_vec()))
        }
        "filter-branch" => {
            let filters: Vec<Inner> = texts
                .iter()
                .enumerate()
                .filter(|(_, t)| t.starts_with("--") && t.ends_with("-filter"))
                .map(|(j, _)| Inner::Line(texts.get(j + 1).copied().unwrap_or_default().into()))
                .collect();
            if filters.is_empty() {
                Finding::default()
            } else {
                Finding {
                    reason: Some("indirect: git filter-branch".into()),
                    inner: filters,
                }
            }
        }
        "difftool" if value_of(&["-x", "--extcmd"]).is_some() => {
            Finding::new("indirect: git difftool --extcmd")
        }
        "grep" if value_of(&["-O", "--open-files-in-pager"]).is_some() => {
            Finding::new("indirect: git grep --open-files-in-pager")
        }
        _ => Finding::default(),
    }
}

/// `git config …` writing a key that runs code (reads and removals pass).
fn config(args: &[&str]) -> Finding {
    const READS: &[&str] = &[
        "--get",
        "--get-all",
        "--get-regexp",
        "--get-urlmatch",
        "--list",
        "-l",
        "--unset",
        "--unset-all",
        "--remove-section",
        "get",
        "list",
        "unset",
        "remove-section",
    ];
    if args.iter().any(|a| READS.contains(a)) {
        return Finding::default();
    }
    const VALUES: &[&str] = &["-f", "--file", "--blob", "--type", "--default", "--comment"];
    let mut operands = Vec::new();
    let mut words = args.iter().copied();
    while let Some(arg) = words.next() {
        if VALUES.contains(&arg) {
            words.next();
        } else if !arg.starts_with('-') && !matches!(arg, "set" | "add") {
            operands.push(arg);
        }
    }
    match operands.split_first() {
        Some((key, value)) if setting_runs_code(key, value.first().copied()) => {
            Finding::new(format!("indirect: git config {key}"))
        }
        _ => Finding::default(),
    }
}
