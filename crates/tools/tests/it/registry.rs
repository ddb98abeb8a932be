//! The registry and the tool specs it exposes.

use crate::support::env;
use async_trait::async_trait;
use reef_core::{Tool, ToolContext, ToolError, ToolSpec};
use reef_tools::ToolRegistry;
use serde_json::json;
use std::sync::Arc;

const BUILTINS: [&str; 7] = [
    "edit_file",
    "http_fetch",
    "list_dir",
    "read_file",
    "search_files",
    "shell",
    "write_file",
];

#[test]
fn builtin_names_are_sorted_and_complete() {
    let env = env();
    assert_eq!(env.registry.names(), BUILTINS);
    let spec_names: Vec<String> = env.registry.specs().into_iter().map(|s| s.name).collect();
    assert_eq!(spec_names, BUILTINS);
}

#[test]
fn specs_are_object_schemas_whose_required_fields_exist() {
    for spec in env().registry.specs() {
        let params = &spec.parameters;
        assert_eq!(params["type"], "object", "{}", spec.name);
        assert!(!spec.description.is_empty());
        let props = params["properties"].as_object().unwrap();
        for (name, prop) in props {
            assert!(
                prop["description"].as_str().is_some_and(|d| !d.is_empty()),
                "{}.{name} lacks a description",
                spec.name
            );
        }
        for req in params["required"].as_array().unwrap() {
            assert!(props.contains_key(req.as_str().unwrap()), "{}", spec.name);
        }
    }
}

struct Echo(&'static str);

#[async_trait]
impl Tool for Echo {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "echo".into(),
            description: self.0.into(),
            parameters: json!({"type": "object", "properties": {}, "required": []}),
        }
    }

    async fn call(
        &self,
        _ctx: &ToolContext,
        _args: serde_json::Value,
    ) -> Result<String, ToolError> {
        Ok(self.0.into())
    }
}

#[test]
fn register_replaces_by_name_and_get_misses_unknown() {
    let mut registry = ToolRegistry::new();
    assert!(registry.is_empty());
    registry.register(Arc::new(Echo("first")));
    registry.register(Arc::new(Echo("second")));
    assert_eq!(registry.names(), ["echo"]);
    assert_eq!(registry.get("echo").unwrap().spec().description, "second");
    assert!(registry.get("nope").is_none());
}
