//! Shells and interpreters: does a run execute a script file (fine, like any program), or
//! code reef cannot see as a command — inline (`sh -c`, `python3 -c`, `perl -e`), read from
//! stdin (`… | sh`, `sh < file`, `python3 -`), or named by a substitution? Options are parsed
//! per interpreter (`python3 -W x -c`, `perl -lne`, `bash -o errexit -c`) so that a flag
//! inside a cluster or after a value is still seen.

use super::indirect::Inner;
use super::lex::{Expansion, Word};

/// How an interpreter run gets its code.
enum Launch {
    /// Code in an argument: the flag that says so and the code, when present.
    Inline(String, Option<String>),
    /// Code from stdin: the flag that says so (`-s`), or none (`-`, no script at all).
    Stdin(Option<String>),
    /// An option or the script is a substitution, so reef cannot tell.
    Computed(Expansion),
    /// A script file, a module, or no code at all (`--version`).
    Runs,
}

/// Command-line grammar of one interpreter family.
struct Spec {
    names: &'static [&'static str],
    /// Shell language: its inline code is checked as a command line.
    shell: bool,
    /// Short options whose value is code (`-c`, `-e`).
    inline: &'static str,
    long_inline: &'static [&'static str],
    /// Short options that read the code from stdin (`sh -s`).
    stdin: &'static str,
    /// Options that name the script file or module to run (`php -f`, `python3 -m`).
    script: &'static str,
    long_script: &'static [&'static str],
    /// Options after which no script is needed (`--version`).
    info: &'static str,
    long_info: &'static [&'static str],
    /// Short options taking a value: the rest of the word or the next word.
    values: &'static str,
    long_values: &'static [&'static str],
    /// Short options taking the rest of the word only (`perl -i.bak`).
    rest: &'static str,
    /// Short options taking octal digits only (`perl -l`, `-0777`).
    digits: &'static str,
    /// `+o name` and `+x` are options too.
    plus: bool,
    /// With no script operand it reads code from stdin.
    stdin_default: bool,
}

const fn spec(names: &'static [&'static str]) -> Spec {
    Spec {
        names,
        shell: false,
        inline: "",
        long_inline: &[],
        stdin: "",
        script: "",
        long_script: &[],
        info: "",
        long_info: &[],
        values: "",
        long_values: &[],
        rest: "",
        digits: "",
        plus: false,
        stdin_default: true,
    }
}

const VERSION_HELP: &[&str] = &["version", "help"];

