//! Indirection: a simple command whose real program reef cannot see in the line needs
//! approval whatever it is — a substitution as the program (`$X -rf x`), code in a string or
//! on stdin (`sh -c`, `eval`, `… | python3`), commands run by another command (`xargs`,
//! `find -exec`, `watch`), files run in the current shell (`source`), and tools that run
//! commands from their own languages (`awk` `system()`, `sed` `e`, `vim -c`, git
//! configuration). Where the inner code is in the line (`bash -c '…'`, `xargs rm`), it is
//! returned too, so an allow rule for the outer command does not launder what runs inside.

use super::lex::Word;
use super::prefix::Invocation;
use super::{basename, git, interp, tools};

/// Code that a simple command runs and reef can read.
pub(super) enum Inner {
    /// A command line (`sh -c LINE`, `eval WORDS…`).
    Line(String),
    /// A program and its arguments (`xargs rm -f`, `find -exec rm {} ;`).
    Words(Vec<Word>),
}

/// What indirection a simple command uses, if any, and the inner code reef can read.
#[derive(Default)]
pub(super) struct Finding {
    pub reason: Option<String>,
    pub inner: Vec<Inner>,
}

impl Finding {
    pub(super) fn new(reason: impl Into<String>) -> Finding {
        Finding {
            reason: Some(reason.into()),
            inner: Vec::new(),
        }
    }

    pub(super) fn with(reason: impl Into<String>, inner: Inner) -> Finding {
        Finding {
            reason: Some(reason.into()),
            inner: vec![inner],
        }
    }
}

/// Inspects one simple command (its prefixes already looked through).
pub(super) fn inspect(invocation: &Invocation<'_>) -> Finding {
    if let Some(reason) = &invocation.reason {
        return Finding::new(reason.clone());
    }
    let Some((program, args)) = invocation.words.split_first() else {
        return Finding::default();
    };
    if let Some(why) = program.hidden_program() {
        return Finding::new(format!("indirect: {why}"));
    }
    if let Some(reason) = git::environment(invocation.assignments.iter().copied()) {
        return Finding::new(reason);
    }
    let name = basename(&program.text);
    let has = |flag: char| short_flag(args, flag);
    match name {
        "eval" => Finding::with("indirect: eval", Inner::Line(join(args))),
        "source" | "." => Finding::new("indirect: source"),
        "xargs" => Finding::with("indirect: xargs", Inner::Words(xargs(args))),
        "find" => find(args),
        "fd" | "fdfind" => fd(args),
        "parallel" => Finding::new("indirect: parallel"),
        "watch" => watch(args),
        "trap" => trap(args),
        "alias" => alias(args),
        "fc" if !has('l') => Finding::new("indirect: fc"),
        "hash" if has('p') => Finding::new("indirect: hash -p"),
        "enable" if has('f') => Finding::new("indirect: enable -f"),
        "bind" if has('x') => Finding::new("indirect: bind -x"),
        "mapfile" | "readarray" if has('C') => Finding::new(format!("indirect: {name} -C")),
        "complete" | "compgen" if has('C') => Finding::new(format!("indirect: {name} -C")),
        "su" | "runuser" => su(name, args),
        "script" => Finding::new("indirect: script"),
        "tmux" => tmux(args),
        "export" | "declare" | "typeset" | "local" | "readonly" => {
            let assignments = args.iter().filter(|w| w.is_assignment());
            git::environment(assignments).map_or_else(Finding::default, Finding::new)
        }
        "git" => git::inspect(args),
        "awk" | "gawk" | "mawk" | "nawk" | "goawk" | "original-awk" => tools::awk(args)
            .map_or_else(Finding::default, |what| {
                Finding::new(format!("indirect: {name} {what}"))
            }),
        "sed" | "gsed" if tools::sed(args) => Finding::new(format!("indirect: {name} e command")),
        "vi" | "vim" | "nvim" | "ex" | "view" | "rvim" | "gvim" | "emacs" | "gdb" => {
            tools::editor(name, args).unwrap_or_default()
        }
        "at" | "batch" => tools::at(name, args).unwrap_or_default(),
        "ssh" | "scp" | "sftp" | "rsync" | "tar" | "gtar" | "bsdtar" | "man" => Finding {
            reason: None,
            inner: tools::command_options(name, args),
        },
        _ => match interp::launch(name, args) {
            Some((reason, inner)) => Finding {
                reason: Some(reason),
                inner: inner.into_iter().collect(),
            },
            None => Finding::default(),
        },
    }
}

