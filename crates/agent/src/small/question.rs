//! Reading a task: what it asks for (a change, a count, a name, yes or no, files to write or
//! empty) and what a small model's answer describes instead of doing.

use super::text::{file_names, mentions_any, words};

/// Whether `input` is about the workspace or the machine: it names a file (`data.csv`,
/// `src/app`) or speaks of files, directories, lines, the disk, memory, processes or what is
/// installed.
pub(super) fn about_workspace(input: &str) -> bool {
    const WORDS: &[&str] = &[
        "file",
        "files",
        "directory",
        "directories",
        "folder",
        "folders",
        "dir",
        "workspace",
        "line",
        "lines",
        // The machine reef runs on: checked with a command, not recalled.
        "disk",
        "memory",
        "cpu",
        "process",
        "processes",
        "installed",
        "version",
        "system",
        "machine",
    ];
    !file_names(input).is_empty()
        || words(input).any(|w| WORDS.contains(&w.to_ascii_lowercase().as_str()))
}

/// The files a task asks to be written: a file name right after `to`, `create`, `file`,
/// `called` or `named` (`Write the count to count.txt`, `Rename a.md to b.md`, `an empty
/// file src/main.rs`); none for a task that deletes or removes.
pub(super) fn outputs(input: &str) -> Vec<String> {
    const BEFORE: &[&str] = &["to", "create", "file", "called", "named"];
    let lower = input.to_ascii_lowercase();
    if ["delete", "remove"].iter().any(|w| lower.contains(w)) {
        return Vec::new();
    }
    let words: Vec<&str> = words(input).collect();
    words
        .windows(2)
        .filter(|w| BEFORE.contains(&w[0].to_ascii_lowercase().as_str()))
        .map(|w| w[1])
        .filter(|w| !file_names(w).is_empty() && !w.starts_with('/') && !w.contains(".."))
        .map(str::to_owned)
        .collect()
}

/// The first command in backticks in `text` that starts with a common command-line program
/// (`` `wc -l data.csv` ``), which a small model sometimes describes instead of running.
pub(super) fn described_command(text: &str) -> Option<String> {
    const PROGRAMS: &[&str] = &[
        "awk", "cat", "cp", "cut", "echo", "find", "grep", "head", "ls", "mkdir", "mv", "rm",
        "sed", "sort", "tail", "touch", "tr", "uniq", "wc",
    ];
    text.split('`')
        .skip(1)
        .step_by(2)
        .map(str::trim)
        .find(|span| {
            span.split_whitespace().count() > 1
                && span
                    .split_whitespace()
                    .next()
                    .is_some_and(|program| PROGRAMS.contains(&program))
        })
        .map(str::to_owned)
}

/// The files a task that changes the workspace asks to be empty: the file name in `an empty
/// NAME` or `an empty file NAME` (not `which file is empty`).
pub(super) fn empties(input: &str) -> Vec<String> {
    if !asks_for_change(input) {
        return Vec::new();
    }
    let words: Vec<&str> = words(input).collect();
    words
        .windows(2)
        .enumerate()
        .filter(|(_, w)| {
            matches!(w[0].to_ascii_lowercase().as_str(), "a" | "an")
                && w[1].eq_ignore_ascii_case("empty")
        })
        .filter_map(|(i, _)| {
            let next = words.get(i + 2)?;
            let name = if next.eq_ignore_ascii_case("file") {
                words.get(i + 3)?
            } else {
                next
            };
            (!file_names(name).is_empty()).then(|| (*name).to_owned())
        })
        .collect()
}

/// Whether `input` asks for the workspace to change: an instruction (not a question) with a
/// verb that changes files, and not one that asks to be shown something (`Sort a.txt and show
/// the first line`) or to add numbers up.
pub(super) fn asks_for_change(input: &str) -> bool {
    const VERBS: &[&str] = &[
        "add", "append", "change", "copy", "create", "delete", "edit", "insert", "make", "move",
        "put", "remove", "rename", "replace", "save", "sort", "update", "write",
    ];
    const SHOWING: &[&str] = &["show", "print", "tell", "display"];
    let words: Vec<String> = words(input).map(str::to_ascii_lowercase).collect();
    let changes = words.iter().enumerate().any(|(i, w)| {
        VERBS.contains(&w.as_str()) && !(w == "add" && words.get(i + 1).is_some_and(|n| n == "up"))
    });
    !input.contains('?') && changes && !words.iter().any(|w| SHOWING.contains(&w.as_str()))
}

/// Whether `input` asks for a count or a sum: an answer computed by a command.
pub(super) fn asks_for_count(input: &str) -> bool {
    mentions_any(
        input,
        &[
            "how many",
            "number of",
            "count",
            "sum of",
            "total",
            "average",
        ],
    )
}

/// Whether `input` asks to be answered yes or no.
pub(super) fn asks_yes_or_no(input: &str) -> bool {
    mentions_any(input, &["yes or no"])
}

/// Whether `input` asks for a number: a count, a sum, an amount, an extreme or an average.
pub(super) fn asks_for_number(input: &str) -> bool {
    const PHRASES: &[&str] = &[
        "how many",
        "how much",
        "how often",
        "how long",
        "sum of",
        "total",
        "number of",
        "largest number",
        "smallest number",
        "maximum",
        "minimum",
        "average",
    ];
    mentions_any(input, PHRASES)
}

/// Whether `input` asks for the name of a file or directory.
pub(super) fn asks_for_name(input: &str) -> bool {
    const PHRASES: &[&str] = &[
        "which file",
        "what file",
        "which directory",
        "file name",
        "its name",
        "name of the file",
    ];
    mentions_any(input, PHRASES)
}

/// The line a question asks about by number (`line 3`), if any.
pub(super) fn line_number(input: &str) -> Option<u32> {
    let words: Vec<&str> = words(input).collect();
    words
        .windows(2)
        .filter(|w| w[0].eq_ignore_ascii_case("line"))
        .find_map(|w| w[1].parse().ok())
        .filter(|&n| n > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_asked_for_and_not() {
        assert!(asks_for_change(
            "Rename data.txt so that it has the .csv extension."
        ));
        assert!(asks_for_change(
            "Add the line 'eggs' at the end of shopping.txt."
        ));
        assert!(!asks_for_change("Which file should I move?"));
        assert!(!asks_for_change("Count the words of a.txt."));
        assert!(!asks_for_change("Add up the numbers in numbers.txt."));
        assert!(!asks_for_change("Sort names.txt and show the first one."));
    }

    #[test]
    fn empty_files_asked_for_and_not() {
        assert_eq!(
            empties("Create src/app and an empty file src/app/main.rs."),
            ["src/app/main.rs"]
        );
        assert_eq!(
            empties("Make empty.txt, then an empty notes.md."),
            ["notes.md"]
        );
        assert!(empties("Which file is empty: a.txt or b.txt?").is_empty());
        assert!(empties("Write empty a.txt lines to b.txt").is_empty());
    }

    #[test]
    fn a_line_by_its_number() {
        assert_eq!(
            line_number("What is written on line 3 of list.txt?"),
            Some(3)
        );
        assert_eq!(
            line_number("Which line mentions x, line 4 or line 5?"),
            Some(4)
        );
        assert_eq!(line_number("What is on line 0?"), None);
        assert_eq!(line_number("Count the lines."), None);
    }
}
