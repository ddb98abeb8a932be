//! Small helpers shared by the wire formats: JSON field access and tool-call assembly.

use reef_core::{ToolCall, ToolCallId};
use serde_json::Value;

/// A non-negative integer at a JSON pointer, or 0.
pub(crate) fn u64_at(v: &Value, pointer: &str) -> u64 {
    v.pointer(pointer).and_then(Value::as_u64).unwrap_or(0)
}

/// A string at a JSON pointer, if present.
pub(crate) fn str_at<'a>(v: &'a Value, pointer: &str) -> Option<&'a str> {
    v.pointer(pointer).and_then(Value::as_str)
}

/// A tool call; empty arguments mean "no arguments" and become `{}`, other text is verbatim.
/// A missing id (some local servers omit it) gets a fresh one.
pub(crate) fn tool_call(id: &str, name: &str, arguments: String) -> ToolCall {
    let arguments = if arguments.trim().is_empty() {
        "{}".to_owned()
    } else {
        arguments
    };
    let id = if id.is_empty() {
        ToolCallId::new()
    } else {
        ToolCallId::from(id)
    };
    ToolCall {
        id,
        name: name.to_owned(),
        arguments,
    }
}

/// Sets `body[key]` to `value` when there is one (an unset option is left to the provider).
pub(crate) fn set_some<T: serde::Serialize>(body: &mut Value, key: &str, value: Option<T>) {
    if let Some(value) = value {
        body[key] = serde_json::json!(value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tool_calls_normalise_empty_arguments_and_ids() {
        let c = tool_call("", "ls", "  ".into());
        assert_eq!(c.arguments, "{}");
        assert!(c.id.as_str().starts_with("call_"));
        assert_eq!(tool_call("x", "ls", "{bad".into()).arguments, "{bad");
        assert_eq!(u64_at(&json!({"a": {"b": 3}}), "/a/b"), 3);
        assert_eq!(str_at(&json!({"a": "s"}), "/a"), Some("s"));
    }
}
