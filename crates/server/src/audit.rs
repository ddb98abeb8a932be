//! Operator requests in the audit log: every request that may change something (any method
//! but GET, HEAD and OPTIONS) and that an authentication layer vouched for (the bearer
//! token, a dashboard session, a successful sign-in: `reef_dashboard::Authenticated` on the
//! response) is recorded as `api.request` with its method, path (never the query or body,
//! which may hold tokens), status, client and API token, for the HTTP API, the dashboard and `/mcp`
//! alike. It is written after the handler ran; a failed write is logged. Webhook deliveries
//! have their own events.

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::Response;
use reef_runtime::Runtime;
use std::net::SocketAddr;

pub(crate) async fn record(
    State(runtime): State<Runtime>,
    request: Request,
    next: Next,
) -> Response {
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let client = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip().to_string());
    let response = next.run(request).await;
    let status = response.status();
    // Only what an authentication layer vouched for: nobody without a token or a session can
    // write to the log.
    let Some(reef_dashboard::Authenticated(by)) = response.extensions().get().copied() else {
        return response;
    };
    if !recorded(&method, status) {
        return response;
    }
    let front = if path.starts_with("/v1/") {
        "api"
    } else if path == "/mcp" {
        "mcp"
    } else {
        "dashboard"
    };
    // Which API token: `root`, or a scoped token's name and id.
    let token = response
        .extensions()
        .get::<crate::auth::Grant>()
        .map(|g| serde_json::json!({"name": g.name, "id": g.id, "scope": g.scope.to_string()}));
    let data = serde_json::json!({
        "front": front,
        "by": by,
        "token": token,
        "method": method.as_str(),
        "path": path,
        "status": status.as_u16(),
        "client": client,
    });
    if let Err(err) = runtime
        .store()
        .append_audit("api.request", agent_in(&path), data)
        .await
    {
        tracing::warn!(error = %err, %path, "cannot record an operator request in the audit log");
    }
    response
}

fn recorded(method: &Method, status: StatusCode) -> bool {
    !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
        && status != StatusCode::UNAUTHORIZED
        && status != StatusCode::FORBIDDEN
}

/// The agent a path is about: `/v1/agents/NAME/…` or the dashboard's `/agents/NAME/…`.
fn agent_in(path: &str) -> Option<&str> {
    let rest = path
        .strip_prefix("/v1/agents/")
        .or_else(|| path.strip_prefix("/agents/"))?;
    let name = rest.split('/').next().unwrap_or("");
    (!name.is_empty()).then_some(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn which_requests_are_recorded() {
        assert!(recorded(&Method::POST, StatusCode::CREATED));
        assert!(recorded(&Method::DELETE, StatusCode::OK));
        assert!(recorded(&Method::POST, StatusCode::NOT_FOUND));
        assert!(!recorded(&Method::GET, StatusCode::OK));
        assert!(!recorded(&Method::POST, StatusCode::FORBIDDEN));
        assert!(!recorded(&Method::POST, StatusCode::UNAUTHORIZED));
        assert_eq!(agent_in("/v1/agents/ada/messages"), Some("ada"));
        assert_eq!(agent_in("/agents/bo"), Some("bo"));
        assert_eq!(agent_in("/v1/agents"), None);
        assert_eq!(agent_in("/v1/agents/"), None);
    }
}