const SPECS: &[Spec] = &[
    Spec {
        shell: true,
        inline: "c",
        long_inline: &["command", "commands"],
        stdin: "s",
        long_info: VERSION_HELP,
        values: "oO",
        long_values: &["rcfile", "init-file"],
        plus: true,
        ..spec(&[
            "sh", "bash", "rbash", "dash", "ash", "hush", "zsh", "ksh", "mksh", "pdksh", "oksh",
            "lksh", "loksh", "yash", "posh", "csh", "tcsh", "elvish", "nu", "xonsh",
        ])
    },
    Spec {
        shell: true,
        inline: "cC",
        long_inline: &["command", "init-command"],
        info: "vh",
        long_info: VERSION_HELP,
        values: "odpD",
        long_values: &["debug", "debug-output", "profile", "profile-startup"],
        ..spec(&["fish"])
    },
    Spec {
        inline: "c",
        script: "m",
        info: "Vh?",
        long_info: &["version", "help", "help-env", "help-xoptions", "help-all"],
        values: "WXQ",
        long_values: &["check-hash-based-pycs"],
        ..spec(&["python", "pypy", "ipython"])
    },
    Spec {
        inline: "eE",
        info: "vVh",
        values: "I",
        rest: "MmiCdDxFV",
        digits: "0l",
        ..spec(&["perl"])
    },
    Spec {
        inline: "e",
        info: "vh",
        long_info: &["version", "help", "copyright"],
        values: "IrCE",
        long_values: &[
            "enable",
            "disable",
            "encoding",
            "external-encoding",
            "internal-encoding",
        ],
        rest: "iFxTWK",
        digits: "0",
        ..spec(&["ruby"])
    },
    Spec {
        inline: "ep",
        long_inline: &["eval", "print"],
        info: "vh",
        long_info: &["version", "help", "v8-options", "test", "run"],
        values: "rC",
        long_values: &[
            "require",
            "import",
            "loader",
            "experimental-loader",
            "input-type",
            "conditions",
            "title",
            "env-file",
            "watch-path",
            "run",
            "test-reporter",
            "test-reporter-destination",
        ],
        ..spec(&["node", "nodejs"])
    },
    Spec {
        inline: "ep",
        long_inline: &["eval", "print"],
        stdin_default: false,
        ..spec(&["bun"])
    },
    Spec {
        inline: "rRBE",
        long_inline: &["run", "process-begin", "process-code", "process-end"],
        script: "fF",
        long_script: &["file"],
        info: "vimhlswS",
        long_info: &[
            "version",
            "help",
            "info",
            "modules",
            "syntax-check",
            "syntax-highlight",
            "server",
            "ini",
            "rf",
            "rc",
            "re",
            "rz",
            "ri",
        ],
        values: "cdztS",
        long_values: &[
            "php-ini",
            "define",
            "zend-extension",
            "rf",
            "rc",
            "re",
            "rz",
            "ri",
        ],
        ..spec(&["php"])
    },
    Spec {
        inline: "e",
        info: "v",
        values: "l",
        ..spec(&["lua"])
    },
    Spec {
        inline: "e",
        script: "b",
        info: "v",
        values: "l",
        rest: "jO",
        ..spec(&["luajit"])
    },
    Spec {
        inline: "e",
        long_info: VERSION_HELP,
        stdin_default: false,
        ..spec(&["Rscript"])
    },
    Spec {
        inline: "e",
        script: "f",
        long_script: &["file"],
        long_info: VERSION_HELP,
        values: "gd",
        ..spec(&["R"])
    },
    Spec {
        inline: "e",
        values: "ls",
        ..spec(&["osascript"])
    },
    Spec {
        inline: "eE",
        long_inline: &["eval", "print"],
        info: "vh",
        long_info: VERSION_HELP,
        values: "JCLpt",
        long_values: &[
            "load",
            "sysimage",
            "cpu-target",
            "threads",
            "procs",
            "machine-file",
        ],
        rest: "Og",
        ..spec(&["julia"])
    },
    Spec {
        inline: "c",
        script: "f",
        info: "v",
        values: "D",
        ..spec(&["expect"])
    },
    Spec {
        inline: "c",
        script: "s",
        long_info: VERSION_HELP,
        values: "CLlex",
        ..spec(&["guile"])
    },
    Spec {
        inline: "e",
        long_inline: &["eval"],
        script: "frtu",
        values: "l",
        ..spec(&["racket"])
    },
    Spec {
        long_inline: &["eval"],
        long_script: &["script", "load"],
        long_info: VERSION_HELP,
        long_values: &[
            "core",
            "dynamic-space-size",
            "control-stack-size",
            "userinit",
            "sysinit",
        ],
        ..spec(&["sbcl"])
    },
    Spec {
        inline: "e",
        long_inline: &["eval"],
        script: "S",
        values: "r",
        stdin_default: false,
        ..spec(&["elixir"])
    },
    Spec {
        inline: "e",
        stdin_default: false,
        ..spec(&["groovy"])
    },
    Spec {
        inline: "e",
        script: "f",
        values: "l",
        ..spec(&["jrunscript"])
    },
    spec(&["tclsh", "wish", "irb"]),
];

/// `python3.12` → `python`, `ksh93` → `ksh`, `lua5.4` → `lua`.
fn family(name: &str) -> &str {
    let trimmed = name.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.' || c == '-');
    if trimmed.is_empty() { name } else { trimmed }
}

/// Why running `name` with `args` executes code reef cannot see, and the code when it is a
/// shell command line reef can read; `None` for a script file, a module or no code.
pub(super) fn launch(name: &str, args: &[Word]) -> Option<(String, Option<Inner>)> {
    let family = family(name);
    let (launch, shell) = match family {
        "pwsh" | "powershell" => (pwsh(args), false),
        "deno" => (deno(args), false),
        _ => {
            let spec = SPECS.iter().find(|s| s.names.contains(&family))?;
            (scan(spec, args), spec.shell)
        }
    };
    match launch {
        Launch::Runs => None,
        Launch::Inline(flag, code) => Some((
            format!("indirect: {name} {flag}"),
            code.filter(|_| shell).map(Inner::Line),
        )),
        Launch::Stdin(Some(flag)) => Some((format!("indirect: {name} {flag}"), None)),
        Launch::Stdin(None) => Some((format!("indirect: {name} reading stdin"), None)),
        Launch::Computed(Expansion::Process) => Some((
            format!("indirect: {name} reading a process substitution"),
            None,
        )),
        Launch::Computed(_) => Some((format!("indirect: {name} with computed arguments"), None)),
    }
}

