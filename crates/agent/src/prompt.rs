//! The default system prompt: who the agent is, where it works and how to use tools.

use std::path::Path;

/// Builds the system prompt for a session in `workspace` (config may supply its own), with
/// the agent's persona first.
pub(crate) fn system_prompt(
    persona: Option<&str>,
    custom: Option<&str>,
    workspace: &Path,
    tool_names: &[String],
) -> String {
    let base = base_prompt(custom, workspace, tool_names);
    match persona {
        Some(persona) if !persona.trim().is_empty() => format!("{}\n\n{base}", persona.trim()),
        _ => base,
    }
}

fn base_prompt(custom: Option<&str>, workspace: &Path, tool_names: &[String]) -> String {
    if let Some(custom) = custom {
        return custom.to_owned();
    }
    format!(
        "You are a reef agent: an autonomous assistant that completes tasks by using tools.\n\
         Your workspace is {workspace}; relative paths resolve there and it is where you may write.\n\
         Available tools: {tools}.\n\
         Work step by step: call tools to inspect and change things, check their results, and when \
         the task is done reply with a short final answer and no tool call. Tool errors are \
         reported to you as results; read them and adjust. Large outputs are saved to a file \
         whose path is given; read it in parts with read_file if you need more.",
        workspace = workspace.display(),
        tools = tool_names.join(", "),
    )
}

/// The file in an agent's workspace that holds its notes.
pub const NOTES_FILE: &str = "MEMORY.md";

/// The notes section of the system prompt: `MEMORY.md` from the workspace, at most `cap`
/// characters of it, with a request to compact the file when it is longer. None when `cap`
/// is 0.
pub(crate) fn notes(workspace: &Path, cap: usize) -> Option<String> {
    if cap == 0 {
        return None;
    }
    let text = match std::fs::read_to_string(workspace.join(NOTES_FILE)) {
        Ok(text) => text,
        Err(_) => {
            return Some(format!(
                "## Notes\nYou have no {NOTES_FILE} yet. Keep facts worth remembering across \
                 sessions in {NOTES_FILE} in your workspace (at most {cap} characters); it is \
                 shown here at the start of every session."
            ));
        }
    };
    let total = text.chars().count();
    let mut section = format!(
        "## Notes ({NOTES_FILE})\nYour notes, kept in {NOTES_FILE} in your workspace; edit that \
         file to change what you remember across sessions.\n\n"
    );
    if total <= cap {
        section.push_str(text.trim_end());
        return Some(section);
    }
    section.extend(text.chars().take(cap));
    section.push_str(&format!(
        "\n\n[{NOTES_FILE} is {total} characters, over the limit of {cap}: only the first {cap} \
         are shown. Compact it now: rewrite {NOTES_FILE} to under {cap} characters, merging \
         and dropping what no longer matters, before going on with the task.]"
    ));
    Some(section)
}

#[cfg(test)]
mod tests {
    use super::{NOTES_FILE, notes};

    #[test]
    fn notes_are_capped_and_an_overlong_file_asks_for_compaction() {
        let dir = tempfile::tempdir().unwrap();
        let none = notes(dir.path(), 100).unwrap();
        assert!(none.contains("no MEMORY.md yet"), "{none}");
        assert_eq!(notes(dir.path(), 0), None);

        std::fs::write(dir.path().join(NOTES_FILE), "- deploys on Fridays\n").unwrap();
        let short = notes(dir.path(), 100).unwrap();
        assert!(short.ends_with("- deploys on Fridays"), "{short}");
        assert!(!short.contains("Compact"));

        let long = "é".repeat(150);
        std::fs::write(dir.path().join(NOTES_FILE), &long).unwrap();
        let capped = notes(dir.path(), 100).unwrap();
        assert!(capped.contains(&"é".repeat(100)));
        assert!(
            !capped.contains(&"é".repeat(101)),
            "cut at the cap, on a char boundary"
        );
        assert!(
            capped.contains("is 150 characters, over the limit of 100"),
            "{capped}"
        );
        assert!(capped.contains("Compact it now"));
    }
}
