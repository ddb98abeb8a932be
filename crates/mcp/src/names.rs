//! The names and schemas a server's tools are offered under: `SERVER__TOOL`, made of the
//! characters model APIs accept, unique (deterministically), with schemas that are JSON
//! Schema objects of bounded size, and at most a configured number of tools per server.

use crate::types::ToolInfo;
use serde_json::{Map, Value};
use std::collections::BTreeSet;

/// The longest tool name model APIs accept.
pub const MAX_TOOL_NAME: usize = 64;
/// The largest input schema offered to a model, serialized; larger ones are skipped.
pub const MAX_SCHEMA_BYTES: usize = 64 * 1024;
/// A description is cut to this many characters.
pub const MAX_DESCRIPTION: usize = 2048;

/// A tool of a server, under the name an agent calls it by.
#[derive(Clone, Debug, PartialEq)]
pub struct Offered {
    /// `SERVER__TOOL`, as the model sees it.
    pub public: String,
    /// The tool as the server described it, its schema checked.
    pub tool: ToolInfo,
}

/// A server's tools as offered to agents, and what was left out or renamed.
#[derive(Clone, Debug, Default)]
pub struct ToolList {
    pub tools: Vec<Offered>,
    pub warnings: Vec<String>,
}

/// The most warnings kept for one listing; the rest are counted.
const MAX_WARNINGS: usize = 20;

/// The tools of `server` an agent is offered, and a warning for each tool left out or
/// renamed. Tools are taken in the server's order, at most `max` of them; `listed` is how
/// many the server listed in all.
pub fn offer(
    server: &str,
    tools: Vec<ToolInfo>,
    listed: usize,
    max: usize,
) -> (Vec<Offered>, Vec<String>) {
    let mut warnings = Vec::new();
    let mut taken: BTreeSet<String> = BTreeSet::new();
    let mut offered = Vec::new();
    if listed > max {
        warnings.push(format!(
            "server `{server}` offers {listed} tools; only the first {max} are used \
             (mcp.max_tools_per_server)"
        ));
    }
    for mut tool in tools.into_iter().take(max) {
        if tool.name.is_empty() {
            warnings.push(format!(
                "server `{server}` offers a tool without a name; it is left out"
            ));
            continue;
        }
        if let Err(why) = check_schema(&mut tool.input_schema) {
            warnings.push(format!(
                "tool `{}` of server `{server}` is left out: its input schema {why}",
                shown(&tool.name)
            ));
            continue;
        }
        if let Some(d) = &mut tool.description
            && d.chars().count() > MAX_DESCRIPTION
        {
            *d = d.chars().take(MAX_DESCRIPTION).collect::<String>() + "…";
        }
        let base = public_name(server, &tool.name);
        let public = unique(&base, &taken);
        if public != base || sanitize(&tool.name) != tool.name {
            warnings.push(format!(
                "tool `{}` of server `{server}` is offered as `{public}`",
                shown(&tool.name)
            ));
        }
        taken.insert(public.clone());
        offered.push(Offered { public, tool });
    }
    if warnings.len() > MAX_WARNINGS {
        let more = warnings.len() - MAX_WARNINGS;
        warnings.truncate(MAX_WARNINGS);
        warnings.push(format!(
            "… and {more} more warnings about server `{server}`"
        ));
    }
    (offered, warnings)
}

/// A server's tool name as shown in a warning: at most 80 characters, control characters
/// escaped.
fn shown(name: &str) -> String {
    let cut: String = name.chars().take(80).collect();
    cut.escape_default().to_string()
}

/// `SERVER__TOOL` with every character models refuse replaced by `_`, cut to
/// [`MAX_TOOL_NAME`].
pub fn public_name(server: &str, tool: &str) -> String {
    let mut name = format!("{}__{}", sanitize(server), sanitize(tool));
    name.truncate(MAX_TOOL_NAME);
    name
}

fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// `base`, or `base_2`, `base_3`… (cut to fit) when taken.
pub(crate) fn unique(base: &str, taken: &BTreeSet<String>) -> String {
    if !taken.contains(base) {
        return base.to_owned();
    }
    (2..)
        .map(|n| {
            let suffix = format!("_{n}");
            let mut stem = base.to_owned();
            stem.truncate(MAX_TOOL_NAME - suffix.len());
            stem + &suffix
        })
        .find(|candidate| !taken.contains(candidate))
        .unwrap_or_else(|| base.to_owned())
}

/// Accepts a JSON Schema object for arguments (an absent `type` is taken as `object`),
/// within [`MAX_SCHEMA_BYTES`].
fn check_schema(schema: &mut Map<String, Value>) -> Result<(), String> {
    match schema.get("type") {
        None => {
            schema.insert("type".into(), Value::from("object"));
        }
        Some(Value::String(t)) if t == "object" => {}
        Some(other) => return Err(format!("has type {other}, not \"object\"")),
    }
    if let Some(props) = schema.get("properties")
        && !props.is_object()
    {
        return Err("has `properties` that is not an object".into());
    }
    if let Some(required) = schema.get("required") {
        let strings = required
            .as_array()
            .is_some_and(|r| r.iter().all(Value::is_string));
        if !strings {
            return Err("has `required` that is not a list of names".into());
        }
    }
    let size = serde_json::to_vec(schema)
        .map(|v| v.len())
        .unwrap_or(usize::MAX);
    if size > MAX_SCHEMA_BYTES {
        return Err(format!(
            "is {size} bytes, more than the {MAX_SCHEMA_BYTES} offered to a model"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "test code")]
    use super::*;
    use serde_json::json;

    fn tool(name: &str, schema: Value) -> ToolInfo {
        ToolInfo {
            name: name.into(),
            description: None,
            input_schema: schema.as_object().unwrap().clone(),
        }
    }

    #[test]
    fn names_are_prefixed_sanitized_and_cut() {
        assert_eq!(public_name("fs", "read_file"), "fs__read_file");
        assert_eq!(public_name("fs", "files/read.v2"), "fs__files_read_v2");
        assert_eq!(public_name("s", &"x".repeat(100)).len(), MAX_TOOL_NAME);
    }

    #[test]
    fn colliding_names_get_numbered_suffixes_in_order_and_are_reported() {
        let tools = vec![
            tool("a.b", json!({"type": "object"})),
            tool("a_b", json!({"type": "object"})),
            tool("a/b", json!({})),
        ];
        let (offered, warnings) = offer("s", tools, 3, 10);
        let names: Vec<&str> = offered.iter().map(|o| o.public.as_str()).collect();
        assert_eq!(names, ["s__a_b", "s__a_b_2", "s__a_b_3"]);
        assert_eq!(offered[2].tool.input_schema["type"], "object");
        assert!(
            warnings
                .iter()
                .any(|w| w.contains("`a_b`") && w.contains("s__a_b_2")),
            "{warnings:?}"
        );
    }

    #[test]
    fn bad_schemas_are_skipped_with_a_warning_naming_the_tool() {
        let huge = "x".repeat(MAX_SCHEMA_BYTES);
        let tools = vec![
            tool("arr", json!({"type": "array"})),
            tool("props", json!({"type": "object", "properties": 3})),
            tool("req", json!({"type": "object", "required": [1]})),
            tool("big", json!({"type": "object", "description": huge})),
            tool(
                "ok",
                json!({"type": "object", "properties": {"a": {"type": "string"}}}),
            ),
        ];
        let (offered, warnings) = offer("s", tools, 3, 10);
        assert_eq!(offered.len(), 1);
        assert_eq!(offered[0].public, "s__ok");
        for name in ["arr", "props", "req", "big"] {
            assert!(
                warnings.iter().any(|w| w.contains(&format!("`{name}`"))),
                "{name}: {warnings:?}"
            );
        }
    }

    #[test]
    fn a_server_with_too_many_tools_is_cut_to_the_limit_with_one_warning() {
        let tools = (0..10_000)
            .map(|i| tool(&format!("t{i}"), json!({})))
            .collect();
        let (offered, warnings) = offer("s", tools, 10_000, 128);
        assert_eq!(offered.len(), 128);
        assert_eq!(offered[127].public, "s__t127");
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].contains("10000 tools"), "{warnings:?}");
    }
}
