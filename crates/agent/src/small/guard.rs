//! Writes a small model is stopped from making blind: a `write_file` that would replace a file
//! the turn has not looked at, or that makes up the text of files the task names and the turn
//! has not looked at. The call does not run; its result says why and what to do instead. Each
//! path is refused once: the same write again goes through, so the model keeps the last word.

use super::review::{Evidence, holds_text, target};
use super::text::{file_names, mentions_any, words};
use serde_json::json;
use std::path::Path;

/// Why a write was refused, with the path it was refused for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Refusal {
    /// The path the refusal is keyed on (recorded in [`Evidence::refused`]).
    pub path: String,
    /// The call's error result.
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
    workspace: &Path,
) -> Option<Refusal> {
    if tool != "write_file" {
        return None;
    }
    let path = target(tool, arguments);
    let path = path.trim();
    if path.is_empty() || evidence.refused.iter().any(|r| r == path) {
        return None;
    }
    let holds_text = |given: &str| holds_text(workspace, given);
    if holds_text(path) && !evidence.looked_at(path) {
        let instead = match appended_line(input, arguments) {
            Some(line) => format!(
                "To add it at the end, call shell with {}",
                json!({ "command": format!("echo '{line}' >> {path}") })
            ),
            None => format!(
                "Read it first with read_file. To change one part, use edit_file; to add a \
                 line at the end, use shell: echo 'TEXT' >> {path}"
            ),
        };
        return Some(Refusal {
            path: path.to_owned(),
            message: format!(
                "Not written: {path} already has text you have not read, and write_file \
                 would replace all of it. {instead}"
            ),
        });
    }
    let unread: Vec<String> = file_names(input)
        .into_iter()
        .filter(|name| name != path && holds_text(name) && !evidence.looked_at(name))
        .collect();
    let first = unread.first()?;
    let instead = match recipe(input, &unread, path) {
        Some(command) => format!(
            "Let shell take the text from the file instead: call shell with {}",
            json!({ "command": command })
        ),
        None => format!("Read {first} first with read_file."),
    };
    Some(Refusal {
        path: path.to_owned(),
        message: format!(
            "Not written: the task names {}, which you have not read, so this content is \
             guessed. {instead}",
            unread.join(", "),
        ),
    })
}

/// The line a write was meant to add, when the task says to add or append and the write's
/// content is one line a shell `echo '…'` can carry as it is.
fn appended_line(input: &str, arguments: &str) -> Option<String> {
    let adds = words(input).any(|w| matches!(w.to_ascii_lowercase().as_str(), "add" | "append"));
    if !adds && !mentions_any(input, &["at the end"]) {
        return None;
    }
    let args: serde_json::Value = serde_json::from_str(arguments).ok()?;
    let line = args.get("content")?.as_str()?.trim();
    let plain = !line.is_empty() && !line.contains(['\n', '\'', '\\']);
    plain.then(|| line.to_owned())
}

/// The command that makes `output` from the `sources` the way the task says (upper case,
/// joined, copied, renamed or sorted), if the task says one of those.
fn recipe(input: &str, sources: &[String], output: &str) -> Option<String> {
    let first = sources.first()?;
    let says = |phrases: &[&str]| mentions_any(input, phrases);
    Some(if says(&["upper case", "uppercase", "capital"]) {
        format!("tr a-z A-Z < {first} > {output}")
    } else if says(&["lower case", "lowercase"]) {
        format!("tr A-Z a-z < {first} > {output}")
    } else if says(&[
        "followed by",
        "join",
        "combine",
        "concatenat",
        "merge",
        "together",
    ]) {
        format!("cat {} > {output}", sources.join(" "))
    } else if says(&["rename", "extension", "move"]) {
        format!("mv {first} {output}")
    } else if says(&["copy", "duplicate"]) {
        format!("cp {first} {output}")
    } else if says(&["sort", "alphabetical"]) {
        format!("sort {first} > {output}")
    } else {
        return None;
    })
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

    fn write(path: &str) -> String {
        serde_json::json!({"path": path, "content": "x"}).to_string()
    }

    #[test]
    fn replacing_a_file_not_read_is_refused_once() {
        let dir = workspace();
        let input = "Add the line 'eggs' at the end of shopping.txt.";
        let mut e = Evidence::default();
        let refusal = guard("write_file", &write("shopping.txt"), input, &e, dir.path()).unwrap();
        assert_eq!(refusal.path, "shopping.txt");
        assert!(
            refusal
                .message
                .ends_with(r#"call shell with {"command":"echo 'x' >> shopping.txt"}"#),
            "{}",
            refusal.message
        );
        let replace = guard(
            "write_file",
            &write("shopping.txt"),
            "Replace shopping.txt with x.",
            &e,
            dir.path(),
        )
        .unwrap();
        assert!(
            replace.message.contains("Read it first with read_file"),
            "{}",
            replace.message
        );
        // Refused once: the same write again goes through.
        e.refused.push(refusal.path);
        assert_eq!(
            guard("write_file", &write("shopping.txt"), input, &e, dir.path()),
            None
        );
        // Once read, the write is the model's informed choice.
        let mut e = Evidence::default();
        e.record(
            "read_file",
            r#"{"path":"shopping.txt"}"#,
            "bread\nmilk\n",
            false,
        );
        assert_eq!(
            guard("write_file", &write("shopping.txt"), input, &e, dir.path()),
            None
        );
        // A file the model wrote itself earlier in the turn counts as seen.
        let mut e = Evidence::default();
        e.record(
            "shell",
            r#"{"command":"sort x > shopping.txt"}"#,
            "exit_code: 0",
            false,
        );
        assert_eq!(
            guard("write_file", &write("shopping.txt"), input, &e, dir.path()),
            None
        );
    }

    #[test]
    fn new_and_empty_files_and_other_tools_are_not_guarded() {
        let dir = workspace();
        let e = Evidence::default();
        let input = "Create a file hello.txt containing exactly the text: Hello, reef!";
        assert_eq!(
            guard("write_file", &write("hello.txt"), input, &e, dir.path()),
            None
        );
        assert_eq!(
            guard(
                "write_file",
                &write("empty.txt"),
                "Fill empty.txt.",
                &e,
                dir.path()
            ),
            None
        );
        assert_eq!(
            guard(
                "edit_file",
                &write("shopping.txt"),
                "Edit shopping.txt.",
                &e,
                dir.path()
            ),
            None
        );
        assert_eq!(guard("write_file", "not json", "x", &e, dir.path()), None);
    }

    #[test]
    fn content_made_up_for_files_the_task_names_is_refused() {
        let dir = workspace();
        let input = "Create all.txt containing part1.txt followed by part2.txt.";
        let mut e = Evidence::default();
        // part2.txt does not exist: only the file that holds text is named as unread.
        let refusal = guard("write_file", &write("all.txt"), input, &e, dir.path()).unwrap();
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
            guard("write_file", &write("all.txt"), input, &e, dir.path()),
            None
        );
        // Without a way named in the task, the model is told to read first.
        let refusal = guard(
            "write_file",
            &write("summary.txt"),
            "Summarize part1.txt in summary.txt.",
            &Evidence::default(),
            dir.path(),
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
                dir.path()
            ),
            None
        );
    }
}
