//! [`Connection`] on the official Rust SDK (rmcp); with `serve/sdk.rs`, the only file that
//! names its types.
//! Results are read back from their JSON by `crate::wire`, so an entry the SDK's types
//! reject (one odd tool, an unknown content kind) does not fail the whole answer.

use super::{Connection, Signals};
use crate::error::McpError;
use crate::types::{
    CallResult, PromptInfo, PromptMessages, ResourceContents, ResourceInfo, ToolInfo,
};
use crate::wire;
use async_trait::async_trait;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CancelledNotificationParam, ClientCapabilities,
    ClientConfig, ClientRequest, GetPromptRequest, GetPromptRequestParams, Implementation,
    ListPromptsRequest, ListResourcesRequest, ListToolsRequest, PaginatedRequestParams,
    ProgressNotificationParam, ProtocolVersion, ReadResourceRequest, ReadResourceRequestParams,
    RequestId,
};
use rmcp::service::{NotificationContext, PeerRequestOptions, RunningService, ServerSink};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, RoleClient, ServiceError, ServiceExt};
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};

/// The longest line (one JSON-RPC message) read from a server.
const MAX_MESSAGE: usize = 16 * 1024 * 1024;
/// Pages followed when listing, at most: a server that always returns a cursor ends there.
const MAX_PAGES: usize = 100;
/// A request may run this many times its timeout in all while progress keeps arriving.
const MAX_TOTAL_FACTOR: u32 = 10;

/// reef's side of the session: tells [`Signals`] what the server announced.
#[derive(Clone)]
struct Handler {
    signals: Arc<Signals>,
    server: String,
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        // No roots, sampling or elicitation: reef answers none of a server's requests.
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("reef", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }

    async fn on_tool_list_changed(&self, _cx: NotificationContext<RoleClient>) {
        tracing::debug!(server = %self.server, "tool list changed");
        self.signals.note_tools_changed();
    }

    async fn on_resource_list_changed(&self, _cx: NotificationContext<RoleClient>) {
        self.signals.note_resources_changed();
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _cx: NotificationContext<RoleClient>,
    ) {
        tracing::debug!(server = %self.server, progress = params.progress, total = ?params.total, "progress");
        self.signals.note_progress();
    }

    #[expect(
        deprecated,
        reason = "logging notifications are deprecated in the newest protocol, but servers on the handshake protocols still send them"
    )]
    async fn on_logging_message(
        &self,
        params: rmcp::model::LoggingMessageNotificationParam,
        _cx: NotificationContext<RoleClient>,
    ) {
        let line = match &params.data {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        let line: String = line.chars().take(500).collect();
        tracing::debug!(server = %self.server, level = ?params.level, "server log: {line}");
    }
}

struct SdkConnection {
    server: String,
    peer: ServerSink,
    timeout: Duration,
    service: tokio::sync::Mutex<Option<RunningService<RoleClient, Handler>>>,
}

/// Speaks MCP over a pair of pipes (a server's stdout and stdin), once the handshake has
/// completed within `timeout`.
pub(crate) async fn connect_pipes<R, W>(
    server: &str,
    read: R,
    write: W,
    signals: Arc<Signals>,
    timeout: Duration,
) -> Result<Arc<dyn Connection>, McpError>
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    let transport = AsyncRwTransport::new_client(read, write).with_max_line_length(MAX_MESSAGE);
    handshake(server, transport, signals, timeout).await
}