/// The words joined as the shell would pass them to `eval`.
pub(super) fn join(words: &[Word]) -> String {
    words
        .iter()
        .map(|w| w.text.as_str())
        .collect::<Vec<_>>()
        .join(" ")
}

/// A short option given alone or in a cluster (`-p`, `-lp`) before `--`.
fn short_flag(args: &[Word], flag: char) -> bool {
    args.iter()
        .map(|w| w.text.as_str())
        .take_while(|t| *t != "--")
        .filter(|t| !t.starts_with("--"))
        .filter_map(|t| t.strip_prefix('-'))
        .any(|cluster| cluster.contains(flag))
}

/// Skips leading options (getopt style); `values` take the rest of the word or the next
/// word, `attached` only the rest of the word. Returns the index of the first operand.
pub(super) fn skip_options(
    args: &[Word],
    values: &str,
    attached: &str,
    long_values: &[&str],
) -> usize {
    let mut i = 0;
    while let Some(word) = args.get(i) {
        let text = word.text.as_str();
        if text == "--" {
            return i + 1;
        }
        if let Some(long) = text.strip_prefix("--") {
            if !long.contains('=') && long_values.contains(&long) {
                i += 1;
            }
        } else if let Some(cluster) = text.strip_prefix('-').filter(|c| !c.is_empty()) {
            let chars: Vec<char> = cluster.chars().collect();
            for (j, c) in chars.iter().enumerate() {
                if values.contains(*c) {
                    if j + 1 == chars.len() {
                        i += 1;
                    }
                    break;
                }
                if attached.contains(*c) {
                    break;
                }
            }
        } else {
            return i;
        }
        i += 1;
    }
    i.min(args.len())
}

/// The command `xargs` runs (`echo` by default).
fn xargs(args: &[Word]) -> Vec<Word> {
    let start = skip_options(
        args,
        "IdEaLnPs",
        "iel",
        &[
            "arg-file",
            "delimiter",
            "max-args",
            "max-procs",
            "max-chars",
            "process-slot-var",
        ],
    );
    match args.get(start..) {
        Some(command) if !command.is_empty() => command.to_vec(),
        _ => vec![Word::literal("echo")],
    }
}

/// `find … -delete`, `-exec`/`-execdir`/`-ok`/`-okdir CMD … ;`.
fn find(args: &[Word]) -> Finding {
    let mut finding = Finding::default();
    let mut i = 0;
    while let Some(word) = args.get(i) {
        i += 1;
        let flag = word.text.as_str();
        match flag {
            "-delete" => {
                finding
                    .reason
                    .get_or_insert_with(|| "indirect: find -delete".into());
            }
            "-exec" | "-execdir" | "-ok" | "-okdir" => {
                finding
                    .reason
                    .get_or_insert_with(|| format!("indirect: find {flag}"));
                let rest = &args[i..];
                let end = rest
                    .iter()
                    .position(|w| w.text == ";" || w.text == "+")
                    .unwrap_or(rest.len());
                finding.inner.push(Inner::Words(rest[..end].to_vec()));
                i += end + 1;
            }
            _ => {}
        }
    }
    finding
}

