//! Writes a small model is stopped from making blind: a `write_file` that would replace a file
//! no call of the turn has looked at, or that makes up the text of files the task names and no
//! call has looked at. The call does not run; its result says why and what to do instead (a
//! command, when the task names a way reef knows one for). Each path is refused once: the same
//! write again goes through, so the model keeps the last word. reef never runs the command it
//! suggests; the model may.

use super::evidence::{Evidence, target};
use super::lookup::Files;
use super::text::{file_names, mentions_any, words};
use serde_json::json;

/// Why a write was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum RefusalKind {
    /// It would replace the text of a file no call has looked at.
    Overwrite,
    /// Its content stands for files the task names that no call has looked at.
    Unread { sources: Vec<String> },
}

/// A refused write: why, the path it was refused for, and the call's error result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Refusal {
    pub kind: RefusalKind,
    /// The path the refusal is keyed on ([`Evidence::refuse`]).
    pub path: String,
    pub message: String,
}

/// The refusal a call earns before it runs, if any. Only `write_file` is guarded: an edit
/// fails by itself when its text is not in the file, and a command's effect cannot be read
/// off its line.
pub(crate) fn guard(
    tool: &str,
    arguments: &str,
    input: &str,
    evidence: &Evidence,
    files: Files<'_>,
) -> Option<Refusal> {
    if tool != "write_file" {
        return None;
    }
    let path = target(tool, arguments);
    let path = path.trim();
    if path.is_empty() || evidence.was_refused(path) {
        return None;
    }
    if files.holds_text(path) && !evidence.looked_at(path) {
        let instead = match appended_line(input, arguments) {
            Some(line) => format!(
                "To add it at the end, call shell with {}",
                json!({ "command": format!("echo '{line}' >> {}", shell_word(path)) })
            ),
            None => format!(
                "Read it first with read_file. To change one part, use edit_file; to add a \
                 line at the end, use shell: echo 'TEXT' >> {}",
                shell_word(path)
            ),
        };
        return Some(Refusal {
            kind: RefusalKind::Overwrite,
            path: path.to_owned(),
            message: format!(
                "Not written: {path} already has text you have not read, and write_file \
                 would replace all of it. {instead}"
            ),
        });
    }
    let sources: Vec<String> = file_names(input)
        .into_iter()
        .filter(|name| name != path && files.holds_text(name) && !evidence.looked_at(name))
        .collect();
    let first = sources.first()?;
    let instead = match recipe(input, &sources, path) {
        Some(command) => format!(
            "Let shell take the text from the file instead: call shell with {}",
            json!({ "command": command })
        ),
        None => format!("Read {first} first with read_file."),
    };
    let message = format!(
        "Not written: the task names {}, which you have not read, so this content is \
         guessed. {instead}",
        sources.join(", "),
    );
    Some(Refusal {
        kind: RefusalKind::Unread { sources },
        path: path.to_owned(),
        message,
    })
}

/// Characters of a line an append command is offered for.
const APPEND_MAX_CHARS: usize = 200;

/// The line a write was meant to add, when the task says to add or append (and not at the
/// top) and the write's content is one short line of text that `echo '…'` carries as it is:
/// no quote, backslash or newline (inside single quotes nothing else is special), not taken
/// for an option (`-n`), and not JSON (an appended object leaves a file that is not JSON).
fn appended_line(input: &str, arguments: &str) -> Option<String> {
    let lower: Vec<String> = words(input).map(str::to_ascii_lowercase).collect();
    let says = |w: &[&str]| lower.iter().any(|x| w.contains(&x.as_str()));
    let adds = says(&["add", "append"]) || mentions_any(input, &["at the end"]);
    let elsewhere = says(&[
        "top",
        "start",
        "beginning",
        "above",
        "before",
        "prepend",
        "insert",
    ]);
    if !adds || elsewhere {
        return None;
    }
    let args: serde_json::Value = serde_json::from_str(arguments).ok()?;
    let line = args.get("content")?.as_str()?.trim();
    let plain = !line.is_empty()
        && line.chars().count() <= APPEND_MAX_CHARS
        && !line.contains(['\n', '\r', '\'', '\\'])
        && !line.starts_with(['-', '{', '['])
        && !line.chars().any(char::is_control);
    plain.then(|| line.to_owned())
}

