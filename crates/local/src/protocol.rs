//! reef's tool-call format for local models: `<tool_call>{"name": …, "arguments": {…}}</tool_call>`
//! blocks (the format Qwen and Hermes-style templates teach), how it is described to models whose
//! template has no tool support, and how a generated reply is split into text and calls.

use reef_core::{ToolCall, ToolCallId, ToolSpec};

pub const CALL_OPEN: &str = "<tool_call>";
pub const CALL_CLOSE: &str = "</tool_call>";

/// A tool as chat templates expect it (the OpenAI function shape).
pub fn tool_json(tool: &ToolSpec) -> serde_json::Value {
    serde_json::json!({
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.parameters,
        }
    })
}

/// The system-prompt text that teaches the call format, for templates without tool support.
pub fn instructions(tools: &[ToolSpec]) -> String {
    let mut text = String::from(
        "# Tools\n\nYou may call functions to help with the request. The functions are listed in <tools></tools>:\n<tools>",
    );
    for tool in tools {
        text.push('\n');
        text.push_str(&tool_json(tool).to_string());
    }
    text.push_str(
        "\n</tools>\n\nTo call a function, reply with only:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <arguments-object>}\n</tool_call>\nResults come back in <tool_response></tool_response>. Otherwise answer in plain text.",
    );
    text
}

/// An assistant message's text followed by its calls, for templates without tool support.
pub fn render_calls<'a>(
    content: &str,
    calls: impl Iterator<Item = (&'a str, &'a serde_json::Value)>,
) -> String {
    let mut text = content.to_owned();
    for (name, arguments) in calls {
        if !text.is_empty() {
            text.push('\n');
        }
        let call = serde_json::json!({ "name": name, "arguments": arguments });
        text.push_str(&format!("{CALL_OPEN}\n{call}\n{CALL_CLOSE}"));
    }
    text
}

/// A tool result as user text, for templates without tool support.
pub fn render_result(content: &str) -> String {
    format!("<tool_response>\n{content}\n</tool_response>")
}

/// A generated reply split into its text and its calls. Blocks that are not a JSON object with a
/// string `name` stay in the text, so nothing the model wrote is lost.
pub fn parse_reply(text: &str, mut next_id: impl FnMut() -> ToolCallId) -> (String, Vec<ToolCall>) {
    let mut content = String::new();
    let mut calls = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find(CALL_OPEN) {
        let after = &rest[start + CALL_OPEN.len()..];
        let (body, tail) = match after.find(CALL_CLOSE) {
            Some(end) => (&after[..end], &after[end + CALL_CLOSE.len()..]),
            None => (after, ""),
        };
        match parse_call(body) {
            Some((name, arguments)) => {
                content.push_str(&rest[..start]);
                calls.push(ToolCall {
                    id: next_id(),
                    name,
                    arguments,
                });
            }
            None => content.push_str(&rest[..rest.len() - tail.len()]),
        }
        rest = tail;
    }
    content.push_str(rest);
    (content.trim().to_owned(), calls)
}

fn parse_call(body: &str) -> Option<(String, String)> {
    let value: serde_json::Value = serde_json::from_str(body.trim()).ok()?;
    let name = value.get("name")?.as_str()?.to_owned();
    let arguments = match value.get("arguments") {
        None | Some(serde_json::Value::Null) => "{}".to_owned(),
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    };
    Some((name, arguments))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids() -> impl FnMut() -> ToolCallId {
        let mut n = 0;
        move || {
            n += 1;
            ToolCallId::from(format!("call_{n}").as_str())
        }
    }

    #[test]
    fn splits_text_and_calls() {
        let text = "Checking.\n<tool_call>\n{\"name\": \"shell\", \"arguments\": {\"command\": \"df -h /\"}}\n</tool_call>\n<tool_call>{\"name\":\"read_file\",\"arguments\":{\"path\":\"a\"}}</tool_call>";
        let (content, calls) = parse_reply(text, ids());
        assert_eq!(content, "Checking.");
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[0].name, "shell");
        assert_eq!(calls[0].arguments, r#"{"command":"df -h /"}"#);
        assert_eq!(calls[1].name, "read_file");
        assert_eq!(calls[1].id.to_string(), "call_2");
    }

    #[test]
    fn a_broken_block_stays_text() {
        let text = "<tool_call>{not json}</tool_call> done";
        let (content, calls) = parse_reply(text, ids());
        assert!(calls.is_empty());
        assert_eq!(content, "<tool_call>{not json}</tool_call> done");
    }

    #[test]
    fn an_unclosed_call_at_the_end_still_counts() {
        let (content, calls) = parse_reply("<tool_call>{\"name\": \"list_agents\"}", ids());
        assert_eq!(content, "");
        assert_eq!(calls[0].name, "list_agents");
        assert_eq!(calls[0].arguments, "{}");
    }
}
