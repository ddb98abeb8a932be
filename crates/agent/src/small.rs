//! The profile for small models (`agent.profile = "small"`, the default for a model run
//! in-process): a compact system prompt with worked examples, the few tools such a model needs
//! described for it, a hint after a failed call naming the likely right tool, and the review
//! that sends an answer back once when no tool result supports it.

use reef_core::ToolSpec;
use reef_workspace::{Workspace, WorkspaceError};
use serde_json::json;
use std::path::Path;

/// Built-in tools left out for a small model: `shell` does their work with commands it knows
/// (`ls`, `grep`), and every extra tool description is one more way to choose wrong.
const LEFT_OUT: &[&str] = &[
    "list_dir",
    "search_files",
    "http_fetch",
    "memory_save",
    "memory_search",
    "memory_forget",
    "session_search",
];

/// The tools offered to a small model: the registry's, less [`LEFT_OUT`], with the file and
/// shell tools described for it (with recipes) and only the arguments it needs.
pub(crate) fn tool_specs(specs: Vec<ToolSpec>) -> Vec<ToolSpec> {
    specs
        .into_iter()
        .filter(|s| !LEFT_OUT.contains(&s.name.as_str()))
        .map(|s| match rewrite(&s.name) {
            Some((description, parameters)) => ToolSpec {
                name: s.name,
                description: description.to_owned(),
                parameters,
            },
            None => s,
        })
        .collect()
}

fn rewrite(name: &str) -> Option<(&'static str, serde_json::Value)> {
    let string = |what: &str| json!({"type": "string", "description": what});
    let object = |properties: serde_json::Value, required: &[&str]| json!({"type": "object", "properties": properties, "required": required});
    Some(match name {
        "shell" => (
            "Run a shell command in the workspace and get its output. Use it for: listing \
             files (ls DIR), counting lines (wc -l < FILE), words (wc -w < FILE) or lines \
             with a word (grep -c WORD FILE), finding which files mention a word (grep -l \
             WORD *), looking up a setting or value (grep KEY FILE, or cat FILE), \
             printing line N (sed -n 'Np' FILE), the largest number (sort -n FILE | tail -1), \
             the largest file (ls -S DIR | head -1), adding up numbers (awk '{s+=$1} \
             END {print s}' FILE; a CSV column: awk -F, 'NR>1 {s+=$3} END {print s}' \
             FILE), sorting (sort FILE), upper case (tr a-z A-Z < IN > OUT), joining files \
             (cat A B > OUT), removing repeated lines in order (awk '!seen[$0]++' FILE > \
             tmp && mv tmp FILE), adding a line at the end (echo 'TEXT' >> FILE), \
             renaming or moving (mv OLD NEW), moving or copying files into a new directory \
             (mkdir -p DIR && mv *.log DIR/, or cp FILE DIR/), deleting (rm FILE), making \
             directories (mkdir -p DIR) and empty files (touch FILE).",
            object(
                json!({"command": string("The command line, e.g. `wc -l < data.csv`.")}),
                &["command"],
            ),
        ),
        "read_file" => (
            "Show the text of one file. For line N alone, use shell: sed -n 'Np' FILE.",
            object(
                json!({"path": string("The file, e.g. `notes.txt`.")}),
                &["path"],
            ),
        ),
        "write_file" => (
            "Create a file, or replace all of its text, with the given content. To add to \
             a file without losing its text, use shell with >> instead.",
            object(
                json!({"path": string("The file to write."),
                       "content": string("The complete new text of the file.")}),
                &["path", "content"],
            ),
        ),
        "edit_file" => (
            "Replace exact text inside one file. Not for renaming, moving or copying files: \
             use shell with mv or cp for that.",
            object(
                json!({"path": string("The file to change."),
                       "old_string": string("The exact text to replace, as the file has it."),
                       "new_string": string("The text to put in its place."),
                       "replace_all": {"type": "boolean",
                                       "description": "true to replace every occurrence."}}),
                &["path", "old_string", "new_string"],
            ),
        ),
        _ => return None,
    })
}