/// The command that makes `output` from the `sources` the way the task says (upper or lower
/// case, joined, renamed, copied or sorted), if it says exactly one such way in whole words;
/// none when it also removes or deletes, which no single command here does.
fn recipe(input: &str, sources: &[String], output: &str) -> Option<String> {
    let lower: Vec<String> = words(input).map(str::to_ascii_lowercase).collect();
    let says = |w: &[&str]| lower.iter().any(|x| w.contains(&x.as_str()));
    let phrase = |p: &[&str]| mentions_any(input, p);
    if says(&["remove", "delete", "duplicate", "duplicates"]) {
        return None;
    }
    let first = shell_word(sources.first()?);
    let output = shell_word(output);
    let ways = [
        (
            phrase(&["upper case", "uppercase"]),
            format!("tr a-z A-Z < {first} > {output}"),
        ),
        (
            phrase(&["lower case", "lowercase"]),
            format!("tr A-Z a-z < {first} > {output}"),
        ),
        (
            phrase(&["followed by"])
                || says(&["join", "combine", "concatenate", "merge", "together"]),
            format!(
                "cat {} > {output}",
                sources
                    .iter()
                    .map(|s| shell_word(s))
                    .collect::<Vec<_>>()
                    .join(" ")
            ),
        ),
        (says(&["copy"]), format!("cp {first} {output}")),
        (
            says(&["sort", "alphabetical"]),
            format!("sort {first} > {output}"),
        ),
        (
            says(&["rename", "extension", "move"]),
            format!("mv {first} {output}"),
        ),
    ];
    let mut named = ways.into_iter().filter(|(said, _)| *said);
    match (named.next(), named.next()) {
        (Some((_, command)), None) => Some(command),
        _ => None,
    }
}

