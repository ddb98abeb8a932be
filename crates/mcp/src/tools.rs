//! What an agent sees of its MCP servers: each server tool as `SERVER__TOOL`, plus
//! `mcp_read_resource` and `mcp_get_prompt` over all of them.

use crate::error::McpError;
use crate::hub::McpHub;
use crate::render;
use async_trait::async_trait;
use reef_core::{Tool, ToolContext, ToolError, ToolSpec};
use serde_json::{Map, Value, json};
use std::sync::Arc;

/// The servers one agent has, in one hub.
#[derive(Clone)]
pub struct McpAccess {
    pub hub: Arc<McpHub>,
    pub servers: Vec<String>,
}

impl McpAccess {
    /// The agent's MCP tools now: each server's tools (a server that cannot start is left
    /// out with a warning, and tried again next time; servers are asked at once), then the
    /// resource and prompt tools. A name another server's tool took gets a numbered suffix.
    pub async fn tools(&self) -> Vec<Arc<dyn Tool>> {
        let lists = futures::future::join_all(self.servers.iter().map(|s| self.hub.tools(s))).await;
        let mut taken = std::collections::BTreeSet::new();
        let mut tools: Vec<Arc<dyn Tool>> = Vec::new();
        for (server, list) in self.servers.iter().zip(lists) {
            let list = match list {
                Ok(list) => list,
                Err(err) => {
                    let err = self.hub.redact(server, &err.to_string());
                    tracing::warn!(server, "MCP server left out of this turn: {err}");
                    continue;
                }
            };
            for offered in &list.tools {
                let name = crate::names::unique(&offered.public, &taken);
                if name != offered.public {
                    tracing::warn!(server, tool = %offered.tool.name, "another server's tool is called `{}`; this one is offered as `{name}`", offered.public);
                }
                taken.insert(name.clone());
                let description = offered.tool.description.clone().unwrap_or_else(|| {
                    format!("Tool `{}` of MCP server `{server}`.", offered.tool.name)
                });
                tools.push(Arc::new(McpTool {
                    hub: self.hub.clone(),
                    server: server.clone(),
                    tool: offered.tool.name.clone(),
                    spec: ToolSpec {
                        name,
                        description,
                        parameters: Value::Object(offered.tool.input_schema.clone()),
                    },
                }));
            }
        }
        if !self.servers.is_empty() {
            tools.push(Arc::new(ResourceTool(self.clone())));
            tools.push(Arc::new(PromptTool(self.clone())));
        }
        tools
    }

    fn check(&self, server: &str) -> Result<(), ToolError> {
        if self.servers.iter().any(|s| s == server) {
            Ok(())
        } else {
            Err(ToolError::InvalidArguments(format!(
                "`{server}` is not one of your MCP servers ({})",
                self.servers.join(", ")
            )))
        }
    }
}

/// One tool of one server.
struct McpTool {
    hub: Arc<McpHub>,
    server: String,
    tool: String,
    spec: ToolSpec,
}

#[async_trait]
impl Tool for McpTool {
    fn content_source(&self) -> Option<reef_core::ContentSource> {
        Some(reef_core::ContentSource::Mcp)
    }

    /// The arguments go to an MCP server, which may send them anywhere.
    fn egress(&self, _args: &Value) -> reef_core::Egress {
        reef_core::Egress::Anywhere
    }

    fn spec(&self) -> ToolSpec {
        self.spec.clone()
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<String, ToolError> {
        let args = match args {
            Value::Object(map) => map,
            Value::Null => Map::new(),
            other => {
                return Err(ToolError::InvalidArguments(format!(
                    "the arguments must be a JSON object, not {other}"
                )));
            }
        };
        let hub = &self.hub;
        let result = hub
            .call_tool(&self.server, &self.tool, args)
            .await
            .map_err(|e| tool_error(hub, &self.server, e))?;
        let label = format!("{}-{}", self.server, self.tool);
        let text = render::call_result(&result, &ctx.workspace, &label);
        let text = hub.redact(&self.server, &text);
        if result.is_error {
            Err(ToolError::Failed(text))
        } else {
            Ok(text)
        }
    }
}

/// `mcp_read_resource`: lists a server's resources, or reads one.
struct ResourceTool(McpAccess);

#[async_trait]
impl Tool for ResourceTool {
    fn content_source(&self) -> Option<reef_core::ContentSource> {
        Some(reef_core::ContentSource::Mcp)
    }