/// Parses an interpreter's options up to its script operand.
fn scan(spec: &Spec, args: &[Word]) -> Launch {
    let mut info = false;
    let mut i = 0;
    while let Some(word) = args.get(i) {
        if word.starts_with_expansion() {
            return computed(word);
        }
        let text = word.text.as_str();
        if text == "--" || (text == "-" && spec.shell) {
            i += 1;
            break;
        }
        if text == "-" {
            return Launch::Stdin(None);
        }
        if let Some(long) = text.strip_prefix("--") {
            let (name, value) = match long.split_once('=') {
                Some((name, value)) => (name, Some(value.to_owned())),
                None => (long, None),
            };
            if spec.long_inline.contains(&name) {
                let code = value.or_else(|| args.get(i + 1).map(|w| w.text.clone()));
                return Launch::Inline(format!("--{name}"), code);
            }
            if spec.long_script.contains(&name) {
                return Launch::Runs;
            }
            info |= spec.long_info.contains(&name);
            if value.is_none() && spec.long_values.contains(&name) {
                i += 1;
            }
            i += 1;
            continue;
        }
        let minus = text.starts_with('-');
        if text.len() < 2 || !(minus || (spec.plus && text.starts_with('+'))) {
            break;
        }
        let chars: Vec<char> = text.chars().skip(1).collect();
        let mut j = 0;
        let mut value_next = false;
        while let Some(&c) = chars.get(j) {
            j += 1;
            if minus && spec.inline.contains(c) {
                // A shell's code is its first operand (`bash -c -e 'cmd'`); other
                // interpreters take the rest of the word or the next word (`python3 -cCODE`).
                let code = if spec.shell {
                    args.get(i + 1..)
                        .unwrap_or_default()
                        .iter()
                        .find(|w| !w.text.starts_with(['-', '+']))
                        .map(|w| w.text.clone())
                } else if j < chars.len() {
                    Some(chars[j..].iter().collect())
                } else {
                    args.get(i + 1).map(|w| w.text.clone())
                };
                return Launch::Inline(format!("-{c}"), code);
            }
            if minus && spec.stdin.contains(c) {
                return Launch::Stdin(Some(format!("-{c}")));
            }
            if minus && spec.script.contains(c) {
                return Launch::Runs;
            }
            info |= spec.info.contains(c);
            if spec.values.contains(c) {
                value_next = j == chars.len();
                break;
            }
            if spec.rest.contains(c) {
                break;
            }
            if spec.digits.contains(c) {
                if c == '0' && chars.get(j) == Some(&'x') {
                    j += 1;
                    while chars.get(j).is_some_and(char::is_ascii_hexdigit) {
                        j += 1;
                    }
                } else {
                    while chars.get(j).is_some_and(|d| ('0'..='7').contains(d)) {
                        j += 1;
                    }
                }
            }
        }
        i += if value_next { 2 } else { 1 };
    }
    match args.get(i) {
        None if info || !spec.stdin_default => Launch::Runs,
        None => Launch::Stdin(None),
        Some(word) if word.starts_with_expansion() => computed(word),
        Some(word) if reads_stdin(&word.text) => Launch::Stdin(None),
        Some(_) => Launch::Runs,
    }
}

fn computed(word: &Word) -> Launch {
    Launch::Computed(word.expansion().unwrap_or(Expansion::Variable))
}

/// A script path that is really this process's stdin.
fn reads_stdin(path: &str) -> bool {
    path == "/dev/stdin"
        || path.starts_with("/dev/fd/")
        || (path.starts_with("/proc/") && path.contains("/fd/"))
}

/// PowerShell: `-Command`/`-EncodedCommand` in any abbreviation and case.
fn pwsh(args: &[Word]) -> Launch {
    let flags: Vec<String> = args
        .iter()
        .filter_map(|w| w.text.strip_prefix('-').map(str::to_ascii_lowercase))
        .collect();
    let abbreviates = |flag: &str, full: &str| !flag.is_empty() && full.starts_with(flag);
    if let Some(flag) = flags.iter().find(|f| {
        abbreviates(f, "command") || abbreviates(f, "encodedcommand") || f.as_str() == "ec"
    }) {
        return Launch::Inline(format!("-{flag}"), None);
    }
    let operand = args.iter().any(|w| !w.text.starts_with('-'));
    let info = flags
        .iter()
        .any(|f| matches!(f.as_str(), "v" | "version" | "h" | "help" | "?"));
    if operand || info {
        Launch::Runs
    } else {
        Launch::Stdin(None)
    }
}

/// Deno: `deno eval CODE`, `deno repl`, `deno run -`.
fn deno(args: &[Word]) -> Launch {
    if args.iter().any(|w| w.text == "-") {
        return Launch::Stdin(None);
    }
    match args.iter().position(|w| !w.text.starts_with('-')) {
        Some(i) if args[i].text == "eval" => {
            Launch::Inline("eval".into(), args.get(i + 1).map(|w| w.text.clone()))
        }
        Some(i) if args[i].text == "repl" => Launch::Stdin(None),
        Some(_) => Launch::Runs,
        None => Launch::Stdin(None),
    }
}
