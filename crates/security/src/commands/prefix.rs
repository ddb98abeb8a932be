//! What stands before the real program of a simple command: variable assignments
//! (`FOO=1 make`), reserved words (`if`, `then`, `do`, `!`, `{`, …) and wrappers that run
//! their arguments as a command (`sudo`, `env`, `timeout 5`, `nice -n 5`, …), each with its
//! own options, so `sudo -u root rm -rf /` is judged as `rm -rf /`.

use super::basename;
use super::lex::Word;

/// A simple command with its prefixes looked through.
pub(super) struct Invocation<'a> {
    /// Program and arguments; empty when the simple command runs no program.
    pub words: &'a [Word],
    /// `NAME=value` words before the program (a wrapper's included).
    pub assignments: Vec<&'a Word>,
    /// A wrapper that itself runs code reef cannot see (`env -S`, `sudo -s` alone).
    pub reason: Option<String>,
}

/// Reserved words that may precede a command.
const KEYWORDS: &[&str] = &[
    "!", "{", "if", "then", "elif", "else", "do", "while", "until", "coproc",
];

/// A program that runs the rest of its arguments as a command.
struct Wrapper {
    name: &'static str,
    /// Subcommands that do (`uv run`, `bundle exec`); empty: the program itself does.
    subcommands: &'static [&'static str],
    /// Short options taking a value (the rest of the word or the next word).
    short_values: &'static str,
    /// Long options taking the next word as value unless written `--opt=value`.
    long_values: &'static [&'static str],
    /// Operands before the command (`timeout 5`, `chroot /new`).
    operands: usize,
    /// Short options after which no command runs (`command -v`, `sudo -l`).
    queries: &'static str,
    /// Options whose value is code in a string (`env -S`, `flock -c`).
    code: &'static str,
    code_long: &'static [&'static str],
    /// Without a command it starts a shell reading stdin: always (`""`) or given one of
    /// these short options (`sudo -s`).
    shell_alone: Option<&'static str>,
}

const fn wrapper(name: &'static str) -> Wrapper {
    Wrapper {
        name,
        subcommands: &[],
        short_values: "",
        long_values: &[],
        operands: 0,
        queries: "",
        code: "",
        code_long: &[],
        shell_alone: None,
    }
}

