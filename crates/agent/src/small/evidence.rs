//! What one turn has shown a small model ([`Evidence`]): the results of its calls, what each
//! call pointed at, and whether a command failed, printed nothing or changed the workspace.

use super::text::contains_word;

/// Characters of a failed call's result quoted when its answer is sent back.
const ERROR_QUOTE_CHARS: usize = 200;

/// What one turn has shown the model so far, for [`super::review`] and [`super::guard`].
#[derive(Clone, Debug, Default)]
pub(crate) struct Evidence {
    /// Tool calls made in the turn.
    pub calls: u32,
    /// Every tool result of the turn, in order.
    pub results: Vec<String>,
    /// The results of commands (`shell`): what was computed rather than read off a file.
    pub computed: Vec<String>,
    /// Whether the last call of the turn failed (an error, or a command that failed by its
    /// exit status: see [`command_failed`]).
    pub last_failed: bool,
    /// The start of the last failed call's result.
    pub last_error: String,
    /// Whether the last call was a command that printed nothing.
    pub last_printed_nothing: bool,
    /// Whether the last call can have changed the workspace.
    pub last_changed: bool,
    /// What each call that did not fail was pointed at: a file tool's path, a command's line.
    looked_at: Vec<String>,
    /// Whether a call that can change the workspace succeeded.
    pub changed: bool,
    /// The paths whose write [`super::guard`] refused once: the same write again goes through.
    refused: Vec<String>,
}

impl Evidence {
    /// Records a call (`arguments` as the model sent them) and its result.
    pub(crate) fn record(&mut self, tool: &str, arguments: &str, content: &str, is_error: bool) {
        self.calls += 1;
        self.last_failed = is_error || (tool == "shell" && command_failed(content));
        self.last_printed_nothing =
            tool == "shell" && !self.last_failed && content.contains("\nstdout: (empty)\n");
        if self.last_failed {
            let flat = content.split_whitespace().collect::<Vec<_>>().join(" ");
            self.last_error = flat.chars().take(ERROR_QUOTE_CHARS).collect();
        }
        let target = target(tool, arguments);
        self.last_changed = !self.last_failed && changes_workspace(tool, &target);
        self.changed |= self.last_changed;
        if tool == "shell" {
            self.computed.push(content.to_owned());
        }
        // A call that failed (a refused write among them) showed nothing of its target.
        if !self.last_failed {
            self.looked_at.push(target);
        }
        self.results.push(content.to_owned());
    }

    /// Whether a call of the turn that did not fail was pointed at `path` (its path argument,
    /// or a word of its command line).
    pub(crate) fn looked_at(&self, path: &str) -> bool {
        let path = path.trim_start_matches("./");
        self.looked_at.iter().any(|t| contains_word(t, path))
    }

    /// Notes that a write to `path` was refused once.
    pub(crate) fn refuse(&mut self, path: String) {
        self.refused.push(path);
    }

    /// Whether a write to `path` was refused before in this turn.
    pub(crate) fn was_refused(&self, path: &str) -> bool {
        self.refused.iter().any(|r| r == path)
    }
}

/// What a call is pointed at: the `path` of a file tool, the `command` of `shell`, every
/// string argument of another tool (never `write_file`'s content: writing a file's name is
/// not looking at it).
pub(super) fn target(tool: &str, arguments: &str) -> String {
    let Ok(serde_json::Value::Object(args)) = serde_json::from_str(arguments) else {
        return String::new();
    };
    let key = match tool {
        "shell" => Some("command"),
        "read_file" | "write_file" | "edit_file" => Some("path"),
        _ => None,
    };
    args.iter()
        .filter(|(k, _)| key.is_none_or(|key| k.as_str() == key))
        .filter_map(|(_, v)| v.as_str())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Whether a call of `tool` pointed at `target` can change the workspace: a file write or
/// edit, or a command line that does (see [`command_writes`]).
fn changes_workspace(tool: &str, target: &str) -> bool {
    match tool {
        "write_file" | "edit_file" => true,
        "shell" => command_writes(target),
        _ => false,
    }
}

/// Whether a command line can write: it redirects output into a file (not `2>&1` or
/// `/dev/null`), or one of its commands is a program that writes (`mv`, `rm`, `sed -i`,
/// `sort -o`, `find -delete`; an interpreter counts, as what it runs cannot be read off the
/// line). Quoted text is left out, so `awk '$3 > 5'` is no redirection.
pub(super) fn command_writes(command: &str) -> bool {
    const WRITERS: &[&str] = &[
        "mv", "cp", "rm", "rmdir", "mkdir", "touch", "tee", "ln", "truncate", "install", "dd",
        "tar", "unzip", "gzip", "gunzip", "patch", "chmod", "python", "python3", "sh", "bash",
    ];
    let mut line = without_quotes(command);
    for harmless in [
        "2>&1",
        "1>&2",
        ">&2",
        "2>/dev/null",
        "2> /dev/null",
        ">/dev/null",
        "> /dev/null",
    ] {
        line = line.replace(harmless, " ");
    }
    if line.contains('>') {
        return true;
    }
    line.split(['|', ';', '&']).any(|segment| {
        let mut words = segment.split_whitespace();
        let Some(program) = words.next() else {
            return false;
        };
        let program = program.rsplit('/').next().unwrap_or(program);
        let flags: Vec<&str> = words.filter(|w| w.starts_with('-')).collect();
        let flag = |f: &str| flags.iter().any(|w| w.starts_with(f));
        WRITERS.contains(&program)
            || (matches!(program, "sed" | "perl") && (flag("-i") || flag("-pi")))
            || (program == "sort" && flag("-o"))
            || (program == "find" && (flag("-delete") || flag("-exec")))
    })
}

/// `command` with every single- or double-quoted span replaced by a space.
fn without_quotes(command: &str) -> String {
    let mut out = String::with_capacity(command.len());
    let mut quote: Option<char> = None;
    for c in command.chars() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == '\'' || c == '"' => {
                quote = Some(c);
                out.push(' ');
            }
            None => out.push(c),
        }
    }
    out
}

