//! Argument parsing shared by the built-in tools: strict deserialisation with errors that
//! name the offending field.

use reef_core::{Need, ToolError};
use serde::de::DeserializeOwned;
use serde_json::Value;

/// Deserialises a tool's arguments. `null` is treated as `{}` so tools whose arguments are
/// all optional accept an empty call. Errors name the field path, e.g.
/// `timeout_secs: invalid type: string "x", expected u64`.
pub fn parse_args<T: DeserializeOwned>(args: Value) -> Result<T, ToolError> {
    let args = if args.is_null() {
        Value::Object(serde_json::Map::new())
    } else {
        args
    };
    serde_path_to_error::deserialize(args).map_err(|err| {
        let path = err.path().to_string();
        let inner = err.into_inner();
        if path == "." {
            ToolError::InvalidArguments(inner.to_string())
        } else {
            ToolError::InvalidArguments(format!("{path}: {inner}"))
        }
    })
}

/// The string argument `name`, if the call has one.
pub fn str_arg<'a>(args: &'a Value, name: &str) -> Option<&'a str> {
    args.get(name)?.as_str()
}

/// What reading the directory `path` (the workspace when absent) needs: everything beneath
/// it, which for the workspace itself only the `**` right grants.
pub fn dir_need(path: Option<&str>) -> Need {
    Need::ReadTree(path.unwrap_or("").to_owned())
}
