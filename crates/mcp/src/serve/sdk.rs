//! An [`McpHost`] served with the official SDK (rmcp): the handler, stdio, and streamable
//! HTTP with its Host and Origin checks. With `client/sdk.rs`, the only file naming rmcp.

use super::{Change, HostError, McpHost};
use crate::types::{CallResult, Content, ResourceContents, ResourceInfo, ToolInfo};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    InitializeRequestParams, InitializeResult, ListResourcesResult, ListToolsResult,
    PaginatedRequestParams, ProtocolVersion, ReadResourceRequestParams, ReadResourceResponse,
    ReadResourceResult, Resource, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use std::sync::Arc;
use std::time::Duration;

/// The largest request body `/mcp` reads.
const MAX_BODY: usize = 4 * 1024 * 1024;

#[derive(Clone)]
struct HostHandler {
    host: Arc<dyn McpHost>,
}

impl ServerHandler for HostHandler {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .enable_resources()
                .enable_resources_list_changed()
                .build(),
        )
        .with_server_info(Implementation::new("reef", env!("CARGO_PKG_VERSION")))
        .with_instructions(
            "reef runs long-lived AI agents. list_agents and agent_status show them, \
             spawn_agent starts one, send_message talks to one (wait: true returns its reply), \
             list_questions and answer_question handle what agents ask the operator, \
             memory_search and memory_save use reef's shared memory. Each agent's transcript \
             and status are resources (reef://agents/NAME/transcript, …/status).",
        )
    }

    fn supported_protocol_versions(&self) -> std::borrow::Cow<'static, [ProtocolVersion]> {
        std::borrow::Cow::Borrowed(ProtocolVersion::known_up_to(&ProtocolVersion::V_2025_11_25))
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        cx.peer.set_peer_info(request.clone());
        self.negotiate_initialize(&request)
    }

    async fn on_initialized(&self, cx: NotificationContext<RoleServer>) {
        // Tell this client about changes for as long as it is connected.
        let mut changes = self.host.changes();
        let peer = cx.peer;
        tokio::spawn(async move {
            loop {
                let change = match changes.recv().await {
                    Ok(change) => change,
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => Change::Resources,
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                };
                if peer.is_transport_closed() {
                    return;
                }
                let sent = match change {
                    Change::Tools => peer.notify_tool_list_changed().await,
                    Change::Resources => peer.notify_resource_list_changed().await,
                };
                if sent.is_err() {
                    return;
                }
            }
        });
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tools = self.host.tools().await.map_err(error)?;
        Ok(ListToolsResult::with_all_items(
            tools.into_iter().map(tool).collect(),
        ))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = request.arguments.unwrap_or_default();
        let result = tokio::select! {
            result = self.host.call(&request.name, args) => result.map_err(error)?,
            () = cx.ct.cancelled() => {
                return Err(ErrorData::internal_error("cancelled by the client", None));
            }
        };
        Ok(call_result(result).into())
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let resources = self.host.resources().await.map_err(error)?;
        Ok(ListResourcesResult::with_all_items(
            resources.into_iter().map(resource).collect(),
        ))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let contents = self.host.read(&request.uri).await.map_err(error)?;
        Ok(ReadResourceResult::new(contents.into_iter().map(contents_of).collect()).into())
    }
}

/// Serves `host` on this process's stdin and stdout until the client closes them.
pub async fn serve_stdio(host: Arc<dyn McpHost>) -> Result<(), String> {
    let running = HostHandler { host }
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| e.to_string())?;
    running.waiting().await.map(drop).map_err(|e| e.to_string())
}

/// Who may reach `/mcp`: the `Host` names it answers to (`host[:port]`) and the browser
/// origins it accepts (`scheme://host:port`); a request with another gets 403.
#[derive(Clone, Debug)]
pub struct HttpGuard {
    pub hosts: Vec<String>,
    pub origins: Vec<String>,
}

/// `host` served as streamable HTTP at `/mcp`, refusing foreign `Host` and `Origin` headers
/// (against DNS rebinding). Authentication is the caller's layer.
pub fn http_router<S: Clone + Send + Sync + 'static>(
    host: Arc<dyn McpHost>,
    guard: HttpGuard,
    stop: tokio_util::sync::CancellationToken,
) -> axum::Router<S> {
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(guard.hosts)
        .with_allowed_origins(guard.origins)
        .enforce_origin_validation()
        .with_sse_keep_alive(Some(Duration::from_secs(15)))
        .with_max_request_body_bytes(MAX_BODY)
        .with_cancellation_token(stop);
    let service = StreamableHttpService::new(
        move || Ok(HostHandler { host: host.clone() }),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    axum::Router::new().nest_service("/mcp", service)
}

fn error(err: HostError) -> ErrorData {
    match err {
        HostError::NotFound(m) => ErrorData::resource_not_found(m, None),
        HostError::Invalid(m) => ErrorData::invalid_params(m, None),
        HostError::Failed(m) => ErrorData::internal_error(m, None),
    }
}

fn tool(info: ToolInfo) -> Tool {
    Tool::new_with_raw(
        info.name,
        info.description.map(Into::into),
        Arc::new(info.input_schema),
    )
}

fn resource(info: ResourceInfo) -> Resource {
    let mut out = Resource::new(info.uri, info.name);
    out.description = info.description;
    out.mime_type = info.mime_type;
    out
}

fn call_result(result: CallResult) -> CallToolResult {
    let content: Vec<ContentBlock> = result
        .content
        .into_iter()
        .map(|c| match c {
            Content::Text(text) => ContentBlock::text(text),
            Content::Media { data, mime_type } if mime_type.starts_with("audio/") => {
                ContentBlock::audio(data, mime_type)
            }
            Content::Media { data, mime_type } => ContentBlock::image(data, mime_type),
            Content::Link { uri, name } => {
                ContentBlock::resource_link(Resource::new(uri.clone(), name.unwrap_or(uri)))
            }
            Content::Resource(contents) => match contents.text {
                Some(text) => ContentBlock::embedded_text(contents.uri, text),
                None => ContentBlock::text(format!("[resource {}]", contents.uri)),
            },
        })
        .collect();
    let mut out = if result.is_error {
        CallToolResult::error(content)
    } else {
        CallToolResult::success(content)
    };
    out.structured_content = result.structured;
    out
}

fn contents_of(c: ResourceContents) -> rmcp::model::ResourceContents {
    let ResourceContents {
        uri,
        mime_type,
        text,
        blob,
    } = c;
    match (text, blob) {
        (None, Some(blob)) => rmcp::model::ResourceContents::BlobResourceContents {
            uri,
            mime_type,
            blob,
            meta: None,
        },
        (text, _) => rmcp::model::ResourceContents::TextResourceContents {
            uri,
            mime_type,
            text: text.unwrap_or_default(),
            meta: None,
        },
    }
}