/// `fd -x CMD` / `--exec`, `-X` / `--exec-batch`.
fn fd(args: &[Word]) -> Finding {
    let Some(i) = args
        .iter()
        .position(|w| matches!(w.text.as_str(), "-x" | "--exec" | "-X" | "--exec-batch"))
    else {
        return Finding::default();
    };
    let rest = &args[i + 1..];
    let end = rest
        .iter()
        .position(|w| w.text == ";")
        .unwrap_or(rest.len());
    Finding::with(
        format!("indirect: fd {}", args[i].text),
        Inner::Words(rest[..end].to_vec()),
    )
}

/// `watch CMD…`: joined and run by `sh -c`, or run as is with `-x`.
fn watch(args: &[Word]) -> Finding {
    let start = skip_options(args, "nq", "", &["interval", "equexit"]);
    let command = args.get(start..).unwrap_or_default();
    let exec =
        short_flag(&args[..start], 'x') || args.iter().take(start).any(|w| w.text == "--exec");
    let inner = if exec {
        Inner::Words(command.to_vec())
    } else {
        Inner::Line(join(command))
    };
    Finding::with("indirect: watch", inner)
}

/// `trap ACTION SIGNAL…`: the action is code run later (`-`, `''` and a number reset it).
fn trap(args: &[Word]) -> Finding {
    let start = skip_options(args, "", "", &[]);
    match args.get(start) {
        Some(action)
            if !action.text.is_empty()
                && action.text != "-"
                && !action.text.chars().all(|c| c.is_ascii_digit()) =>
        {
            Finding::with("indirect: trap", Inner::Line(action.text.clone()))
        }
        _ => Finding::default(),
    }
}

/// `alias name=VALUE`: the value is code run later.
fn alias(args: &[Word]) -> Finding {
    let mut finding = Finding::default();
    for value in args
        .iter()
        .filter_map(|w| w.text.split_once('='))
        .map(|(_, v)| v)
    {
        finding.reason = Some("indirect: alias".into());
        finding.inner.push(Inner::Line(value.to_owned()));
    }
    finding
}

/// `su`/`runuser`: a shell as another user, running `-c CODE` or reading stdin.
fn su(name: &str, args: &[Word]) -> Finding {
    let code = args.iter().enumerate().find_map(|(i, w)| {
        let text = w.text.as_str();
        if let Some(code) = text.strip_prefix("--command=") {
            return Some(code.to_owned());
        }
        let flag = text == "--command"
            || text == "--session-command"
            || (text.starts_with('-') && !text.starts_with("--") && text.ends_with('c'));
        flag.then(|| args.get(i + 1).map(|w| w.text.clone()))
            .flatten()
    });
    match code {
        Some(code) => Finding::with(format!("indirect: {name} -c"), Inner::Line(code)),
        None => Finding::new(format!("indirect: {name}")),
    }
}

/// tmux commands that run shell commands or type into a shell.
fn tmux(args: &[Word]) -> Finding {
    if short_flag(&args[..skip_options(args, "cfLST", "", &[])], 'c') {
        return Finding::new("indirect: tmux -c");
    }
    const RUNS: &[&str] = &[
        "send-keys",
        "send",
        "run-shell",
        "run",
        "if-shell",
        "if",
        "pipe-pane",
        "pipep",
        "respawn-pane",
        "respawnp",
        "respawn-window",
        "respawnw",
        "display-popup",
        "popup",
    ];
    const STARTS: &[&str] = &[
        "new-session",
        "new",
        "new-window",
        "neww",
        "split-window",
        "splitw",
    ];
    // tmux commands may be chained with `;`, so look at every word.
    for (i, word) in args.iter().enumerate() {
        let sub = word.text.as_str();
        if RUNS.contains(&sub) {
            return Finding::new(format!("indirect: tmux {sub}"));
        }
        if STARTS.contains(&sub) {
            let rest = &args[i + 1..];
            let start = skip_options(rest, "cefFlnstxy", "", &[]);
            if rest.get(start).is_some_and(|w| w.text != ";") {
                return Finding::new(format!("indirect: tmux {sub}"));
            }
        }
    }
    Finding::default()
}
