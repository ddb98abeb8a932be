//! A lenient parser for tool calls that a model wrote as text instead of native tool calls:
//! `<tool_call>{…}</tool_call>` tags, fenced JSON blocks, and bare `{"name":…,"arguments":…}`.

use reef_core::{ToolCall, ToolCallId};
use serde_json::Value;

/// Extracts tool calls naming a known tool from `text`. Returns the text with the recognised
/// calls removed, and the calls in the order written. Anything not recognised stays as text.
pub fn parse_text_tool_calls(
    text: &str,
    is_known: &dyn Fn(&str) -> bool,
) -> (String, Vec<ToolCall>) {
    let mut spans: Vec<(usize, usize, Vec<ToolCall>)> = Vec::new();
    let fences = fenced(text);
    let json_fences = fences
        .iter()
        .filter(|f| f.is_json)
        .map(|f| (f.start, f.end, f.inner));
    for (start, end, inner) in tagged(text, "<tool_call>", "</tool_call>")
        .into_iter()
        .chain(json_fences)
    {
        if let Some(calls) = calls_from_json(inner, is_known) {
            spans.push((start, end, calls));
        }
    }
    if spans.is_empty() {
        // Code in a fence of another language is an example, not a call.
        let in_fence = |at: usize| fences.iter().any(|f| f.start <= at && at < f.end);
        for (start, end) in bare_objects(text) {
            if in_fence(start) {
                continue;
            }
            if let Some(calls) = calls_from_json(&text[start..end], is_known) {
                spans.push((start, end, calls));
            }
        }
    }
    spans.sort_by_key(|(start, _, _)| *start);
    let mut rest = String::new();
    let mut calls = Vec::new();
    let mut cursor = 0;
    for (start, end, found) in spans {
        if start < cursor {
            continue; // overlapping match (a tag inside a fence): keep the first
        }
        rest.push_str(&text[cursor..start]);
        cursor = end;
        calls.extend(found);
    }
    rest.push_str(&text[cursor..]);
    (rest.trim().to_owned(), calls)
}

/// `(start, end, inner)` of every `open … close` span.
fn tagged<'a>(text: &'a str, open: &str, close: &str) -> Vec<(usize, usize, &'a str)> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(rel) = text[from..].find(open) {
        let start = from + rel;
        let inner_start = start + open.len();
        let Some(rel_end) = text[inner_start..].find(close) else {
            break;
        };
        let inner_end = inner_start + rel_end;
        out.push((
            start,
            inner_end + close.len(),
            &text[inner_start..inner_end],
        ));
        from = inner_end + close.len();
    }
    out
}

/// A fenced code block: its span, its body, and whether it may hold JSON (no language, `json`
/// or `tool_call`).
struct Fence<'a> {
    start: usize,
    end: usize,
    inner: &'a str,
    is_json: bool,
}

/// Every fenced code block in `text`.
fn fenced(text: &str) -> Vec<Fence<'_>> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(rel) = text[from..].find("```") {
        let start = from + rel;
        let after = start + 3;
        let Some(nl) = text[after..].find('\n') else {
            break;
        };
        let lang = text[after..after + nl].trim();
        let body_start = after + nl + 1;
        let Some(rel_end) = text[body_start..].find("```") else {
            break;
        };
        let body_end = body_start + rel_end;
        out.push(Fence {
            start,
            end: body_end + 3,
            inner: &text[body_start..body_end],
            is_json: lang.is_empty() || lang.eq_ignore_ascii_case("json") || lang == "tool_call",
        });
        from = body_end + 3;
    }
    out
}

/// Balanced top-level `{ … }` spans (string-aware), as candidates for bare JSON calls.
fn bare_objects(text: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'{' {
            i += 1;
            continue;
        }
        let mut depth = 0usize;
        let mut in_str = false;
        let mut escaped = false;
        let mut end = None;
        for (j, &b) in bytes.iter().enumerate().skip(i) {
            if in_str {
                match (escaped, b) {
                    (true, _) => escaped = false,
                    (false, b'\\') => escaped = true,
                    (false, b'"') => in_str = false,
                    _ => {}
                }
                continue;
            }
            match b {
                b'"' => in_str = true,
                b'{' => depth += 1,
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = Some(j + 1);
                        break;
                    }
                }
                _ => {}
            }
        }
        match end {
            Some(e) => {
                out.push((i, e));
                i = e;
            }
            None => break,
        }
    }
    out
}

/// Reads one call object or an array of them; `None` unless every entry is a known tool call.
fn calls_from_json(json: &str, is_known: &dyn Fn(&str) -> bool) -> Option<Vec<ToolCall>> {
    let value: Value = serde_json::from_str(json.trim()).ok()?;
    let items = match value {
        Value::Array(items) => items,
        other => vec![other],
    };
    let mut calls = Vec::new();
    for item in items {
        let obj = item.as_object()?;
        // Some models nest the call: {"function": {"name":…, "arguments":…}}.
        let obj = match obj.get("function").and_then(Value::as_object) {
            Some(inner) => inner,
            None => obj,
        };
        let name = obj.get("name")?.as_str()?;
        if !is_known(name) {
            return None;
        }
        let args = obj
            .get("arguments")
            .or_else(|| obj.get("parameters"))
            .or_else(|| obj.get("input"))
            .cloned()
            .unwrap_or(Value::Object(serde_json::Map::new()));
        let arguments = match args {
            Value::String(s) => s,
            other => other.to_string(),
        };
        calls.push(ToolCall {
            id: ToolCallId::new(),
            name: name.to_owned(),
            arguments,
        });
    }
    (!calls.is_empty()).then_some(calls)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn known(name: &str) -> bool {
        matches!(name, "shell" | "read_file")
    }

    #[test]
    fn tags_fences_and_bare_objects() {
        let (rest, calls) = parse_text_tool_calls(
            "Let me look.\n<tool_call>{\"name\": \"shell\", \"arguments\": {\"command\": \"ls\"}}</tool_call>",
            &known,
        );
        assert_eq!(rest, "Let me look.");
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].name, "shell");
        assert_eq!(calls[0].arguments, r#"{"command":"ls"}"#);

        let (_, calls) = parse_text_tool_calls(
            "```json\n[{\"name\":\"read_file\",\"arguments\":{\"path\":\"a\"}},{\"name\":\"shell\",\"parameters\":{\"command\":\"pwd\"}}]\n```",
            &known,
        );
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[1].arguments, r#"{"command":"pwd"}"#);

        let (rest, calls) = parse_text_tool_calls(
            r#"{"name": "shell", "arguments": "{\"command\": \"echo }\"}"}"#,
            &known,
        );
        assert_eq!(rest, "");
        assert_eq!(calls[0].arguments, r#"{"command": "echo }"}"#);
    }

    #[test]
    fn unknown_tools_and_prose_stay_text() {
        let text =
            "Use {\"name\": \"rm_everything\", \"arguments\": {}} or a JSON like {\"a\": 1}.";
        let (rest, calls) = parse_text_tool_calls(text, &known);
        assert!(calls.is_empty());
        assert_eq!(rest, text);
        let (_, calls) = parse_text_tool_calls("```rust\n{\"name\":\"shell\"}\n```", &known);
        assert!(calls.is_empty(), "non-JSON fences are ignored");
        let (_, calls) = parse_text_tool_calls("{ unbalanced", &known);
        assert!(calls.is_empty());
    }
}