/// The compact system prompt: where the agent works, how to work, and three worked examples
/// of a call followed by an answer taken from its result.
pub(crate) fn system_prompt(workspace: &Path, tool_names: &[String]) -> String {
    format!(
        "You are a reef agent. You work in the directory {workspace}; use paths relative to it.\n\
         Tools: {tools}.\n\
         Do every task by calling tools, one step at a time. Never guess what a file holds or \
         what a command prints: call a tool, read its result, then answer from that result. \
         To answer about what a file contains, read it or search it first (cat FILE, grep). \
         Use shell for counting, searching, computing, renaming, moving, copying and deleting. \
         When the task is done, reply with one short sentence that states the result.\n\n\
         Example:\n\
         user: How many lines does notes.txt have?\n\
         assistant: <tool_call>\n{{\"name\": \"shell\", \"arguments\": {{\"command\": \"wc -l notes.txt\"}}}}\n</tool_call>\n\
         tool: exit_code: 0 stdout: 12 notes.txt\n\
         assistant: notes.txt has 12 lines.\n\n\
         Example:\n\
         user: Which file mentions the word invoice?\n\
         assistant: <tool_call>\n{{\"name\": \"shell\", \"arguments\": {{\"command\": \"grep -l invoice *\"}}}}\n</tool_call>\n\
         tool: exit_code: 0 stdout: b.txt\n\
         assistant: b.txt mentions invoice.\n\n\
         Example:\n\
         user: Rename a.txt to b.txt.\n\
         assistant: <tool_call>\n{{\"name\": \"shell\", \"arguments\": {{\"command\": \"mv a.txt b.txt\"}}}}\n</tool_call>\n\
         tool: exit_code: 0\n\
         assistant: Renamed a.txt to b.txt.",
        workspace = workspace.display(),
        tools = tool_names.join(", "),
    )
}

/// A short hint added to a failed call's result, naming the likely right tool.
pub(crate) fn error_hint(tool: &str, error: &str) -> &'static str {
    let error = error.to_ascii_lowercase();
    match tool {
        "edit_file" if error.contains("occurs") => {
            "Hint: to replace every occurrence, call edit_file again with replace_all: true."
        }
        "edit_file" => {
            "Hint: edit_file only replaces text inside a file; read the file first and copy \
             the exact text. To rename, move, copy or delete a file, use shell with mv, cp or rm."
        }
        "read_file" if error.contains("directory") => {
            "Hint: that is a directory; list it with shell: ls DIR"
        }
        "read_file" | "write_file" if error.contains("not found") || error.contains("no such") => {
            "Hint: list the files first with shell: ls"
        }
        "write_file" => "Hint: write_file needs a path and the complete content.",
        "shell" => "Hint: try a simpler command; the workspace is the current directory.",
        _ => "Hint: check the arguments, or do it with shell instead.",
    }
}

/// Characters of a failed call's result quoted when its answer is sent back.
const ERROR_QUOTE_CHARS: usize = 200;

/// What one turn has shown the model so far, for [`review`].
#[derive(Clone, Debug, Default)]
pub(crate) struct Evidence {
    /// Tool calls made in the turn.
    pub calls: u32,
    /// Every tool result of the turn, in order.
    pub results: Vec<String>,
    /// Whether the last call of the turn failed (an error, or a command that exited non-zero).
    pub last_failed: bool,
    /// The start of the last failed call's result.
    pub last_error: String,
}

impl Evidence {
    pub(crate) fn record(&mut self, tool: &str, content: &str, is_error: bool) {
        self.calls += 1;
        self.last_failed = is_error || (tool == "shell" && exited_non_zero(content));
        if self.last_failed {
            let flat = content.split_whitespace().collect::<Vec<_>>().join(" ");
            self.last_error = flat.chars().take(ERROR_QUOTE_CHARS).collect();
        }
        self.results.push(content.to_owned());
    }
}

fn exited_non_zero(output: &str) -> bool {
    output
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("exit_code: "))
        .is_some_and(|code| code.trim() != "0")
}

/// Why an answer is sent back: each at most once per turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Nudge {
    /// The question is about the workspace and no tool was called.
    Unlooked,
    /// The last call failed and the answer came anyway.
    AfterFailure,
    /// The question asks for a number or a name the answer gives but no result shows.
    Unsupported,
    /// The task names a file to create or write and it does not exist.
    Missing,
    /// The answer describes a command (in backticks) instead of running it.
    Described,
    /// The question asks for yes or no and the answer says neither.
    YesNo,
}

impl Nudge {
    /// The message sent back (as a user message marked as reef's).
    pub(crate) fn message(self, detail: &str) -> String {
        match self {
            Nudge::Unlooked => "[reef] You answered without looking. Call a tool first to \
                 check (for example shell with cat FILE, grep WORD FILE or wc -l FILE), then \
                 answer from its result."
                .to_owned(),
            Nudge::YesNo => "[reef] The question asks for yes or no: answer with yes or no, \
                 as the tool results show."
                .to_owned(),
            Nudge::Described => format!(
                "[reef] You described a command instead of running it. Run it now: call \
                 shell with {}, then answer from its result.",
                json!({ "command": detail })
            ),
            Nudge::AfterFailure => format!(
                "[reef] Your last call failed, so the task is not done yet. Fix it with \
                 another call (see the hint in the result), then answer.{detail}"
            ),
            Nudge::Unsupported => format!(
                "[reef] {detail} Do not work it out in your head: run a command that prints \
                 it (for example cat FILE, grep, wc or awk), then answer with exactly what \
                 the result shows."
            ),
            Nudge::Missing => format!(
                "[reef] The task is not done: {detail} does not exist yet. Create it with a \
                 call, then answer."
            ),
        }
    }

