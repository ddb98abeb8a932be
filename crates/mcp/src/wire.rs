//! Reading a server's results from their JSON, leniently: an entry reef cannot read is left
//! out (with a warning) instead of failing the whole answer, and unknown fields are ignored.

use crate::types::{
    CallResult, Content, PromptArgument, PromptInfo, PromptMessages, ResourceContents,
    ResourceInfo, ToolInfo,
};
use serde_json::Value;

/// The tools of one `tools/list` page, warnings for entries left out, and the next cursor.
pub(crate) fn tools_page(result: &Value) -> (Vec<ToolInfo>, Vec<String>, Option<String>) {
    let mut tools = Vec::new();
    let mut warnings = Vec::new();
    let entries = result.get("tools").and_then(Value::as_array);
    for (i, entry) in entries.into_iter().flatten().enumerate() {
        let name = entry.get("name").and_then(Value::as_str);
        let schema = entry.get("inputSchema").and_then(Value::as_object);
        match (name, schema) {
            (Some(name), Some(schema)) => tools.push(ToolInfo {
                name: name.to_owned(),
                description: text(entry, "description"),
                input_schema: schema.clone(),
            }),
            (Some(name), None) => {
                warnings.push(format!(
                    "tool `{name}` is left out: it has no inputSchema object"
                ));
            }
            (None, _) => warnings.push(format!("tool #{} is left out: it has no name", i + 1)),
        }
    }
    (tools, warnings, cursor(result))
}

pub(crate) fn resources_page(result: &Value) -> (Vec<ResourceInfo>, Option<String>) {
    let resources = list(result, "resources")
        .filter_map(|r| {
            Some(ResourceInfo {
                uri: text(r, "uri")?,
                name: text(r, "name").unwrap_or_default(),
                description: text(r, "description"),
                mime_type: text(r, "mimeType"),
            })
        })
        .collect();
    (resources, cursor(result))
}

pub(crate) fn prompts_page(result: &Value) -> (Vec<PromptInfo>, Option<String>) {
    let prompts = list(result, "prompts")
        .filter_map(|p| {
            Some(PromptInfo {
                name: text(p, "name")?,
                description: text(p, "description"),
                arguments: list(p, "arguments")
                    .filter_map(|a| {
                        Some(PromptArgument {
                            name: text(a, "name")?,
                            description: text(a, "description"),
                            required: a.get("required").and_then(Value::as_bool).unwrap_or(false),
                        })
                    })
                    .collect(),
            })
        })
        .collect();
    (prompts, cursor(result))
}

pub(crate) fn call_result(result: &Value) -> CallResult {
    CallResult {
        content: list(result, "content").filter_map(content).collect(),
        structured: result
            .get("structuredContent")
            .filter(|v| !v.is_null())
            .cloned(),
        is_error: result
            .get("isError")
            .and_then(Value::as_bool)
            .unwrap_or(false),
    }
}

pub(crate) fn resource_contents(result: &Value) -> Vec<ResourceContents> {
    list(result, "contents").filter_map(contents).collect()
}

pub(crate) fn prompt_messages(result: &Value) -> PromptMessages {
    PromptMessages {
        description: text(result, "description"),
        messages: list(result, "messages")
            .filter_map(|m| Some((text(m, "role")?, content(m.get("content")?)?)))
            .collect(),
    }
}

/// One content block; kinds reef does not know are left out.
fn content(block: &Value) -> Option<Content> {
    match block.get("type")?.as_str()? {
        "text" => Some(Content::Text(text(block, "text")?)),
        "image" | "audio" => Some(Content::Media {
            data: text(block, "data")?,
            mime_type: text(block, "mimeType").unwrap_or_else(|| "application/octet-stream".into()),
        }),
        "resource_link" => Some(Content::Link {
            uri: text(block, "uri")?,
            name: text(block, "name"),
        }),
        "resource" => contents(block.get("resource")?).map(Content::Resource),
        _ => None,
    }
}

fn contents(entry: &Value) -> Option<ResourceContents> {
    let text_value = text(entry, "text");
    let blob = text(entry, "blob");
    if text_value.is_none() && blob.is_none() {
        return None;
    }
    Some(ResourceContents {
        uri: text(entry, "uri").unwrap_or_default(),
        mime_type: text(entry, "mimeType"),
        text: text_value,
        blob,
    })
}

fn list<'a>(value: &'a Value, key: &str) -> impl Iterator<Item = &'a Value> {
    value
        .get(key)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

fn text(value: &Value, key: &str) -> Option<String> {
    value.get(key).and_then(Value::as_str).map(str::to_owned)
}

fn cursor(result: &Value) -> Option<String> {
    text(result, "nextCursor").filter(|c| !c.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_tool_list_keeps_what_it_can_read() {
        let (tools, warnings, next) = tools_page(&json!({
            "tools": [
                {"name": "echo", "description": "Echoes", "inputSchema": {"type": "object"}},
                {"name": "broken", "inputSchema": "nope"},
                {"inputSchema": {}},
            ],
            "nextCursor": "2",
        }));
        assert_eq!(tools.len(), 1);
        assert_eq!(tools[0].name, "echo");
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(warnings[0].contains("`broken`"));
        assert_eq!(next.as_deref(), Some("2"));
    }

    #[test]
    fn call_results_read_every_known_block_and_skip_the_rest() {
        let result = call_result(&json!({
            "content": [
                {"type": "text", "text": "hi"},
                {"type": "image", "data": "AAAA", "mimeType": "image/png"},
                {"type": "hologram", "data": "?"},
                {"type": "resource_link", "uri": "note://a", "name": "a"},
                {"type": "resource", "resource": {"uri": "note://b", "text": "bee"}},
            ],
            "structuredContent": {"result": 5},
            "isError": true,
        }));
        assert_eq!(result.content.len(), 4);
        assert_eq!(result.content[0], Content::Text("hi".into()));
        assert!(
            matches!(&result.content[1], Content::Media { mime_type, .. } if mime_type == "image/png")
        );
        assert_eq!(result.structured, Some(json!({"result": 5})));
        assert!(result.is_error);
    }
}
