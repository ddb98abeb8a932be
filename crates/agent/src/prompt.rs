//! The default system prompt: who the agent is, where it works and how to use tools (the
//! small profile's own lives in `small`), and the notes section from `MEMORY.md`.

use reef_workspace::{Workspace, WorkspaceError};
use std::path::Path;

/// Builds the system prompt for a session in `workspace` (config may supply its own), with
/// the agent's persona first.
pub(crate) fn system_prompt(
    persona: Option<&str>,
    custom: Option<&str>,
    workspace: &Path,
    tool_names: &[String],
    small: bool,
) -> String {
    let base = match custom {
        None if small => crate::small::system_prompt(workspace, tool_names),
        _ => base_prompt(custom, workspace, tool_names),
    };
    // Whatever the prompt, fenced content is data.
    let base = format!("{base}\n\n{}", reef_security::safety::FENCE_RULE);
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

/// Whether the workspace has an entry named `MEMORY.md` (of any kind; [`notes`] says what is
/// wrong with one that is not a regular file).
pub(crate) fn has_notes(workspace: &Path) -> bool {
    workspace.join(NOTES_FILE).symlink_metadata().is_ok()
}

/// `MEMORY.md` larger than this is not read at all.
const NOTES_MAX_BYTES: u64 = 1024 * 1024;

/// The notes section of the system prompt: `MEMORY.md` from the workspace, at most `cap`
/// characters of it, with a request to compact the file when it is longer. None when `cap`
/// is 0. The file is the agent's to write, so it is read only as a regular file reached
/// without a link (see [`read_notes`]).
pub(crate) fn notes(workspace: &Path, cap: usize) -> Option<String> {
    if cap == 0 {
        return None;
    }
    let text = match read_notes(workspace, cap) {
        Ok(text) => text,
        Err(why) => {
            let mut section = format!(
                "## Notes\nYou have no {NOTES_FILE} yet. Keep facts worth remembering across \
                 sessions in {NOTES_FILE} in your workspace (at most {cap} characters); it is \
                 shown here at the start of every session."
            );
            if let Some(why) = why {
                section.push('\n');
                section.push_str(&why);
            }
            return Some(section);
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

/// The text of `MEMORY.md`, opened beneath the workspace without following a link (a link
/// could hand any host file to the model) and only if it is a regular file; otherwise why it
/// is treated as absent (`None` when it simply does not exist).
fn read_notes(workspace: &Path, cap: usize) -> Result<String, Option<String>> {
    let read = || -> Result<Vec<u8>, WorkspaceError> {
        let ws = Workspace::open(workspace)?;
        let rel = ws.resolve(NOTES_FILE)?;
        ws.read(&rel, NOTES_MAX_BYTES)
    };
    let not_read = |why: &str| Some(format!("Your {NOTES_FILE} was not read because {why}."));
    match read() {
        Ok(bytes) => String::from_utf8(bytes)
            .map_err(|_| not_read("it is not valid UTF-8 text; rewrite it as plain text")),
        Err(WorkspaceError::NotFound { .. }) => Err(None),
        Err(WorkspaceError::Symlink { .. }) => Err(not_read(
            "it is a symbolic link; notes are read only from a regular file in your \
             workspace, so replace the link with a regular file",
        )),
        Err(WorkspaceError::NotRegular { .. } | WorkspaceError::IsDirectory { .. }) => Err(
            not_read("it is not a regular file; replace it with a regular file"),
        ),
        Err(WorkspaceError::TooLarge { size, .. }) => Err(not_read(&format!(
            "it is {size} bytes, too large to read; rewrite it to under {cap} characters"
        ))),
        Err(other) => Err(not_read(&format!("it could not be read ({other})"))),
    }
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

    #[test]
    fn a_linked_or_special_memory_md_is_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let workspace = dir.path().join("ws");
        std::fs::create_dir(&workspace).unwrap();
        std::fs::write(dir.path().join("api-token"), "sk-very-secret").unwrap();
        std::os::unix::fs::symlink("../api-token", workspace.join(NOTES_FILE)).unwrap();
        // Positive control: the link leads to the secret.
        let through = std::fs::read_to_string(workspace.join(NOTES_FILE)).unwrap();
        assert_eq!(through, "sk-very-secret");
        let section = notes(&workspace, 100).unwrap();
        assert!(!section.contains("sk-very-secret"), "{section}");
        assert!(section.contains("no MEMORY.md yet"), "{section}");
        assert!(
            section.contains("was not read because it is a symbolic link"),
            "{section}"
        );

        std::fs::remove_file(workspace.join(NOTES_FILE)).unwrap();
        std::fs::create_dir(workspace.join(NOTES_FILE)).unwrap();
        let section = notes(&workspace, 100).unwrap();
        assert!(section.contains("it is not a regular file"), "{section}");
    }
}