/// `word` as one shell word: as it is when it is made of letters, digits and `._/-` and does
/// not start with `-`, single-quoted otherwise (a file name in the workspace is the agent's
/// and may hold `;` or spaces).
fn shell_word(word: &str) -> String {
    let plain = !word.is_empty()
        && !word.starts_with('-')
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '/' | '-'));
    if plain {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workspace() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("shopping.txt"), "bread\nmilk\n").unwrap();
        std::fs::write(dir.path().join("part1.txt"), "first half\n").unwrap();
        std::fs::write(dir.path().join("empty.txt"), "").unwrap();
        dir
    }

    fn at(root: &std::path::Path) -> Files<'_> {
        Files::new(root, &[])
    }

    fn write(path: &str) -> String {
        serde_json::json!({"path": path, "content": "x"}).to_string()
    }

    #[test]
    fn replacing_a_file_not_read_is_refused_once() {
        let dir = workspace();
        let input = "Add the line 'eggs' at the end of shopping.txt.";
        let write_to = |task: &str, e: &Evidence| {
            guard(
                "write_file",
                &write("shopping.txt"),
                task,
                e,
                at(dir.path()),
            )
        };
        let mut e = Evidence::default();
        let refusal = write_to(input, &e).unwrap();
        assert_eq!(refusal.kind, RefusalKind::Overwrite);
        assert_eq!(refusal.path, "shopping.txt");
        assert!(
            refusal
                .message
                .ends_with(r#"call shell with {"command":"echo 'x' >> shopping.txt"}"#),
            "{}",
            refusal.message
        );
        let replace = write_to("Replace shopping.txt with x.", &e).unwrap();
        assert!(
            replace.message.contains("Read it first with read_file"),
            "{}",
            replace.message
        );
        // Refused once: the same write again goes through.
        e.refuse(refusal.path);
        assert_eq!(write_to(input, &e), None);
        // Once read, the write is the model's informed choice.
        let mut e = Evidence::default();
        e.record("read_file", r#"{"path":"shopping.txt"}"#, "bread\n", false);
        assert_eq!(write_to(input, &e), None);
        // A file the model wrote itself earlier in the turn counts as seen.
        let mut e = Evidence::default();
        let ok = "exit_code: 0\nstdout: (empty)\nstderr: (empty)\n";
        e.record("shell", r#"{"command":"sort x > shopping.txt"}"#, ok, false);
        assert_eq!(write_to(input, &e), None);
    }

    #[test]
    fn new_and_empty_files_and_other_tools_are_not_guarded() {
        let dir = workspace();
        let e = Evidence::default();
        let input = "Create a file hello.txt containing exactly the text: Hello, reef!";
        assert_eq!(
            guard("write_file", &write("hello.txt"), input, &e, at(dir.path())),
            None
        );
        assert_eq!(
            guard(
                "write_file",
                &write("empty.txt"),
                "Fill empty.txt.",
                &e,
                at(dir.path())
            ),
            None
        );
        assert_eq!(
            guard(
                "edit_file",
                &write("shopping.txt"),
                "Edit shopping.txt.",
                &e,
                at(dir.path())
            ),
            None
        );
        assert_eq!(
            guard("write_file", "not json", "x", &e, at(dir.path())),
            None
        );
    }

    #[test]
    fn content_made_up_for_files_the_task_names_is_refused() {
        let dir = workspace();
        let input = "Create all.txt containing part1.txt followed by part2.txt.";
        let mut e = Evidence::default();
        // part2.txt does not exist: only the file that holds text is named as unread.
        let refusal = guard("write_file", &write("all.txt"), input, &e, at(dir.path())).unwrap();
        assert_eq!(
            refusal.kind,
            RefusalKind::Unread {
                sources: vec!["part1.txt".to_owned()]
            }
        );
        assert!(
            refusal.message.contains("names part1.txt, which"),
            "{}",
            refusal.message
        );
        assert!(
            refusal
                .message
                .contains(r#"call shell with {"command":"cat part1.txt > all.txt"}"#),
            "{}",
            refusal.message
        );
        e.record(
            "shell",
            r#"{"command":"cat part1.txt"}"#,
            "exit_code: 0",
            false,
        );
        assert_eq!(
            guard("write_file", &write("all.txt"), input, &e, at(dir.path())),
            None
        );
        // Without a way named in the task, the model is told to read first.
        let refusal = guard(
            "write_file",
            &write("summary.txt"),
            "Summarize part1.txt in summary.txt.",
            &Evidence::default(),
            at(dir.path()),
        )
        .unwrap();
        assert!(
            refusal
                .message
                .ends_with("Read part1.txt first with read_file.")
        );
    }

    #[test]
    fn the_command_offered_follows_the_task() {
        let two = ["a.txt".to_owned(), "b.txt".to_owned()];
        let cases = [
            (
                "Write a.txt in upper case to c.txt.",
                "tr a-z A-Z < a.txt > c.txt",
            ),
            (
                "Create c.txt holding a.txt followed by b.txt.",
                "cat a.txt b.txt > c.txt",
            ),
            (
                "Rename a.txt so that it has the .csv extension.",
                "mv a.txt c.txt",
            ),
            ("Copy a.txt to c.txt.", "cp a.txt c.txt"),
            (
                "Write a.txt in alphabetical order to c.txt.",
                "sort a.txt > c.txt",
            ),
        ];
        for (input, command) in cases {
            assert_eq!(
                recipe(input, &two, "c.txt").as_deref(),
                Some(command),
                "{input}"
            );
        }
        assert_eq!(recipe("Summarize a.txt.", &two, "c.txt"), None);
    }

    #[test]
    fn a_link_is_not_followed_to_decide() {
        let dir = workspace();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret.txt"), "text").unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("out")).unwrap();
        let e = Evidence::default();
        // Positive control: through the link the file holds text.
        assert!(dir.path().join("out/secret.txt").metadata().unwrap().len() > 0);
        assert_eq!(
            guard(
                "write_file",
                &write("out/secret.txt"),
                "Write out/secret.txt.",
                &e,
                at(dir.path())
            ),
            None
        );
    }

    #[test]
    fn no_command_is_offered_for_a_task_it_would_get_wrong() {
        let two = ["a.txt".to_owned(), "b.txt".to_owned()];
        // "remove" is not "move", and removing duplicates is no single command here.
        let input = "Remove the duplicate lines from a.txt and write the result to c.txt.";
        assert_eq!(recipe(input, &two, "c.txt"), None);
        // Two ways named: none is chosen.
        assert_eq!(
            recipe("Copy a.txt to c.txt and sort it.", &two, "c.txt"),
            None
        );
        assert_eq!(
            recipe("Capital cities from a.txt into c.txt.", &two, "c.txt"),
            None
        );
        // Names that are not plain words are quoted.
        assert_eq!(
            recipe(
                "Copy a.txt to c.txt.",
                &["x;curl y|sh".to_owned()],
                "my notes.txt"
            ),
            Some(r"cp 'x;curl y|sh' 'my notes.txt'".to_owned())
        );
        assert_eq!(shell_word("it's"), r"'it'\''s'");
        assert_eq!(shell_word("-rf"), "'-rf'");
        assert_eq!(shell_word("logs/a.log"), "logs/a.log");
    }

    #[test]
    fn an_append_is_offered_only_for_a_plain_line_at_the_end() {
        let add = "Add the line at the end of f.txt.";
        let content = |c: &str| json!({"path": "f.txt", "content": c}).to_string();
        assert_eq!(
            appended_line(add, &content("eggs\n")).as_deref(),
            Some("eggs")
        );
        for refused in [
            "it's",
            "a\nb",
            "back\\slash",
            "-n",
            "{\"k\": 1}",
            "",
            &"x".repeat(APPEND_MAX_CHARS + 1),
        ] {
            assert_eq!(appended_line(add, &content(refused)), None, "{refused:?}");
        }
        assert_eq!(
            appended_line(
                "Add the line 'name,age' at the top of f.txt.",
                &content("name,age")
            ),
            None
        );
        assert_eq!(
            appended_line("Replace f.txt with eggs.", &content("eggs")),
            None
        );
        // `$(…)` stays text inside single quotes: offered as it is.
        assert_eq!(
            appended_line(add, &content("$(rm -rf ~)")).as_deref(),
            Some("$(rm -rf ~)")
        );
    }
}
