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
