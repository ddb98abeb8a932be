//! `SKILL.md`: its YAML front matter checked against the Agent Skills rules (and the fields of
//! the older dialects reef also reads), and the Markdown instructions after it.

use crate::params::{Param, parse_params};
use serde_json::Value;
use std::collections::BTreeMap;
use yaml_rust2::parser::Event;
use yaml_rust2::{Yaml, YamlLoader};

/// The file that makes a folder a skill.
pub const SKILL_FILE: &str = "SKILL.md";
/// Longest skill name.
pub const MAX_NAME: usize = 64;
/// Longest description.
pub const MAX_DESCRIPTION: usize = 1024;
/// Longest `compatibility`.
pub const MAX_COMPATIBILITY: usize = 500;

/// The rule a `SKILL.md` broke, with what was found. Shown as the reason a skill is skipped.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Rule {
    #[error("SKILL.md must start with YAML front matter between `---` lines")]
    NoFrontMatter,
    #[error("the front matter is not valid YAML: {0}")]
    Yaml(String),
    #[error("the front matter must be a mapping of fields")]
    NotAMapping,
    #[error("`{0}` is required")]
    Missing(&'static str),
    #[error("`{field}` must be {expected}")]
    WrongType {
        field: String,
        expected: &'static str,
    },
    #[error(
        "`name` {0:?} must be 1-{MAX_NAME} lowercase letters, digits and hyphens, not starting or \
         ending with a hyphen and without two in a row"
    )]
    BadName(String),
    #[error("`name` {name:?} must equal the folder name {folder:?}")]
    NameNotFolder { name: String, folder: String },
    #[error("`{field}` is {len} characters, over the limit of {max}")]
    TooLong {
        field: &'static str,
        len: usize,
        max: usize,
    },
    #[error("`description` must not be empty")]
    EmptyDescription,
    #[error("`parameters`: {0}")]
    Parameters(String),
    #[error("`mode` {0:?} must be `subprocess` or `wasm`")]
    BadMode(String),
    #[error("`{field}`: {message}")]
    BadValue {
        field: &'static str,
        message: String,
    },
    #[error("{0}")]
    Executable(String),
}

/// How a skill that is its own tool runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// `run.sh`, `run.py` or `main.py` in the folder, in the sandbox.
    Subprocess,
    /// `main.wasm` in the WASM runtime.
    Wasm,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Subprocess => "subprocess",
            Mode::Wasm => "wasm",
        }
    }
}

/// A checked `SKILL.md`.
#[derive(Clone, Debug, PartialEq)]
pub struct Manifest {
    pub name: String,
    pub description: String,
    pub license: Option<String>,
    pub compatibility: Option<String>,
    pub metadata: BTreeMap<String, String>,
    /// `allowed-tools`, split on whitespace (shown; reef's capabilities decide what runs).
    pub allowed_tools: Vec<String>,
    /// `parameters`: the skill is a tool of its own with these arguments.
    pub parameters: Option<Vec<Param>>,
    /// `mode`: how its tool runs (`None` with parameters: subprocess).
    pub mode: Option<Mode>,
    /// `timeout_secs` for its tool.
    pub timeout_secs: Option<u64>,
    /// `memory` in bytes for a WASM tool.
    pub memory_bytes: Option<u64>,
    /// `writes-workspace`: a WASM tool gets the workspace read-write.
    pub writes_workspace: bool,
    /// `domains`: hosts a WASM tool may call over HTTP (the agent must be allowed them too).
    pub domains: Vec<String>,
    /// `secrets`: secrets a WASM tool may have injected into request headers, by name.
    pub secrets: Vec<String>,
    /// Fields reef does not use (`version`, `requires`, `image`, …), kept as they were.
    pub other: BTreeMap<String, Value>,
    /// The Markdown instructions after the front matter.
    pub body: String,
}

impl Manifest {
    /// Whether the skill is a tool of its own (it declares `parameters` or a `mode`).
    pub fn is_tool(&self) -> bool {
        self.parameters.is_some() || self.mode.is_some()
    }

    /// The mode its tool runs in.
    pub fn tool_mode(&self) -> Mode {
        self.mode.unwrap_or(Mode::Subprocess)
    }
}

