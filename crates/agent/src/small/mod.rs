//! The profile for small models (`agent.profile = "small"`, the default for a model run
//! in-process): a compact system prompt with worked examples, the few tools such a model needs
//! described for it, a hint after a failed call naming the likely right tool, writes refused
//! once when they would be blind ([`guard`]), and the review that sends an answer back once per
//! reason when the turn does not support it ([`review`]).

use reef_core::ToolSpec;
use serde_json::json;
use std::path::Path;

mod evidence;
mod guard;
mod lookup;
mod question;
mod review;
mod text;

pub(crate) use evidence::Evidence;
pub(crate) use guard::{Refusal, guard};
pub(crate) use lookup::Files;
pub(crate) use review::{Nudge, review};

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
pub(crate) fn tool_specs(specs: Vec<ToolSpec>, programs: Programs) -> Vec<ToolSpec> {
    specs
        .into_iter()
        .filter(|s| !LEFT_OUT.contains(&s.name.as_str()))
        .map(|s| match rewrite(&s.name) {
            Some((description, parameters)) => {
                let mut description = description.to_owned();
                if s.name == "shell" && programs.jq {
                    description.push_str(JQ_RECIPES);
                }
                ToolSpec {
                    name: s.name,
                    description,
                    parameters,
                }
            }
            None => s,
        })
        .collect()
}

/// The optional programs a recipe may name, found once per session. The sandbox passes `PATH`
/// through, so a program in one of its directories is one a command can run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Programs {
    /// `jq`, for values and list lengths in JSON files.
    pub jq: bool,
}

impl Programs {
    pub(crate) fn on_path() -> Self {
        let path = std::env::var_os("PATH").unwrap_or_default();
        // Only absolute directories: a relative one would be looked up from reef's own
        // current directory, which may be the workspace.
        let found = |program: &str| {
            std::env::split_paths(&path)
                .filter(|dir| dir.is_absolute())
                .any(|dir| {
                    use std::os::unix::fs::PermissionsExt;
                    std::fs::metadata(dir.join(program))
                        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
                })
        };
        Self { jq: found("jq") }
    }
}

/// Added to `shell`'s recipes where `jq` is installed.
const JQ_RECIPES: &str = " JSON files: a value (jq .KEY FILE, nested: jq .A.B FILE), the \
     length of a list (jq '.KEY | length' FILE).";

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
        "shell" if error.contains("no such file") || error.contains("cannot stat") => {
            "Hint: a name in the command is not a file here. List the files with ls, or find \
             the file that mentions a word with grep -l WORD *, then use the name it prints."
        }
        "shell" => "Hint: try a simpler command; the workspace is the current directory.",
        _ => "Hint: check the arguments, or do it with shell instead.",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_naming_a_missing_file_is_pointed_at_ls_and_grep() {
        let hint = error_hint(
            "shell",
            "exit_code: 1\nstdout: (empty)\nstderr:\nmv: cannot stat 'TODO': No such file or directory\n",
        );
        assert!(hint.contains("grep -l WORD *"), "{hint}");
        assert!(error_hint("shell", "exit_code: 2\nstderr:\nsyntax error").contains("simpler"));
    }

    #[test]
    fn the_small_tool_set_is_rewritten_and_narrowed() {
        let spec = |name: &str| ToolSpec {
            name: name.into(),
            description: "long".into(),
            parameters: json!({"type": "object", "properties": {"cwd": {"type": "string"}}}),
        };
        let all = || {
            vec![
                spec("edit_file"),
                spec("list_dir"),
                spec("message_agent"),
                spec("session_search"),
                spec("shell"),
            ]
        };
        let specs = tool_specs(all(), Programs::default());
        let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["edit_file", "message_agent", "shell"]);
        assert!(specs[0].description.contains("mv or cp"));
        assert_eq!(specs[1].description, "long", "other tools keep theirs");
        assert!(specs[2].parameters["properties"].get("cwd").is_none());
        assert_eq!(specs[2].parameters["required"], json!(["command"]));
        assert!(!specs[2].description.contains("jq"));
        let with_jq = tool_specs(all(), Programs { jq: true });
        assert!(with_jq[2].description.ends_with(JQ_RECIPES));
    }
}
