//! Everyday tools with their own ways of running commands: `awk` (`system()`, pipes),
//! `sed` (the `e` command), editors and debuggers given commands on the command line
//! (`vim -c`, `emacs --eval`, `gdb -ex`), `at`, and options whose value is a command line
//! (`ssh -o ProxyCommand=…`, `rsync -e …`, `tar -I …`/`--to-command=…`, `man -P …`). The
//! last are looked through rather than gated: the command line is judged like any other.

use super::indirect::{Finding, Inner};
use super::lex::Word;

/// `vim -c`, `emacs --eval`, `gdb -ex` and the like: commands in the tool's own language,
/// which can run shell commands.
pub(super) fn editor(name: &str, args: &[Word]) -> Option<Finding> {
    let texts = args.iter().map(|w| w.text.as_str());
    let flag = match name {
        "vi" | "vim" | "nvim" | "ex" | "view" | "rvim" | "gvim" => {
            texts.take_while(|t| *t != "--").find(|t| {
                matches!(*t, "-c" | "--cmd")
                    || t.strip_prefix('+')
                        .is_some_and(|c| !c.is_empty() && !c.chars().all(|d| d.is_ascii_digit()))
            })
        }
        "emacs" => texts.take_while(|t| *t != "--").find(|t| {
            matches!(*t, "--eval" | "-eval" | "--execute" | "-execute") || t.starts_with("--eval=")
        }),
        "gdb" => texts.take_while(|t| *t != "--args").find(|t| {
            matches!(
                t.trim_start_matches('-'),
                "ex" | "eval-command" | "iex" | "init-eval-command"
            ) || t.starts_with("--eval-command=")
        }),
        _ => return None,
    }?;
    let flag = if flag.starts_with('+') {
        "+cmd"
    } else {
        flag.split('=').next().unwrap_or(flag)
    };
    Some(Finding::new(format!("indirect: {name} {flag}")))
}

/// `at`/`batch`: commands read from stdin (or a file) and run later.
pub(super) fn at(name: &str, args: &[Word]) -> Option<Finding> {
    let query = args
        .iter()
        .any(|w| matches!(w.text.as_str(), "-l" | "-r" | "-d" | "-c" | "-V"));
    (!query).then(|| Finding::new(format!("indirect: {name}")))
}

/// Options whose value is a command line the tool runs: that command line, to be judged.
pub(super) fn command_options(name: &str, args: &[Word]) -> Vec<Inner> {
    let texts: Vec<&str> = args.iter().map(|w| w.text.as_str()).collect();
    let mut lines = Vec::new();
    // `-o VALUE`, `-oVALUE`, `--opt=VALUE`, `--opt VALUE` for the listed options.
    let mut values = |short: &[&str], long: &[&str]| {
        for (i, text) in texts.iter().enumerate() {
            let next = || texts.get(i + 1).map(|v| (*v).to_owned());
            if short.contains(text) || long.contains(text) {
                lines.extend(next());
            } else if let Some((opt, value)) = text.split_once('=')
                && long.contains(&opt)
            {
                lines.push(value.to_owned());
            } else if let Some(short) = short
                .iter()
                .find(|s| text.len() > 2 && text.starts_with(*s))
            {
                lines.push(text[short.len()..].to_owned());
            }
        }
    };
    match name {
        "ssh" | "scp" | "sftp" => {
            values(&["-o"], &[]);
            lines.retain_mut(|option| {
                let (key, value) = option
                    .split_once(['=', ' '])
                    .unwrap_or((option.as_str(), ""));
                let runs = matches!(
                    key.to_ascii_lowercase().as_str(),
                    "proxycommand" | "localcommand" | "knownhostscommand"
                );
                *option = value.trim_start_matches(['=', ' ']).to_owned();
                runs
            });
        }
        "rsync" => values(&["-e"], &["--rsh"]),
        "tar" | "gtar" | "bsdtar" => {
            values(&["-I"], &["--use-compress-program", "--to-command"]);
            lines.extend(
                texts
                    .iter()
                    .filter_map(|t| t.strip_prefix("--checkpoint-action=exec="))
                    .map(str::to_owned),
            );
        }
        "man" => values(&["-P"], &["--pager"]),
        _ => {}
    }
    lines.into_iter().map(Inner::Line).collect()
}

