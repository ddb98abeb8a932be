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

/// The files a task asks to be empty: a file name after `empty` or `empty file`.
pub(super) fn empties(input: &str) -> Vec<String> {
    let words: Vec<&str> = words(input).collect();
    words
        .iter()
        .enumerate()
        .filter(|(_, w)| w.eq_ignore_ascii_case("empty"))
        .filter_map(|(i, _)| {
            let next = words.get(i + 1)?;
            let name = if next.eq_ignore_ascii_case("file") {
                words.get(i + 2)?
            } else {
                next
            };
            (!file_names(name).is_empty()).then(|| (*name).to_owned())
        })
        .collect()
}

/// Whether `input` asks for the workspace to change: an instruction (not a question) with a
/// verb that changes files.
pub(super) fn asks_for_change(input: &str) -> bool {
    const VERBS: &[&str] = &[
        "add", "append", "change", "copy", "create", "delete", "edit", "insert", "make", "move",
        "put", "remove", "rename", "replace", "save", "sort", "update", "write",
    ];
    !input.contains('?') && words(input).any(|w| VERBS.contains(&w.to_ascii_lowercase().as_str()))
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

pub(super) fn asks_yes_or_no(input: &str) -> bool {
    mentions_any(input, &["yes or no"])
}

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
        .find(|w| w[0].eq_ignore_ascii_case("line"))
        .and_then(|w| w[1].parse().ok())
        .filter(|&n| n > 0)
}
