//! A skill's declared `parameters`: the arguments of the tool it becomes, their JSON schema,
//! the check of a call's arguments, and how they reach the program (`REEF_ARG_*`).

use serde_json::{Map, Value, json};

/// Types a parameter may have (JSON Schema's).
const TYPES: [&str; 6] = ["string", "integer", "number", "boolean", "array", "object"];

/// One declared argument.
#[derive(Clone, Debug, PartialEq)]
pub struct Param {
    pub name: String,
    pub kind: String,
    pub description: Option<String>,
    pub required: bool,
    /// Allowed values, when the parameter lists them.
    pub choices: Option<Vec<Value>>,
    pub default: Option<Value>,
}

/// Reads `parameters` as a mapping (`city: {type: string, required: true}`, or `city: string`)
/// or a list (`- name: city\n  type: string`).
pub(crate) fn parse_params(value: Value) -> Result<Vec<Param>, String> {
    let entries: Vec<(String, Value)> = match value {
        Value::Object(map) => map.into_iter().collect(),
        Value::Array(items) => items
            .into_iter()
            .enumerate()
            .map(|(i, item)| {
                let name = item
                    .get("name")
                    .and_then(Value::as_str)
                    .ok_or_else(|| format!("item {} has no `name`", i + 1))?
                    .to_owned();
                Ok((name, item))
            })
            .collect::<Result<_, String>>()?,
        _ => return Err("must be a mapping of names to types, or a list".into()),
    };
    let mut params = Vec::with_capacity(entries.len());
    for (name, spec) in entries {
        let valid = !name.is_empty()
            && name.len() <= 64
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !valid {
            return Err(format!(
                "{name:?} is not a parameter name (letters, digits, _ and -)"
            ));
        }
        if params.iter().any(|p: &Param| p.name == name) {
            return Err(format!("`{name}` is declared twice"));
        }
        let param = match spec {
            Value::String(kind) => Param {
                name,
                kind,
                description: None,
                required: true,
                choices: None,
                default: None,
            },
            Value::Object(map) => {
                let kind = map
                    .get("type")
                    .and_then(Value::as_str)
                    .unwrap_or("string")
                    .to_owned();
                let default = map.get("default").cloned();
                Param {
                    required: match map.get("required") {
                        None => default.is_none(),
                        Some(Value::Bool(b)) => *b,
                        Some(_) => return Err(format!("`{name}.required` must be true or false")),
                    },
                    description: map
                        .get("description")
                        .and_then(Value::as_str)
                        .map(str::to_owned),
                    choices: match map.get("enum") {
                        None => None,
                        Some(Value::Array(values)) if !values.is_empty() => Some(values.clone()),
                        Some(_) => return Err(format!("`{name}.enum` must be a non-empty list")),
                    },
                    default,
                    kind,
                    name,
                }
            }
            _ => return Err(format!("`{name}` must be a type name or a mapping")),
        };
        if !TYPES.contains(&param.kind.as_str()) {
            return Err(format!(
                "`{}` has type {:?}; use one of {}",
                param.name,
                param.kind,
                TYPES.join(", ")
            ));
        }
        params.push(param);
    }
    Ok(params)
}

/// The JSON schema of a tool taking `params` (`None`: any object).
pub fn schema(params: Option<&[Param]>) -> Value {
    let Some(params) = params else {
        return json!({"type": "object"});
    };
    let mut properties = Map::new();
    for p in params {
        let mut prop = Map::new();
        prop.insert("type".into(), Value::String(p.kind.clone()));
        if let Some(d) = &p.description {
            prop.insert("description".into(), Value::String(d.clone()));
        }
        if let Some(c) = &p.choices {
            prop.insert("enum".into(), Value::Array(c.clone()));
        }
        if let Some(d) = &p.default {
            prop.insert("default".into(), d.clone());
        }
        properties.insert(p.name.clone(), Value::Object(prop));
    }
    let required: Vec<&str> = params
        .iter()
        .filter(|p| p.required)
        .map(|p| p.name.as_str())
        .collect();
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    })
}

/// `args` checked against `params` with defaults filled in, or what is wrong with them.
pub fn check_args(params: Option<&[Param]>, args: Value) -> Result<Map<String, Value>, String> {
    let Value::Object(mut args) = args else {
        return Err("arguments must be a JSON object".into());
    };
    let Some(params) = params else {
        return Ok(args);
    };
    if let Some(unknown) = args.keys().find(|k| !params.iter().any(|p| &p.name == *k)) {
        let known: Vec<&str> = params.iter().map(|p| p.name.as_str()).collect();
        return Err(format!(
            "unknown argument `{unknown}`; the arguments are: {}",
            known.join(", ")
        ));
    }
    for p in params {
        match args.get(&p.name) {
            None | Some(Value::Null) => {
                if let Some(default) = &p.default {
                    args.insert(p.name.clone(), default.clone());
                } else if p.required {
                    return Err(format!("`{}` is required", p.name));
                }
            }
            Some(value) => {
                let fits = match p.kind.as_str() {
                    "string" => value.is_string(),
                    "integer" => value.is_i64() || value.is_u64(),
                    "number" => value.is_number(),
                    "boolean" => value.is_boolean(),
                    "array" => value.is_array(),
                    _ => value.is_object(),
                };
                if !fits {
                    return Err(format!("`{}` must be of type {}", p.name, p.kind));
                }
                if let Some(choices) = &p.choices
                    && !choices.contains(value)
                {
                    return Err(format!(
                        "`{}` must be one of {}",
                        p.name,
                        Value::Array(choices.clone())
                    ));
                }
            }
        }
    }
    Ok(args)
}

/// `REEF_ARG_NAME` variables for `args`: strings as they are, everything else as JSON.
pub fn arg_env(args: &Map<String, Value>) -> Vec<(String, String)> {
    args.iter()
        .map(|(k, v)| {
            let name = format!("REEF_ARG_{}", k.to_ascii_uppercase().replace('-', "_"));
            let value = match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            (name, value)
        })
        .collect()
}