/// What in an `awk` program runs commands: `system()` or a pipe to or from a command.
pub(super) fn awk(args: &[Word]) -> Option<&'static str> {
    let mut programs = Vec::new();
    let mut from_file = false;
    let mut i = 0;
    while let Some(word) = args.get(i) {
        let text = word.text.as_str();
        if text == "--" {
            i += 1;
            break;
        }
        if let Some(long) = text.strip_prefix("--") {
            let (name, value) = long
                .split_once('=')
                .map_or((long, None), |(n, v)| (n, Some(v)));
            let takes = matches!(
                name,
                "source" | "file" | "exec" | "field-separator" | "assign" | "include" | "load"
            );
            let value = match value {
                Some(v) => Some(v.to_owned()),
                None if takes => {
                    i += 1;
                    args.get(i).map(|w| w.text.clone())
                }
                None => None,
            };
            match name {
                "source" => programs.extend(value),
                "file" | "exec" => from_file = true,
                _ => {}
            }
        } else if let Some(cluster) = text.strip_prefix('-').filter(|c| !c.is_empty()) {
            let mut chars = cluster.chars();
            let flag = chars.next().unwrap_or_default();
            if matches!(flag, 'f' | 'E' | 'e' | 'F' | 'v' | 'i' | 'l') {
                let attached: String = chars.collect();
                let value = if attached.is_empty() {
                    i += 1;
                    args.get(i).map(|w| w.text.clone())
                } else {
                    Some(attached)
                };
                match flag {
                    'e' => programs.extend(value),
                    'f' | 'E' => from_file = true,
                    _ => {}
                }
            }
        } else {
            break;
        }
        i += 1;
    }
    if programs.is_empty() && !from_file {
        programs.extend(args.get(i).map(|w| w.text.clone()));
    }
    programs.iter().find_map(|p| awk_runs(p))
}

fn awk_runs(program: &str) -> Option<&'static str> {
    let system = program
        .match_indices("system")
        .any(|(i, m)| program[i + m.len()..].trim_start().starts_with('('));
    if system {
        return Some("system()");
    }
    for (i, _) in program.match_indices('|') {
        let before = &program[..i];
        let after = &program[i + 1..];
        if before.ends_with('|') || after.starts_with('|') {
            continue;
        }
        let next = after.trim_start();
        if next.starts_with("getline") || next.starts_with('"') || after.starts_with('&') {
            return Some("pipe to a command");
        }
        // `print … | cmd`: a pipe in a print statement (elsewhere `|` is regex alternation).
        let statement = before
            .rsplit(['\n', ';', '{', '}'])
            .next()
            .unwrap_or(before);
        let identifier = next.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_');
        if identifier && statement.contains("print") {
            return Some("pipe to a command");
        }
    }
    None
}

/// A `sed` script that runs commands: the `e` command or the `s///e` flag (GNU sed).
pub(super) fn sed(args: &[Word]) -> bool {
    let mut scripts = Vec::new();
    let mut given = false;
    let mut sandbox = false;
    let mut i = 0;
    while let Some(word) = args.get(i) {
        let text = word.text.as_str();
        if text == "--" {
            i += 1;
            break;
        }
        if let Some(long) = text.strip_prefix("--") {
            let (name, value) = long
                .split_once('=')
                .map_or((long, None), |(n, v)| (n, Some(v)));
            let value = match value {
                Some(v) => Some(v.to_owned()),
                None if matches!(name, "expression" | "file" | "line-length") => {
                    i += 1;
                    args.get(i).map(|w| w.text.clone())
                }
                None => None,
            };
            match name {
                "expression" => {
                    given = true;
                    scripts.extend(value);
                }
                "file" => given = true,
                "sandbox" => sandbox = true,
                _ => {}
            }
        } else if let Some(cluster) = text.strip_prefix('-').filter(|c| !c.is_empty()) {
            let chars: Vec<char> = cluster.chars().collect();
            for (j, &c) in chars.iter().enumerate() {
                if matches!(c, 'e' | 'f' | 'l') {
                    let value = if j + 1 < chars.len() {
                        Some(chars[j + 1..].iter().collect())
                    } else {
                        i += 1;
                        args.get(i).map(|w| w.text.clone())
                    };
                    if c != 'l' {
                        given = true;
                    }
                    if c == 'e' {
                        scripts.extend(value);
                    }
                    break;
                }
                if c == 'i' {
                    break; // `-i.bak`: the rest is the backup suffix
                }
            }
        } else {
            break;
        }
        i += 1;
    }
    if !given {
        scripts.extend(args.get(i).map(|w| w.text.clone()));
    }
    !sandbox && scripts.iter().any(|s| sed_script_runs(s))
}