/// Whether a command's result says it failed: killed by a signal, its status unknown, or a
/// non-zero exit code, except 1 with nothing on stderr (how `grep`, `test` and `diff` say
/// "no") and 2 when stderr only says some names were directories (`grep WORD *` in a
/// workspace with a subdirectory, which still searched every file).
pub(super) fn command_failed(output: &str) -> bool {
    let first = output.lines().next().unwrap_or_default();
    let Some(code) = first.strip_prefix("exit_code: ") else {
        return first.starts_with("killed by signal") || first.starts_with("exit status unknown");
    };
    let stderr = stderr_lines(output);
    match code.trim() {
        "0" => false,
        "1" => stderr.is_none_or(|lines| !lines.is_empty()),
        "2" => stderr.is_none_or(|lines| {
            lines.is_empty() || !lines.iter().all(|l| l.ends_with(": Is a directory"))
        }),
        _ => true,
    }
}

/// The lines of a command result's `stderr:` section; `None` when the result has none (a
/// preview of a long output may have cut it off).
fn stderr_lines(output: &str) -> Option<Vec<&str>> {
    if output.contains("\nstderr: (empty)") {
        return Some(Vec::new());
    }
    let start = output.find("\nstderr:\n")? + "\nstderr:\n".len();
    Some(
        output
            .get(start..)?
            .lines()
            .filter(|l| !l.trim().is_empty())
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_counts_as_a_write() {
        for writes in [
            "sort a > b",
            "echo x >> f",
            "mkdir -p d && mv *.log d/",
            "sed -i 's/a/b/' f",
            "sort -o f f",
            "find . -name '*.tmp' -delete",
            "perl -pi -e 's/a/b/' f",
            "python3 -c 'open(\"f\",\"w\")'",
            "/bin/rm f",
        ] {
            assert!(command_writes(writes), "{writes}");
        }
        for reads in [
            "grep -c x f 2>/dev/null",
            "grep x f 2>&1",
            "awk '$3 > 5' f",
            "grep -c '>' f",
            "grep -i x f | sed -n 1p",
            "sort f | grep -o x",
            "grep install README",
            "wc -l < f",
        ] {
            assert!(!command_writes(reads), "{reads} counted as a write");
        }
    }

    #[test]
    fn how_a_command_failed() {
        let no_match = "exit_code: 1\nstdout: (empty)\nstderr: (empty)\n";
        assert!(!command_failed(no_match));
        assert!(command_failed(
            "exit_code: 1\nstdout: (empty)\nstderr:\nmv: cannot stat 'a'\n"
        ));
        let dirs = "exit_code: 2\nstdout:\nc.txt\nstderr:\ngrep: sub: Is a directory\n";
        assert!(!command_failed(dirs), "grep searched every file");
        assert!(command_failed(
            "exit_code: 2\nstdout: (empty)\nstderr:\ngrep: x: No such file or directory\n"
        ));
        assert!(command_failed(
            "killed by signal 9\nstdout: (empty)\nstderr: (empty)\n"
        ));
        assert!(command_failed("exit status unknown\n"));
        assert!(!command_failed(
            "exit_code: 0\nstdout: (empty)\nstderr: (empty)\n"
        ));
        // Without a stderr section (cut off in a preview), a non-zero exit is a failure.
        assert!(command_failed("exit_code: 1\nstdout:\nlots"));
    }

    #[test]
    fn a_failed_call_looks_at_nothing() {
        let mut e = Evidence::default();
        e.record(
            "write_file",
            r#"{"path":"a.txt"}"#,
            "Not written: a.txt already has text",
            true,
        );
        assert!(!e.looked_at("a.txt"));
        e.record("read_file", r#"{"path":"a.txt"}"#, "text", false);
        assert!(e.looked_at("./a.txt"));
        assert!(!e.last_changed);
        e.record(
            "shell",
            r#"{"command":"echo x >> a.txt"}"#,
            "exit_code: 0\nstdout: (empty)\nstderr: (empty)\n",
            false,
        );
        assert!(e.last_changed && e.changed && e.last_printed_nothing);
    }
}