    /// Whether the request after this nudge must call a tool (all but the yes-or-no one ask
    /// for a call).
    pub(crate) fn requires_call(self) -> bool {
        self != Nudge::YesNo
    }
}

/// The nudge `answer` to `input` earns given what the turn has shown, if any (those in
/// `given` are not repeated), with its detail text.
pub(crate) fn review(
    input: &str,
    answer: &str,
    evidence: &Evidence,
    given: &[Nudge],
    workspace: &Path,
) -> Option<(Nudge, String)> {
    let fresh = |n: Nudge| !given.contains(&n);
    if fresh(Nudge::Described)
        && let Some(command) = described_command(answer)
    {
        return Some((Nudge::Described, command));
    }
    if evidence.calls == 0 {
        return (fresh(Nudge::Unlooked) && about_workspace(input))
            .then(|| (Nudge::Unlooked, String::new()));
    }
    if evidence.last_failed && fresh(Nudge::AfterFailure) {
        return Some((
            Nudge::AfterFailure,
            format!(" It said: {}", evidence.last_error),
        ));
    }
    if fresh(Nudge::Missing)
        && let Some(path) = outputs(input).into_iter().find(|p| absent(workspace, p))
    {
        return Some((Nudge::Missing, path));
    }
    if fresh(Nudge::YesNo)
        && asks_yes_or_no(input)
        && !words(answer).any(|w| matches!(w.to_ascii_lowercase().as_str(), "yes" | "no"))
    {
        return Some((Nudge::YesNo, String::new()));
    }
    if !fresh(Nudge::Unsupported) {
        return None;
    }
    let shown = |word: &str| {
        evidence.results.iter().any(|r| contains_word(r, word)) || contains_word(input, word)
    };
    if asks_for_number(input) {
        let seen: Vec<String> = evidence
            .results
            .iter()
            .map(String::as_str)
            .chain([input])
            .flat_map(numbers)
            .collect();
        let shown = |n: &String| seen.contains(n);
        let numbers = numbers(answer);
        if numbers.is_empty() {
            return Some((
                Nudge::Unsupported,
                "The question asks for a number and your answer gives none.".to_owned(),
            ));
        }
        if let Some(n) = numbers.iter().find(|n| !shown(n)) {
            return Some((
                Nudge::Unsupported,
                format!("No tool result shows the number {n} of your answer."),
            ));
        }
    }
    if asks_for_name(input) {
        let names = file_names(answer);
        if !names.is_empty() && !names.iter().any(|n| shown(n)) {
            return Some((
                Nudge::Unsupported,
                format!(
                    "No tool result shows the name {} of your answer.",
                    names.join(", ")
                ),
            ));
        }
    }
    None
}