/// Speaks MCP over streamable HTTP to `url`, with `headers` and an optional bearer token.
pub(crate) async fn connect_http(
    server: &str,
    url: &str,
    headers: Vec<(String, String)>,
    bearer: Option<String>,
    signals: Arc<Signals>,
    timeout: Duration,
) -> Result<Arc<dyn Connection>, McpError> {
    let start = |reason: String| McpError::Start {
        server: server.to_owned(),
        reason,
    };
    let mut custom = HashMap::new();
    for (name, value) in headers {
        let name = reqwest::header::HeaderName::try_from(name.as_str())
            .map_err(|e| start(format!("header `{name}`: {e}")))?;
        let value = reqwest::header::HeaderValue::try_from(value)
            .map_err(|e| start(format!("header `{name}`: {e}")))?;
        custom.insert(name, value);
    }
    let mut config = StreamableHttpClientTransportConfig::with_uri(url).custom_headers(custom);
    if let Some(token) = bearer {
        config = config.auth_header(token);
    }
    // Headers may carry secrets: a redirect must not take them elsewhere.
    let http = reef_llm::http_client_without_redirects(None).map_err(|e| start(e.to_string()))?;
    let transport = StreamableHttpClientTransport::with_client(http, config);
    handshake(server, transport, signals, timeout).await
}

async fn handshake<T, E, A>(
    server: &str,
    transport: T,
    signals: Arc<Signals>,
    timeout: Duration,
) -> Result<Arc<dyn Connection>, McpError>
where
    T: rmcp::transport::IntoTransport<RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    let handler = Handler {
        signals,
        server: server.to_owned(),
    };
    let failed = |reason: String| McpError::Handshake {
        server: server.to_owned(),
        reason,
    };
    let ct = tokio_util::sync::CancellationToken::new();
    let service =
        match tokio::time::timeout(timeout, handler.serve_with_ct(transport, ct.clone())).await {
            Ok(Ok(service)) => service,
            Ok(Err(err)) => return Err(failed(err.to_string())),
            Err(_) => {
                ct.cancel();
                return Err(failed(format!(
                    "no answer to `initialize` within {} s",
                    timeout.as_secs()
                )));
            }
        };
    let peer = service.peer().clone();
    // Answers are never served from a cache: a server that went away must show as gone.
    peer.set_response_cache_config(rmcp::ClientCacheConfig::disabled())
        .await;
    Ok(Arc::new(SdkConnection {
        server: server.to_owned(),
        peer,
        timeout,
        service: tokio::sync::Mutex::new(Some(service)),
    }))
}

/// Sends `notifications/cancelled` for a request whose caller stopped waiting, unless
/// disarmed by the answer arriving.
struct CancelOnDrop {
    peer: ServerSink,
    id: Option<RequestId>,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        let Some(id) = self.id.take() else { return };
        let peer = self.peer.clone();
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let params = CancelledNotificationParam::new(
                    Some(id),
                    Some("the agent's turn was interrupted".into()),
                );
                if let Err(err) = peer.notify_cancelled(params).await {
                    tracing::debug!(%err, "could not send notifications/cancelled");
                }
            });
        }
    }
}

impl SdkConnection {
    async fn request(&self, request: ClientRequest) -> Result<Value, McpError> {
        let options = PeerRequestOptions::with_timeout(self.timeout)
            .reset_timeout_on_progress()
            .with_max_total_timeout(self.timeout * MAX_TOTAL_FACTOR);
        let handle = self
            .peer
            .send_request_with_option(request, options)
            .await
            .map_err(|e| self.error(e))?;
        let mut guard = CancelOnDrop {
            peer: self.peer.clone(),
            id: Some(handle.id.clone()),
        };
        let answer = handle.await_response().await;
        guard.id = None;
        let answer = answer.map_err(|e| self.error(e))?;
        serde_json::to_value(answer).map_err(|e| McpError::Protocol {
            server: self.server.clone(),
            reason: e.to_string(),
        })
    }

    /// Follows `nextCursor` through every page of a listing.
    async fn pages(
        &self,
        request: impl Fn(PaginatedRequestParams) -> ClientRequest,
        mut each: impl FnMut(&Value) -> Option<String>,
    ) -> Result<(), McpError> {
        let mut cursor = None;
        for _ in 0..MAX_PAGES {
            let params = PaginatedRequestParams::default().with_cursor(cursor);
            let page = self.request(request(params)).await?;
            cursor = each(&page);
            if cursor.is_none() {
                return Ok(());
            }
        }
        tracing::warn!(server = %self.server, "stopped listing after {MAX_PAGES} pages");
        Ok(())
    }