/// Parses `text`, the `SKILL.md` of the folder named `folder`.
pub fn parse(text: &str, folder: &str) -> Result<Manifest, Rule> {
    let (front, body) = split_front_matter(text).ok_or(Rule::NoFrontMatter)?;
    check_shape(front)?;
    let docs = YamlLoader::load_from_str(front).map_err(|e| Rule::Yaml(e.to_string()))?;
    let Some(Yaml::Hash(hash)) = docs.into_iter().next() else {
        return Err(Rule::NotAMapping);
    };
    let mut fields: BTreeMap<String, Value> = BTreeMap::new();
    for (key, value) in hash {
        let Yaml::String(key) = key else {
            return Err(Rule::NotAMapping);
        };
        fields.insert(key, to_json(value)?);
    }
    let name = take_string(&mut fields, "name")?.ok_or(Rule::Missing("name"))?;
    check_name(&name)?;
    if name != folder {
        return Err(Rule::NameNotFolder {
            name,
            folder: folder.to_owned(),
        });
    }
    let description =
        take_string(&mut fields, "description")?.ok_or(Rule::Missing("description"))?;
    let description = description.trim().to_owned();
    if description.is_empty() {
        return Err(Rule::EmptyDescription);
    }
    check_len("description", &description, MAX_DESCRIPTION)?;
    let license = take_string(&mut fields, "license")?;
    let compatibility = take_string(&mut fields, "compatibility")?;
    if let Some(c) = &compatibility {
        check_len("compatibility", c, MAX_COMPATIBILITY)?;
    }
    let metadata = match fields.remove("metadata") {
        None | Some(Value::Null) => BTreeMap::new(),
        Some(Value::Object(map)) => map
            .into_iter()
            .map(|(k, v)| match v {
                Value::String(s) => Ok((k, s)),
                Value::Number(n) => Ok((k, n.to_string())),
                Value::Bool(b) => Ok((k, b.to_string())),
                _ => Err(Rule::WrongType {
                    field: format!("metadata.{k}"),
                    expected: "a string",
                }),
            })
            .collect::<Result<_, _>>()?,
        Some(_) => {
            return Err(Rule::WrongType {
                field: "metadata".into(),
                expected: "a mapping of strings to strings",
            });
        }
    };
    let allowed_tools = match fields.remove("allowed-tools") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(s)) => s.split_whitespace().map(str::to_owned).collect(),
        // Some published skills write a YAML list.
        Some(Value::Array(items)) => string_list("allowed-tools", items)?,
        Some(_) => {
            return Err(Rule::WrongType {
                field: "allowed-tools".into(),
                expected: "a space-separated string",
            });
        }
    };
    let parameters = match fields.remove("parameters") {
        None | Some(Value::Null) => None,
        Some(value) => Some(parse_params(value).map_err(Rule::Parameters)?),
    };
    let mode = match take_string(&mut fields, "mode")? {
        None => None,
        Some(m) if m == "subprocess" => Some(Mode::Subprocess),
        Some(m) if m == "wasm" => Some(Mode::Wasm),
        Some(other) => return Err(Rule::BadMode(other)),
    };
    let timeout_secs = match fields.remove("timeout_secs") {
        None | Some(Value::Null) => None,
        Some(v) => match v.as_u64() {
            Some(n @ 1..=3600) => Some(n),
            _ => {
                return Err(Rule::BadValue {
                    field: "timeout_secs",
                    message: format!("{v} is not a whole number of seconds from 1 to 3600"),
                });
            }
        },
    };
    let memory_bytes = match fields.remove("memory") {
        None | Some(Value::Null) => None,
        Some(v) => Some(parse_memory(&v)?),
    };
    let writes_workspace = match fields.remove("writes-workspace") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => b,
        Some(_) => {
            return Err(Rule::WrongType {
                field: "writes-workspace".into(),
                expected: "true or false",
            });
        }
    };
    let domains = list_field(&mut fields, "domains")?;
    let secrets = list_field(&mut fields, "secrets")?;
    Ok(Manifest {
        name,
        description,
        license,
        compatibility,
        metadata,
        allowed_tools,
        parameters,
        mode,
        timeout_secs,
        memory_bytes,
        writes_workspace,
        domains,
        secrets,
        other: fields,
        body: body.trim_start_matches(['\r', '\n']).to_owned(),
    })
}

/// Deepest nesting of mappings and lists in front matter.
const MAX_DEPTH: usize = 32;
/// Most parser events (scalars, starts and ends) in front matter.
const MAX_EVENTS: usize = 20_000;

/// Refuses front matter that would be expensive to load before it is loaded: aliases (each is
/// copied in full, so a few lines of nested aliases grow to gigabytes), deep nesting and very
/// many nodes. Agent Skills front matter needs none of these.
fn check_shape(front: &str) -> Result<(), Rule> {
    let mut parser = yaml_rust2::parser::Parser::new_from_str(front);
    let (mut depth, mut events) = (0usize, 0usize);
    loop {
        let (event, _) = parser.next_token().map_err(|e| Rule::Yaml(e.to_string()))?;
        events += 1;
        if events > MAX_EVENTS {
            return Err(Rule::Yaml(format!("more than {MAX_EVENTS} values")));
        }
        match event {
            Event::StreamEnd => return Ok(()),
            Event::Alias(_) => {
                return Err(Rule::Yaml("aliases (`*name`) are not accepted".into()));
            }
            Event::SequenceStart(..) | Event::MappingStart(..) => {
                depth += 1;
                if depth > MAX_DEPTH {
                    return Err(Rule::Yaml(format!("nested deeper than {MAX_DEPTH} levels")));
                }
            }
            Event::SequenceEnd | Event::MappingEnd => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
}

/// The front matter and the body of a `SKILL.md`, when it opens with a `---` line that a later
/// `---` (or `...`) line closes.
fn split_front_matter(text: &str) -> Option<(&str, &str)> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let rest = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))?;
    let mut at = 0;
    for line in rest.split_inclusive('\n') {
        let bare = line.trim_end_matches(['\r', '\n']);
        if bare == "---" || bare == "..." {
            return Some((&rest[..at], &rest[at + line.len()..]));
        }
        at += line.len();
    }
    None
}