/// Whether `input` is about the workspace or the machine: it names a file (`data.csv`,
/// `src/app`) or speaks of files, directories, lines, the disk, memory, processes or what is
/// installed.
pub(crate) fn about_workspace(input: &str) -> bool {
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
fn outputs(input: &str) -> Vec<String> {
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
fn described_command(text: &str) -> Option<String> {
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

/// Whether `given` is certainly not in the workspace: looked up beneath it without following
/// a link (the workspace is the agent's; a link could point anywhere). A path that cannot be
/// looked up safely counts as present, so it never earns a note.
fn absent(workspace: &Path, given: &str) -> bool {
    let Ok(ws) = Workspace::open(workspace) else {
        return false;
    };
    matches!(
        ws.resolve(given).and_then(|rel| ws.metadata(&rel)),
        Err(WorkspaceError::NotFound { .. })
    )
}

fn asks_yes_or_no(input: &str) -> bool {
    mentions_any(input, &["yes or no"])
}

fn asks_for_number(input: &str) -> bool {
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

fn asks_for_name(input: &str) -> bool {
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

/// Whether `input` contains one of the lowercase `phrases`, in any case.
fn mentions_any(input: &str, phrases: &[&str]) -> bool {
    let lower = input.to_ascii_lowercase();
    phrases.iter().any(|p| lower.contains(p))
}

/// Words: runs of letters, digits and `._-/`, with trailing dots and dashes removed.
fn words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !(c.is_alphanumeric() || matches!(c, '.' | '_' | '-' | '/')))
        .map(|w| w.trim_end_matches(['.', '-']))
        .filter(|w| !w.is_empty())
}

/// Whether `word` occurs in `text` as a whole word.
fn contains_word(text: &str, word: &str) -> bool {
    words(text).any(|w| w == word || w.trim_start_matches("./") == word)
}

/// The integers and decimals in `text`: thousands separators removed (`1,234`), a unit or
/// ordinal suffix dropped (`5.4G`, `80%`, `3rd`).
fn numbers(text: &str) -> Vec<String> {
    words(&without_thousands_separators(text))
        .map(|w| {
            w.trim_start_matches('-')
                .trim_end_matches(|c: char| c.is_ascii_alphabetic())
                .trim_end_matches('.')
        })
        .filter(|w| {
            !w.is_empty()
                && w.chars().all(|c| c.is_ascii_digit() || c == '.')
                && w.chars().next().is_some_and(|c| c.is_ascii_digit())
        })
        .map(str::to_owned)
        .collect()
}

/// `text` without the commas that separate thousands (a comma between a digit and exactly
/// three more), so `41,200` is one number while `1,apple,3` stays three fields.
fn without_thousands_separators(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let digit = |i: usize| chars.get(i).is_some_and(char::is_ascii_digit);
    chars
        .iter()
        .enumerate()
        .filter(|&(i, &c)| {
            !(c == ',' && i > 0 && digit(i - 1) && (1..=3).all(|k| digit(i + k)) && !digit(i + 4))
        })
        .map(|(_, &c)| c)
        .collect()
}

/// Words that look like file names: a stem and an extension of letters and digits
/// (`data.csv`, `logs/a.log`), not numbers (`3.14`).
fn file_names(text: &str) -> Vec<String> {
    words(text)
        .filter(|w| {
            let Some((stem, ext)) = w.rsplit_once('.') else {
                return false;
            };
            !stem.is_empty()
                && !stem.ends_with('/')
                && (1..=8).contains(&ext.len())
                && ext.chars().all(|c| c.is_ascii_alphanumeric())
                && ext.chars().any(|c| c.is_ascii_alphabetic())
        })
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ws() -> std::path::PathBuf {
        std::path::PathBuf::from("/nonexistent/reef-small-tests")
    }

    fn evidence(results: &[&str]) -> Evidence {
        let mut e = Evidence::default();
        for r in results {
            e.record("shell", r, false);
        }
        e
    }

    #[test]
    fn an_answer_about_files_without_a_call_is_sent_back_once() {
        let none = Evidence::default();
        let q = "How many lines does data.csv have?";
        assert_eq!(
            review(q, "10", &none, &[], &ws()).map(|n| n.0),
            Some(Nudge::Unlooked)
        );
        assert_eq!(review(q, "10", &none, &[Nudge::Unlooked], &ws()), None);
        // Not about the workspace: answered as it is.
        assert_eq!(review("What is 2+2?", "4", &none, &[], &ws()), None);
        assert!(about_workspace(
            "Create the directories src/app and src/lib"
        ));
        assert!(!about_workspace("Say hello in French."));
        assert!(about_workspace("How much free disk space is there?"));
    }

    #[test]
    fn a_failed_last_call_or_non_zero_exit_sends_the_answer_back() {
        let mut e = Evidence::default();
        e.record("edit_file", "old_string not found", true);
        assert_eq!(
            review("Rename notes.md to todo.md.", "Done.", &e, &[], &ws()).map(|n| n.0),
            Some(Nudge::AfterFailure)
        );
        let mut e = Evidence::default();
        e.record(
            "shell",
            "exit_code: 1\nstdout: (empty)\nstderr:\nmv: cannot stat",
            false,
        );
        assert!(e.last_failed);
        e.record("shell", "exit_code: 0\nstdout: (empty)", false);
        assert!(!e.last_failed, "a later success clears it");
    }

    #[test]
    fn numbers_and_names_must_appear_in_a_result() {
        let e = evidence(&["exit_code: 0\nstdout:\n13 data.csv\n"]);
        let q = "How many lines does data.csv have?";
        assert_eq!(review(q, "data.csv has 13 lines.", &e, &[], &ws()), None);
        let (nudge, detail) = review(q, "It has 10 lines.", &e, &[], &ws()).unwrap();
        assert_eq!(nudge, Nudge::Unsupported);
        assert!(detail.contains("10"), "{detail}");
        assert!(review(q, "It has many lines.", &e, &[], &ws()).is_some());
        assert_eq!(
            review(q, "It has 10 lines.", &e, &[Nudge::Unsupported], &ws()),
            None
        );
        // A number given in the question counts as shown.
        let q = "How many of the 3 files are empty?";
        assert_eq!(review(q, "3 of them.", &e, &[], &ws()), None);

        let e = evidence(&["exit_code: 0\nstdout:\nc.txt\n"]);
        let q = "Which file mentions the word 'penguin'?";
        assert_eq!(review(q, "c.txt mentions it.", &e, &[], &ws()), None);
        assert_eq!(
            review(q, "b.txt mentions it.", &e, &[], &ws()).map(|n| n.0),
            Some(Nudge::Unsupported)
        );
    }

    #[test]
    fn a_file_the_task_asks_for_must_exist() {
        let dir = tempfile::tempdir().unwrap();
        let e = evidence(&["exit_code: 0\nstdout:\n7 words.txt\n"]);
        let q = "Count the lines of words.txt and write that number to count.txt.";
        assert_eq!(
            review(q, "It has 7 lines.", &e, &[], dir.path()),
            Some((Nudge::Missing, "count.txt".to_owned()))
        );
        std::fs::write(dir.path().join("count.txt"), "7").unwrap();
        assert_eq!(review(q, "Done.", &e, &[], dir.path()), None);
        // Not looked up through a link the agent planted.
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("out")).unwrap();
        let q = "Write the count to out/count.txt.";
        // Positive control: through the link the file is missing, which would earn a note.
        assert!(dir.path().join("out/count.txt").symlink_metadata().is_err());
        assert!(!absent(dir.path(), "out/count.txt"));
        assert_eq!(review(q, "Done.", &e, &[], dir.path()), None);
        assert_eq!(outputs("Rename notes.md to todo.md."), ["todo.md"]);
        assert!(outputs("Copy ../x.txt to /etc/y.txt").is_empty());
    }

    #[test]
    fn the_small_tool_set_is_rewritten_and_narrowed() {
        let spec = |name: &str| ToolSpec {
            name: name.into(),
            description: "long".into(),
            parameters: json!({"type": "object", "properties": {"cwd": {"type": "string"}}}),
        };
        let specs = tool_specs(vec![
            spec("edit_file"),
            spec("list_dir"),
            spec("message_agent"),
            spec("session_search"),
            spec("shell"),
        ]);
        let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["edit_file", "message_agent", "shell"]);
        assert!(specs[0].description.contains("mv or cp"));
        assert_eq!(specs[1].description, "long", "other tools keep theirs");
        assert!(specs[2].parameters["properties"].get("cwd").is_none());
        assert_eq!(specs[2].parameters["required"], json!(["command"]));
    }

    #[test]
    fn a_described_command_is_sent_back_to_be_run() {
        let answer = "To find the sum, you can use the shell command `awk '{s+=$1} END \
                      {print s}' numbers.txt`.";
        let (nudge, command) = review(
            "What is the sum of numbers.txt?",
            answer,
            &Evidence::default(),
            &[],
            &ws(),
        )
        .unwrap();
        assert_eq!(nudge, Nudge::Described);
        assert_eq!(command, "awk '{s+=$1} END {print s}' numbers.txt");
        assert!(
            nudge
                .message(&command)
                .contains(r#"{"command":"awk '{s+=$1}"#)
        );
        assert_eq!(described_command("Use `ls` or `the file`."), None);
        assert_eq!(outputs("Delete the file old.log."), Vec::<String>::new());
        assert_eq!(
            outputs("Create an empty file src/main.rs."),
            ["src/main.rs"]
        );
        let e = evidence(&["exit_code: 0\nstdout:\nweb-1\n"]);
        let q = "Does hosts.txt contain db-7? Answer yes or no.";
        assert_eq!(
            review(q, "web-1", &e, &[], &ws()).map(|n| n.0),
            Some(Nudge::YesNo)
        );
        assert!(!Nudge::YesNo.requires_call());
        assert_eq!(review(q, "No.", &e, &[], &ws()), None);
    }

    #[test]
    fn words_numbers_and_names() {
        assert_eq!(numbers("It is 1,234 and -5, not v2."), ["1234", "5"]);
        assert_eq!(numbers("5.4G free, 95% used, the 3rd."), ["5.4", "95", "3"]);
        assert_eq!(numbers("1,apple,3"), ["1", "3"]);
        assert_eq!(
            file_names("Move logs/a.log and b.txt, not 3.14 or end."),
            ["logs/a.log", "b.txt"]
        );
        assert!(contains_word("stdout:\n./c.txt\n", "c.txt"));
        assert!(!contains_word("abc.txt", "c.txt"));
    }
}