    fn error(&self, err: ServiceError) -> McpError {
        let server = self.server.clone();
        match err {
            ServiceError::McpError(data) => McpError::Refused {
                server,
                code: data.code.0,
                message: data.message.into_owned(),
            },
            ServiceError::TransportClosed => McpError::Closed {
                server,
                reason: "the server went away".into(),
            },
            ServiceError::TransportSend(err) => McpError::Closed {
                server,
                reason: format!("sending failed: {err}"),
            },
            ServiceError::Timeout { timeout } => McpError::Timeout {
                server,
                secs: timeout.as_secs(),
            },
            ServiceError::Cancelled { .. } => McpError::Cancelled(server),
            other => McpError::Protocol {
                server,
                reason: other.to_string(),
            },
        }
    }
}

#[async_trait]
impl Connection for SdkConnection {
    async fn list_tools(
        &self,
        limit: usize,
    ) -> Result<(Vec<ToolInfo>, usize, Vec<String>), McpError> {
        let mut tools = Vec::new();
        let mut total = 0;
        let mut warnings = Vec::new();
        self.pages(
            |p| ClientRequest::ListToolsRequest(ListToolsRequest::with_param(p)),
            |page| {
                let (more, skipped, next) = wire::tools_page(page);
                total += more.len();
                let room = limit.saturating_sub(tools.len());
                tools.extend(more.into_iter().take(room));
                warnings.extend(skipped);
                // Enough read: the rest would only be counted, at the cost of its pages.
                next.filter(|_| tools.len() < limit)
            },
        )
        .await?;
        Ok((tools, total, warnings))
    }

    async fn call_tool(
        &self,
        name: &str,
        args: Map<String, Value>,
    ) -> Result<CallResult, McpError> {
        let params = CallToolRequestParams::new(name.to_owned()).with_arguments(args);
        let answer = self
            .request(ClientRequest::CallToolRequest(CallToolRequest::new(params)))
            .await?;
        Ok(wire::call_result(&answer))
    }

    async fn list_resources(&self) -> Result<Vec<ResourceInfo>, McpError> {
        let mut all = Vec::new();
        self.pages(
            |p| ClientRequest::ListResourcesRequest(ListResourcesRequest::with_param(p)),
            |page| {
                let (more, next) = wire::resources_page(page);
                all.extend(more);
                next
            },
        )
        .await?;
        Ok(all)
    }

    async fn read_resource(&self, uri: &str) -> Result<Vec<ResourceContents>, McpError> {
        let params = ReadResourceRequestParams::new(uri.to_owned());
        let answer = self
            .request(ClientRequest::ReadResourceRequest(
                ReadResourceRequest::new(params),
            ))
            .await?;
        Ok(wire::resource_contents(&answer))
    }

    async fn list_prompts(&self) -> Result<Vec<PromptInfo>, McpError> {
        let mut all = Vec::new();
        self.pages(
            |p| ClientRequest::ListPromptsRequest(ListPromptsRequest::with_param(p)),
            |page| {
                let (more, next) = wire::prompts_page(page);
                all.extend(more);
                next
            },
        )
        .await?;
        Ok(all)
    }

    async fn get_prompt(
        &self,
        name: &str,
        args: Map<String, Value>,
    ) -> Result<PromptMessages, McpError> {
        let params = GetPromptRequestParams::new(name.to_owned()).with_arguments(args);
        let answer = self
            .request(ClientRequest::GetPromptRequest(GetPromptRequest::new(
                params,
            )))
            .await?;
        Ok(wire::prompt_messages(&answer))
    }

    fn is_closed(&self) -> bool {
        self.peer.is_transport_closed()
    }

    async fn close(&self) {
        if let Some(mut service) = self.service.lock().await.take()
            && let Ok(None) = service.close_with_timeout(Duration::from_secs(2)).await
        {
            tracing::debug!(server = %self.server, "the session did not close in time");
        }
    }
}
