//! `reef mcp list|tools|call|resources|prompts|add|rm|serve`.

use super::client::{Client, print_json};
use crate::exit::Exit;
use crate::home;
use crate::mcp_args::McpCommand;
use crate::render::clean;
use reef_config::{Config, McpTransport};
use reef_mcp::{McpHub, RemoteHost};
use serde_json::{Map, Value, json};
use std::sync::Arc;
use std::time::Duration;

pub async fn mcp(overrides: &[String], command: McpCommand) -> anyhow::Result<u8> {
    let config = home::load_config(overrides)?;
    match command {
        McpCommand::List { json } => list(&config, json).await?,
        McpCommand::Tools { server, json } => {
            let hub = local_hub(&config, &server).await?;
            let listed = hub.tools(&server).await;
            hub.shutdown().await;
            let list = listed.map_err(|e| Exit::runtime(e.to_string()))?;
            for warning in &list.warnings {
                eprintln!("warning: {}", clean(warning));
            }
            if json {
                let rows: Vec<Value> = list
                    .tools
                    .iter()
                    .map(|t| {
                        json!({"name": t.public, "tool": t.tool.name,
                               "description": t.tool.description,
                               "input_schema": t.tool.input_schema})
                    })
                    .collect();
                print_json(&Value::Array(rows));
            } else {
                for t in &list.tools {
                    let about = t.tool.description.as_deref().unwrap_or("");
                    let first = about.lines().next().unwrap_or("");
                    println!("{}  {}", clean(&t.public), clean(first));
                }
            }
        }
        McpCommand::Call { server, tool, args } => {
            let args = object(&args, "ARGS")?;
            let hub = local_hub(&config, &server).await?;
            let called = hub.call_tool(&server, &tool, args).await;
            hub.shutdown().await;
            let result = called.map_err(|e| Exit::runtime(e.to_string()))?;
            let cwd = std::env::current_dir()?;
            let text = reef_mcp::render_call(&result, &cwd, &format!("{server}-{tool}"));
            println!("{}", clean(&text));
            if result.is_error {
                return Ok(crate::exit::RUNTIME);
            }
        }
        McpCommand::Resources { server, uri } => {
            let hub = local_hub(&config, &server).await?;
            let out = match &uri {
                Some(uri) => hub.read_resource(&server, uri).await.map(|c| {
                    let cwd = std::env::current_dir().unwrap_or_default();
                    reef_mcp::render_resource(&c, &cwd, &server)
                }),
                None => hub
                    .list_resources(&server)
                    .await
                    .map(|list| reef_mcp::resource_list(&server, &list)),
            };
            hub.shutdown().await;
            println!("{}", clean(&out.map_err(|e| Exit::runtime(e.to_string()))?));
        }
        McpCommand::Prompts { server, name, args } => {
            let mut arguments = Map::new();
            for arg in &args {
                let (k, v) = arg
                    .split_once('=')
                    .ok_or_else(|| Exit::usage(format!("--arg {arg:?} is not NAME=VALUE")))?;
                arguments.insert(k.to_owned(), Value::from(v));
            }
            let hub = local_hub(&config, &server).await?;
            let out = match &name {
                Some(name) => hub.get_prompt(&server, name, arguments).await.map(|m| {
                    let cwd = std::env::current_dir().unwrap_or_default();
                    reef_mcp::render_prompt(&m, &cwd, &server)
                }),
                None => hub
                    .list_prompts(&server)
                    .await
                    .map(|list| reef_mcp::prompt_list(&server, &list)),
            };
            hub.shutdown().await;
            println!("{}", clean(&out.map_err(|e| Exit::runtime(e.to_string()))?));
        }
        McpCommand::Add {
            name,
            url,
            bearer_secret,
            env,
            templates,
            command,
        } => {
            let server = super::mcp_config::NewServer {
                url,
                bearer_secret,
                env,
                templates,
                command,
            };
            super::mcp_config::add(&config, overrides, &name, &server)?;
            println!(
                "added MCP server {name} to {}",
                config.home.join("reef.toml").display()
            );
        }
        McpCommand::Rm { name } => {
            super::mcp_config::remove(&config, overrides, &name)?;
            println!("removed MCP server {name}");
        }
        McpCommand::Serve => serve(&config).await?,
    }
    Ok(crate::exit::OK)
}