/// Agent Skills names: lowercase letters, digits and single hyphens inside.
pub fn check_name(name: &str) -> Result<(), Rule> {
    let ok = !name.is_empty()
        && name.len() <= MAX_NAME
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.starts_with('-')
        && !name.ends_with('-')
        && !name.contains("--");
    if ok {
        Ok(())
    } else {
        Err(Rule::BadName(name.to_owned()))
    }
}

fn check_len(field: &'static str, text: &str, max: usize) -> Result<(), Rule> {
    let len = text.chars().count();
    if len > max {
        return Err(Rule::TooLong { field, len, max });
    }
    Ok(())
}

fn take_string(fields: &mut BTreeMap<String, Value>, field: &str) -> Result<Option<String>, Rule> {
    match fields.remove(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(Rule::WrongType {
            field: field.to_owned(),
            expected: "a string",
        }),
    }
}

fn list_field(fields: &mut BTreeMap<String, Value>, field: &str) -> Result<Vec<String>, Rule> {
    match fields.remove(field) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::String(s)) => Ok(s.split_whitespace().map(str::to_owned).collect()),
        Some(Value::Array(items)) => string_list(field, items),
        Some(_) => Err(Rule::WrongType {
            field: field.to_owned(),
            expected: "a list of strings",
        }),
    }
}

fn string_list(field: &str, items: Vec<Value>) -> Result<Vec<String>, Rule> {
    items
        .into_iter()
        .map(|v| match v {
            Value::String(s) => Ok(s),
            _ => Err(Rule::WrongType {
                field: field.to_owned(),
                expected: "a list of strings",
            }),
        })
        .collect()
}

/// `memory`: bytes, or a size like `64M` / `1G` / `512K`.
fn parse_memory(value: &Value) -> Result<u64, Rule> {
    let bad = || Rule::BadValue {
        field: "memory",
        message: format!("{value} is not a size like \"64M\" (at least 1M, at most 4G)"),
    };
    let bytes = match value {
        Value::Number(n) => n.as_u64().ok_or_else(bad)?,
        Value::String(s) => {
            let s = s.trim();
            let (digits, unit) =
                s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
            let n: u64 = digits.parse().map_err(|_| bad())?;
            let scale = match unit.trim().to_ascii_uppercase().as_str() {
                "" | "B" => 1,
                "K" | "KB" | "KIB" => 1 << 10,
                "M" | "MB" | "MIB" => 1 << 20,
                "G" | "GB" | "GIB" => 1 << 30,
                _ => return Err(bad()),
            };
            n.checked_mul(scale).ok_or_else(bad)?
        }
        _ => return Err(bad()),
    };
    if !(1 << 20..=4 << 30).contains(&bytes) {
        return Err(bad());
    }
    Ok(bytes)
}

/// A YAML value as JSON (keys must be strings; aliases are resolved by the loader).
fn to_json(yaml: Yaml) -> Result<Value, Rule> {
    Ok(match yaml {
        Yaml::Null => Value::Null,
        Yaml::Boolean(b) => Value::Bool(b),
        Yaml::Integer(i) => Value::from(i),
        Yaml::Real(r) => r
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
            .map_or(Value::String(r), Value::Number),
        Yaml::String(s) => Value::String(s),
        Yaml::Array(items) => {
            Value::Array(items.into_iter().map(to_json).collect::<Result<_, _>>()?)
        }
        Yaml::Hash(hash) => {
            let mut map = serde_json::Map::new();
            for (k, v) in hash {
                let key = match k {
                    Yaml::String(s) => s,
                    Yaml::Integer(i) => i.to_string(),
                    Yaml::Boolean(b) => b.to_string(),
                    _ => return Err(Rule::Yaml("a mapping key is not a string".into())),
                };
                map.insert(key, to_json(v)?);
            }
            Value::Object(map)
        }
        Yaml::Alias(_) | Yaml::BadValue => {
            return Err(Rule::Yaml("a value could not be read".into()));
        }
    })
}

/// The text of a `SKILL.md` for `name`: front matter with the given fields (strings quoted as
/// JSON, which YAML reads the same) and the instructions.
pub fn render(name: &str, description: &str, extra: &[(&str, &str)], body: &str) -> String {
    let quote = |s: &str| Value::String(s.to_owned()).to_string();
    let mut out = format!("---\nname: {name}\ndescription: {}\n", quote(description));
    for (key, value) in extra {
        out.push_str(&format!("{key}: {}\n", quote(value)));
    }
    out.push_str("---\n\n");
    out.push_str(body.trim());
    out.push('\n');
    out
}
