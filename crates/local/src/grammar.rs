//! The GBNF grammar a reply is sampled under when tools are offered: either a plain-text answer
//! or one or more `<tool_call>` blocks whose JSON names an offered tool and carries arguments
//! shaped by that tool's schema (required properties first, in schema order; optional ones may
//! follow). The choice is made at the first character: an answer cannot start like a call, and
//! cannot hold a code fence or a `<tool_call>` tag later either, so a call cannot hide inside
//! prose; a call, once begun, is well-formed. With `ToolChoice::Required` only calls are allowed.

use reef_core::{ToolChoice, ToolSpec};
use serde_json::Value;
use std::fmt::Write as _;

/// JSON primitives shared by every tool grammar.
const JSON_RULES: &str = r#"ws ::= [ \t\n]{0,8}
value ::= object | array | string | number | boolean | "null"
object ::= "{" ws ( string ws ":" ws value ( ws "," ws string ws ":" ws value )* )? ws "}"
array ::= "[" ws ( value ( ws "," ws value )* )? ws "]"
string ::= "\"" ( [^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} ) )* "\""
integer ::= "-"? ( "0" | [1-9] [0-9]{0,17} )
number ::= integer ( "." [0-9]+ )? ( [eE] [-+]? [0-9]+ )?
boolean ::= "true" | "false"
"#;

/// An answer: text that does not start like a call (a tag, a JSON object or a code fence, which
/// small models otherwise use to write calls as text) and never contains a code fence or `<t`
/// (so no `<tool_call>` tag) further on.
const ANSWER_RULES: &str = r#"answer ::= [^<{`] answer-char* ( "`" | "``" | "<" )?
answer-char ::= [^`<] | "`" [^`<] | "``" [^`<] | "<" [^t`<]
"#;

/// The grammar for a reply when `tools` are offered (None when there are none).
pub fn for_tools(tools: &[ToolSpec], choice: ToolChoice, one_call: bool) -> Option<String> {
    if tools.is_empty() {
        return None;
    }
    let mut g = String::new();
    // Calls may be several, separated by whitespace, unless one is asked for.
    match choice {
        ToolChoice::Auto => {
            g.push_str("root ::= answer | calls\n");
            g.push_str(ANSWER_RULES);
        }
        ToolChoice::Required => g.push_str("root ::= calls\n"),
    }
    g.push_str(if one_call {
        "calls ::= call\n"
    } else {
        "calls ::= call ( ws call )*\n"
    });
    let alternatives: Vec<String> = (0..tools.len()).map(|i| format!("tool-{i}")).collect();
    let _ = writeln!(
        g,
        "call ::= \"<tool_call>\" ws \"{{\" ws \"\\\"name\\\"\" ws \":\" ws ( {} ) ws \"}}\" ws \"</tool_call>\"",
        alternatives.join(" | ")
    );
    for (i, tool) in tools.iter().enumerate() {
        let _ = writeln!(
            g,
            "tool-{i} ::= {} ws \",\" ws \"\\\"arguments\\\"\" ws \":\" ws args-{i}",
            literal(&Value::String(tool.name.clone()))
        );
        let _ = writeln!(g, "args-{i} ::= {}", arguments(&tool.parameters));
    }
    g.push_str(JSON_RULES);
    Some(g)
}

/// The rule body for a tool's arguments object.
fn arguments(schema: &Value) -> String {
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return "object".to_owned();
    };
    if properties.is_empty() {
        return "\"{\" ws \"}\"".to_owned();
    }
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let member = |name: &str, schema: &Value| {
        format!(
            "{} ws \":\" ws {}",
            literal(&Value::String(name.to_owned())),
            property(schema)
        )
    };
    let required_members: Vec<String> = properties
        .iter()
        .filter(|(n, _)| required.contains(&n.as_str()))
        .map(|(n, s)| member(n, s))
        .collect();
    let optional: Vec<String> = properties
        .iter()
        .filter(|(n, _)| !required.contains(&n.as_str()))
        .map(|(n, s)| member(n, s))
        .collect();
    let mut body = String::from("\"{\" ws ");
    body.push_str(&required_members.join(" ws \",\" ws "));
    if !optional.is_empty() {
        // Optional members, any of them, after the required ones (or alone).
        let any = format!("( {} )", optional.join(" | "));
        if required_members.is_empty() {
            body.push_str(&format!("( {any} ( ws \",\" ws {any} )* )?"));
        } else {
            body.push_str(&format!(" ( ws \",\" ws {any} )*"));
        }
    }
    body.push(' ');
    body.push_str("ws \"}\"");
    body
}

/// The rule for one property's value, from its schema's type or enum.
fn property(schema: &Value) -> String {
    if let Some(options) = schema.get("enum").and_then(Value::as_array)
        && !options.is_empty()
    {
        let options: Vec<String> = options.iter().map(literal).collect();
        return format!("( {} )", options.join(" | "));
    }
    match schema.get("type").and_then(Value::as_str) {
        Some("string") => "string",
        Some("integer") => "integer",
        Some("number") => "number",
        Some("boolean") => "boolean",
        Some("array") => "array",
        Some("object") => "object",
        _ => "value",
    }
    .to_owned()
}

/// A GBNF string literal matching `value`'s JSON text exactly.
fn literal(value: &Value) -> String {
    let json = value.to_string();
    let mut out = String::from("\"");
    for c in json.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(name: &str, parameters: Value) -> ToolSpec {
        ToolSpec {
            name: name.into(),
            description: String::new(),
            parameters,
        }
    }

    #[test]
    fn no_tools_no_grammar() {
        assert!(for_tools(&[], ToolChoice::Auto, false).is_none());
    }

    #[test]
    fn names_every_tool_and_its_required_arguments() {
        let g = for_tools(&[
            tool(
                "shell",
                json!({"type": "object", "properties": {"timeout": {"type": "integer"}, "command": {"type": "string"}}, "required": ["command"]}),
            ),
            tool("list_agents", json!({"type": "object", "properties": {}})),
        ], ToolChoice::Auto, false)
        .unwrap_or_default();
        assert!(g.contains(r#"tool-0 ::= "\"shell\"""#), "{g}");
        assert!(g.contains(r#"tool-1 ::= "\"list_agents\"""#), "{g}");
        // The required `command` comes first even though `timeout` is listed first.
        assert!(
            g.contains(r#"args-0 ::= "{" ws "\"command\"" ws ":" ws string ( ws "," ws ( "\"timeout\"" ws ":" ws integer ) )* ws "}""#),
            "{g}"
        );
        assert!(g.contains(r#"args-1 ::= "{" ws "}""#), "{g}");
        assert!(g.starts_with("root ::= answer | calls\n"), "{g}");
        assert!(g.contains("calls ::= call ( ws call )*\n"), "{g}");
        let required = for_tools(
            &[tool(
                "list_agents",
                json!({"type": "object", "properties": {}}),
            )],
            ToolChoice::Required,
            true,
        )
        .unwrap_or_default();
        assert!(
            required.starts_with("root ::= calls\ncalls ::= call\n"),
            "{required}"
        );
        assert!(!required.contains("answer"), "{required}");
    }

    #[test]
    fn enums_become_alternatives() {
        assert_eq!(
            property(&json!({"type": "string", "enum": ["red", "blue"]})),
            r#"( "\"red\"" | "\"blue\"" )"#
        );
    }
}