const WRAPPERS: &[Wrapper] = &[
    Wrapper {
        short_values: "ugphCDrtTU",
        long_values: &[
            "user",
            "group",
            "host",
            "prompt",
            "chdir",
            "role",
            "type",
            "other-user",
        ],
        queries: "lvkKVe",
        shell_alone: Some("si"),
        ..wrapper("sudo")
    },
    Wrapper {
        short_values: "uC",
        shell_alone: Some("s"),
        ..wrapper("doas")
    },
    Wrapper {
        short_values: "uCPS",
        long_values: &["unset", "chdir", "split-string"],
        code: "S",
        code_long: &["split-string"],
        ..wrapper("env")
    },
    Wrapper {
        queries: "vV",
        ..wrapper("command")
    },
    wrapper("builtin"),
    Wrapper {
        short_values: "a",
        ..wrapper("exec")
    },
    wrapper("nohup"),
    Wrapper {
        short_values: "fo",
        long_values: &["format", "output"],
        ..wrapper("time")
    },
    Wrapper {
        short_values: "n",
        long_values: &["adjustment"],
        ..wrapper("nice")
    },
    Wrapper {
        short_values: "cnpPu",
        queries: "pPu",
        ..wrapper("ionice")
    },
    Wrapper {
        short_values: "sk",
        long_values: &["signal", "kill-after"],
        operands: 1,
        ..wrapper("timeout")
    },
    wrapper("setsid"),
    Wrapper {
        short_values: "ioe",
        long_values: &["input", "output", "error"],
        ..wrapper("stdbuf")
    },
    Wrapper {
        long_values: &["userspec", "groups"],
        operands: 1,
        shell_alone: Some(""),
        ..wrapper("chroot")
    },
    Wrapper {
        operands: 1,
        queries: "p",
        ..wrapper("taskset")
    },
    Wrapper {
        short_values: "TPD",
        operands: 1,
        queries: "pm",
        ..wrapper("chrt")
    },
    Wrapper {
        short_values: "SGRw",
        long_values: &["setuid", "setgid", "root", "wd", "map-user", "map-group"],
        shell_alone: Some(""),
        ..wrapper("unshare")
    },
    Wrapper {
        short_values: "tSG",
        long_values: &["target", "setuid", "setgid"],
        shell_alone: Some(""),
        ..wrapper("nsenter")
    },
    Wrapper {
        short_values: "wE",
        long_values: &["wait", "timeout", "conflict-exit-code"],
        operands: 1,
        code: "c",
        code_long: &["command"],
        ..wrapper("flock")
    },
    Wrapper {
        short_values: "oepsEuabIOPSXU",
        long_values: &["output"],
        queries: "p",
        ..wrapper("strace")
    },
    Wrapper {
        short_values: "aADeFlnopsuwx",
        long_values: &["output"],
        queries: "p",
        ..wrapper("ltrace")
    },
    wrapper("valgrind"),
    Wrapper {
        short_values: "lsib",
        long_values: &["lib", "faked", "save-file", "load-file"],
        ..wrapper("fakeroot")
    },
    Wrapper {
        long_values: &["user"],
        ..wrapper("pkexec")
    },
    Wrapper {
        short_values: "nsfepw",
        long_values: &[
            "server-num",
            "server-args",
            "auth-file",
            "error-file",
            "wait",
        ],
        ..wrapper("xvfb-run")
    },
    wrapper("dbus-run-session"),
    wrapper("eatmydata"),
    wrapper("catchsegv"),
    wrapper("unbuffer"),
    Wrapper {
        short_values: "f",
        ..wrapper("proxychains")
    },
    Wrapper {
        short_values: "f",
        ..wrapper("proxychains4")
    },
    Wrapper {
        short_values: "uapP",
        long_values: &["user", "pass", "address", "port"],
        ..wrapper("torsocks")
    },
    Wrapper {
        shell_alone: Some(""),
        ..wrapper("firejail")
    },
    wrapper("busybox"),
    wrapper("toybox"),
    // Environment and package runners.
    Wrapper {
        subcommands: &["run"],
        short_values: "pw",
        long_values: &[
            "with",
            "with-requirements",
            "with-editable",
            "python",
            "package",
            "extra",
            "group",
            "env-file",
            "directory",
            "project",
            "index",
            "index-url",
            "extra-index-url",
        ],
        ..wrapper("uv")
    },
    Wrapper {
        short_values: "pw",
        long_values: &["from", "with", "python", "index", "index-url"],
        ..wrapper("uvx")
    },
    Wrapper {
        subcommands: &["run"],
        short_values: "C",
        long_values: &["directory", "project"],
        ..wrapper("poetry")
    },
    Wrapper {
        subcommands: &["run"],
        ..wrapper("pipenv")
    },
    Wrapper {
        subcommands: &["run"],
        short_values: "p",
        long_values: &["project"],
        ..wrapper("pdm")
    },
    Wrapper {
        subcommands: &["run"],
        ..wrapper("rye")
    },
    Wrapper {
        subcommands: &["run"],
        ..wrapper("hatch")
    },
    Wrapper {
        subcommands: &["run"],
        short_values: "np",
        long_values: &["name", "prefix", "cwd"],
        ..wrapper("conda")
    },
    Wrapper {
        subcommands: &["run"],
        short_values: "np",
        long_values: &["name", "prefix", "cwd"],
        ..wrapper("mamba")
    },
    Wrapper {
        subcommands: &["run"],
        short_values: "np",
        long_values: &["name", "prefix", "cwd"],
        ..wrapper("micromamba")
    },
    Wrapper {
        subcommands: &["exec"],
        ..wrapper("bundle")
    },
    Wrapper {
        subcommands: &["exec", "x"],
        long_values: &["package"],
        code: "c",
        code_long: &["call"],
        ..wrapper("npm")
    },
    Wrapper {
        long_values: &["package"],
        short_values: "p",
        code: "c",
        code_long: &["call"],
        ..wrapper("npx")
    },
    Wrapper {
        subcommands: &["exec", "dlx"],
        code: "c",
        code_long: &["shell-mode"],
        ..wrapper("pnpm")
    },
    Wrapper {
        subcommands: &["exec", "dlx"],
        short_values: "p",
        long_values: &["package"],
        ..wrapper("yarn")
    },
    wrapper("bunx"),
    Wrapper {
        subcommands: &["exec", "x"],
        code: "c",
        code_long: &["command"],
        ..wrapper("mise")
    },
    Wrapper {
        subcommands: &["exec"],
        ..wrapper("asdf")
    },
    Wrapper {
        subcommands: &["exec"],
        operands: 1,
        ..wrapper("direnv")
    },
];