/// The configured servers, with their state in the running daemon when there is one.
async fn list(config: &Config, json: bool) -> anyhow::Result<()> {
    // The states come from the running daemon; without one, from the configuration.
    let from_daemon = match Client::connect(config) {
        Ok(client) => match client.get("/v1/mcp/servers").await {
            Ok(Value::Array(rows)) => Some(rows),
            Ok(_) => None,
            Err(err) => {
                tracing::debug!("no server states from the daemon: {err:#}");
                None
            }
        },
        Err(_) => None,
    };
    let daemon = from_daemon.is_some();
    let states = from_daemon.unwrap_or_default();
    let mut rows = Vec::new();
    for (name, server) in &config.mcp.servers {
        let state = states.iter().find(|s| s["name"] == name.as_str());
        let (transport, target) = match &server.transport {
            McpTransport::Stdio { command, args, .. } => {
                ("stdio", format!("{command} {}", args.join(" ")))
            }
            McpTransport::Http { url, .. } => ("http", url.clone()),
        };
        let fallback = if server.enabled {
            "not started"
        } else {
            "disabled"
        };
        rows.push(json!({
            "name": name,
            "transport": transport,
            "target": target.trim(),
            "enabled": server.enabled,
            "templates": server.templates,
            "state": state.map_or(fallback, |s| s["state"].as_str().unwrap_or(fallback)),
            "tools": state.and_then(|s| s.get("tools")).cloned().unwrap_or(Value::Null),
            "last_error": state.and_then(|s| s.get("last_error")).cloned().unwrap_or(Value::Null),
            "starts": state.and_then(|s| s.get("starts")).cloned().unwrap_or(json!(0)),
            "warnings": state.and_then(|s| s.get("warnings")).cloned().unwrap_or(json!([])),
        }));
    }
    if json {
        print_json(&Value::Array(rows));
        return Ok(());
    }
    if rows.is_empty() {
        println!("no MCP servers are configured (add one with `reef mcp add NAME -- COMMAND…`)");
        return Ok(());
    }
    if !daemon {
        println!("(the daemon is not running: states are as configured)");
    }
    for row in &rows {
        let tools = match &row["tools"] {
            Value::Number(n) => format!("{n} tools"),
            _ => "tools not listed yet".into(),
        };
        println!(
            "{}  {}  {}  {}  {}",
            row["name"].as_str().unwrap_or(""),
            row["transport"].as_str().unwrap_or(""),
            row["state"].as_str().unwrap_or(""),
            tools,
            clean(row["target"].as_str().unwrap_or(""))
        );
        if let Some(error) = row["last_error"].as_str() {
            println!("    last error: {}", clean(error));
        }
        for warning in row["warnings"].as_array().into_iter().flatten() {
            println!("    warning: {}", clean(warning.as_str().unwrap_or("")));
        }
    }
    Ok(())
}

/// A hub of this process for `server`, under the sandbox `[sandbox]` gives on this machine.
async fn local_hub(config: &Config, server: &str) -> anyhow::Result<Arc<McpHub>> {
    if !config.mcp.servers.contains_key(server) {
        let known: Vec<&str> = config.mcp.servers.keys().map(String::as_str).collect();
        return Err(Exit::usage(format!(
            "no MCP server `{server}` is configured (configured: {})",
            if known.is_empty() {
                "none".to_owned()
            } else {
                known.join(", ")
            }
        )));
    }
    let helper = super::sandbox::helper()?;
    let (policy, warning) = reef_agent::sandbox_policy(config, Some(helper)).await?;
    if let Some(warning) = warning {
        eprintln!("reef: warning: {warning}");
    }
    reef_agent::mcp_hub(config, policy).ok_or_else(|| Exit::usage("no MCP servers are configured"))
}

fn object(text: &str, what: &str) -> anyhow::Result<Map<String, Value>> {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(other) => Err(Exit::usage(format!(
            "{what} must be a JSON object, not {other}"
        ))),
        Err(e) => Err(Exit::usage(format!("{what} is not JSON: {e}"))),
    }
}

/// `reef mcp serve`: the running daemon's `/mcp`, on stdin and stdout.
async fn serve(config: &Config) -> anyhow::Result<()> {
    let client = Client::connect(config)?;
    // A request may wait for an agent's reply as long as the daemon lets it.
    let timeout = Duration::from_secs(reef_runtime::MAX_TTL_SECS + 60);
    let host = RemoteHost::connect(&format!("{}/mcp", client.base()), client.token(), timeout)
        .await
        .map_err(|e| Exit::runtime(format!("cannot reach the daemon's MCP endpoint: {e}")))?;
    reef_mcp::serve_stdio(Arc::new(host))
        .await
        .map_err(|e| Exit::runtime(format!("serving MCP on stdio: {e}")))?;
    Ok(())
}