fn sed_script_runs(script: &str) -> bool {
    let c: Vec<char> = script.chars().collect();
    let mut i = 0;
    let skip_blank = |i: &mut usize| {
        while c.get(*i).is_some_and(|ch| ch.is_whitespace() || *ch == ';') {
            *i += 1;
        }
    };
    let to_line_end = |i: &mut usize| {
        while c.get(*i).is_some_and(|ch| *ch != '\n') {
            *i += 1;
        }
    };
    // Past text delimited by `d` (escapes honoured), starting just after the opening one.
    let delimited = |i: &mut usize, d: char| {
        while let Some(&ch) = c.get(*i) {
            *i += 1;
            if ch == '\\' {
                *i += 1;
            } else if ch == d {
                break;
            }
        }
    };
    let address = |i: &mut usize| match c.get(*i) {
        Some(ch) if ch.is_ascii_digit() => {
            while c
                .get(*i)
                .is_some_and(|ch| ch.is_ascii_digit() || *ch == '~')
            {
                *i += 1;
            }
        }
        Some('$') => *i += 1,
        Some('/') => {
            *i += 1;
            delimited(i, '/');
            while c.get(*i).is_some_and(|ch| matches!(ch, 'I' | 'M')) {
                *i += 1;
            }
        }
        Some('\\') => {
            if let Some(&d) = c.get(*i + 1) {
                *i += 2;
                delimited(i, d);
            } else {
                *i += 1;
            }
        }
        _ => {}
    };
    loop {
        skip_blank(&mut i);
        let Some(&first) = c.get(i) else {
            return false;
        };
        if first == '#' {
            to_line_end(&mut i);
            continue;
        }
        address(&mut i);
        if c.get(i) == Some(&',') {
            i += 1;
            if matches!(c.get(i), Some('+' | '~')) {
                i += 1;
            }
            address(&mut i);
        }
        while c.get(i).is_some_and(|ch| ch.is_whitespace() || *ch == '!') {
            i += 1;
        }
        let Some(&command) = c.get(i) else {
            return false;
        };
        i += 1;
        match command {
            'e' => return true,
            's' | 'y' => {
                let Some(&d) = c.get(i) else {
                    return false;
                };
                i += 1;
                delimited(&mut i, d);
                delimited(&mut i, d);
                while let Some(&flag) = c.get(i) {
                    match flag {
                        'e' if command == 's' => return true,
                        'w' | 'W' => {
                            to_line_end(&mut i);
                            break;
                        }
                        ';' | '\n' | '}' => break,
                        _ => i += 1,
                    }
                }
            }
            'a' | 'i' | 'c' => {
                // Text to the end of the line, continued by a trailing backslash.
                while let Some(&ch) = c.get(i) {
                    i += 1;
                    if ch == '\\' {
                        i += 1;
                    } else if ch == '\n' {
                        break;
                    }
                }
            }
            'r' | 'R' | 'w' | 'W' | ':' => to_line_end(&mut i),
            'b' | 't' | 'T' | 'q' | 'Q' | 'l' | 'L' => {
                while c.get(i).is_some_and(|ch| !matches!(ch, ';' | '\n' | '}')) {
                    i += 1;
                }
            }
            '{' | '}' | '=' | 'd' | 'D' | 'g' | 'G' | 'h' | 'H' | 'n' | 'N' | 'p' | 'P' | 'x'
            | 'z' | 'F' => {}
            _ => return false,
        }
    }
}