/// Looks through assignments, reserved words and wrappers to the program that runs.
pub(super) fn invocation(words: &[Word]) -> Invocation<'_> {
    let mut rest = words;
    let mut assignments = Vec::new();
    let mut reason = None;
    while let Some(first) = rest.first() {
        if first.is_assignment() {
            assignments.push(first);
            rest = &rest[1..];
            continue;
        }
        if first.hidden_program().is_some() {
            break;
        }
        let name = basename(&first.text);
        if KEYWORDS.contains(&name) {
            rest = &rest[1..];
        } else if name == "function" {
            rest = rest.get(2..).unwrap_or_default();
        } else if let Some(wrapper) = WRAPPERS.iter().find(|w| {
            w.name == name
                && (w.subcommands.is_empty()
                    || rest
                        .get(1)
                        .is_some_and(|sub| w.subcommands.contains(&sub.text.as_str())))
        }) {
            let skip = if wrapper.subcommands.is_empty() { 1 } else { 2 };
            match wrapper.command(&rest[skip..]) {
                Ok(command) => rest = command,
                Err(why) => {
                    reason = why;
                    rest = &[];
                }
            }
        } else {
            break;
        }
    }
    Invocation {
        words: rest,
        assignments,
        reason,
    }
}

impl Wrapper {
    /// The command this wrapper runs, `Err(None)` when it runs none, `Err(Some(why))` when it
    /// runs code reef cannot see.
    fn command<'a>(&self, args: &'a [Word]) -> Result<&'a [Word], Option<String>> {
        let mut i = 0;
        let mut seen = String::new();
        while let Some(word) = args.get(i) {
            let text = word.text.as_str();
            if !word.is_literal() {
                break;
            }
            if text == "--" {
                i += 1;
                break;
            }
            if let Some(long) = text.strip_prefix("--") {
                let (name, attached) = long
                    .split_once('=')
                    .map_or((long, false), |(n, _)| (n, true));
                if self.code_long.contains(&name) {
                    return Err(Some(format!("indirect: {} --{name}", self.name)));
                }
                if !attached && self.long_values.contains(&name) {
                    i += 1;
                }
            } else if let Some(cluster) = text.strip_prefix('-') {
                let chars: Vec<char> = cluster.chars().collect();
                for (j, c) in chars.iter().enumerate() {
                    seen.push(*c);
                    if self.short_values.contains(*c) {
                        if j + 1 == chars.len() {
                            i += 1;
                        }
                        break;
                    }
                }
            } else {
                break;
            }
            i += 1;
        }
        if seen.chars().any(|c| self.queries.contains(c)) {
            return Err(None);
        }
        if let Some(c) = seen.chars().find(|c| self.code.contains(*c)) {
            return Err(Some(format!("indirect: {} -{c}", self.name)));
        }
        let rest = args.get(i + self.operands..).unwrap_or_default();
        if let Some(flag) = rest.first().map(|w| w.text.as_str()) {
            let code = flag
                .strip_prefix('-')
                .is_some_and(|f| f.len() == 1 && self.code.contains(f))
                || flag
                    .strip_prefix("--")
                    .is_some_and(|f| self.code_long.contains(&f));
            if code {
                return Err(Some(format!("indirect: {} {flag}", self.name)));
            }
        }
        if rest.is_empty()
            && let Some(flags) = self.shell_alone
            && (flags.is_empty() || seen.chars().any(|c| flags.contains(c)))
        {
            return Err(Some(format!(
                "indirect: {} (shell reading stdin)",
                self.name
            )));
        }
        Ok(rest)
    }
}