    /// The arguments go to an MCP server, which may send them anywhere.
    fn egress(&self, _args: &Value) -> reef_core::Egress {
        reef_core::Egress::Anywhere
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "mcp_read_resource".into(),
            description: format!(
                "Read a resource of an MCP server by its URI; without `uri`, list the server's \
                 resources. Your servers: {}.",
                self.0.servers.join(", ")
            ),
            parameters: json!({
                "type": "object",
                "properties": {
                    "server": {"type": "string", "enum": self.0.servers},
                    "uri": {"type": "string", "description": "The resource's URI; omit to list them."}
                },
                "required": ["server"],
            }),
        }
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<String, ToolError> {
        let server = string(&args, "server")?.ok_or_else(|| missing("server"))?;
        self.0.check(&server)?;
        let hub = &self.0.hub;
        match string(&args, "uri")? {
            Some(uri) => {
                let contents = hub
                    .read_resource(&server, &uri)
                    .await
                    .map_err(|e| tool_error(hub, &server, e))?;
                let text = render::resource(&contents, &ctx.workspace, &server);
                Ok(hub.redact(&server, &text))
            }
            None => {
                let list = hub
                    .list_resources(&server)
                    .await
                    .map_err(|e| tool_error(hub, &server, e))?;
                Ok(hub.redact(&server, &render::resource_list(&server, &list)))
            }
        }
    }
}

/// `mcp_get_prompt`: lists a server's prompts, or fills one in.
struct PromptTool(McpAccess);

#[async_trait]
impl Tool for PromptTool {
    fn content_source(&self) -> Option<reef_core::ContentSource> {
        Some(reef_core::ContentSource::Mcp)
    }

    /// The arguments go to an MCP server, which may send them anywhere.
    fn egress(&self, _args: &Value) -> reef_core::Egress {
        reef_core::Egress::Anywhere
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "mcp_get_prompt".into(),
            description: format!(
                "Get a prompt of an MCP server filled in with `arguments`; without `name`, list \
                 the server's prompts and their arguments. Your servers: {}.",
                self.0.servers.join(", ")
            ),
            parameters: json!({
                "type": "object",
                "properties": {
                    "server": {"type": "string", "enum": self.0.servers},
                    "name": {"type": "string", "description": "The prompt's name; omit to list them."},
                    "arguments": {"type": "object", "additionalProperties": {"type": "string"}}
                },
                "required": ["server"],
            }),
        }
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<String, ToolError> {
        let server = string(&args, "server")?.ok_or_else(|| missing("server"))?;
        self.0.check(&server)?;
        let hub = &self.0.hub;
        match string(&args, "name")? {
            Some(name) => {
                let arguments = match args.get("arguments") {
                    None | Some(Value::Null) => Map::new(),
                    Some(Value::Object(map)) => map.clone(),
                    Some(_) => {
                        return Err(ToolError::InvalidArguments(
                            "`arguments` must be an object of strings".into(),
                        ));
                    }
                };
                let messages = hub
                    .get_prompt(&server, &name, arguments)
                    .await
                    .map_err(|e| tool_error(hub, &server, e))?;
                let text = render::prompt(&messages, &ctx.workspace, &server);
                Ok(hub.redact(&server, &text))
            }
            None => {
                let list = hub
                    .list_prompts(&server)
                    .await
                    .map_err(|e| tool_error(hub, &server, e))?;
                Ok(hub.redact(&server, &render::prompt_list(&server, &list)))
            }
        }
    }
}

fn string(args: &Value, key: &str) -> Result<Option<String>, ToolError> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if !s.is_empty() => Ok(Some(s.clone())),
        Some(_) => Err(ToolError::InvalidArguments(format!(
            "`{key}` must be a non-empty string"
        ))),
    }
}

fn missing(key: &str) -> ToolError {
    ToolError::InvalidArguments(format!("`{key}` is required"))
}

/// The error the model reads, without the server's secrets.
fn tool_error(hub: &McpHub, server: &str, err: McpError) -> ToolError {
    match err {
        McpError::Timeout { secs, .. } => ToolError::Timeout(secs),
        other => ToolError::Failed(hub.redact(server, &other.to_string())),
    }
}
