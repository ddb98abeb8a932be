//! reef-server: the daemon's HTTP API on axum — REST for agents, messages, rooms, questions
//! and approvals, sessions and events, routines and jobs, the channels' states, an OpenAI-compatible chat
//! endpoint, inbound webhooks, an SSE event stream, Prometheus `/metrics`, bearer-token auth
//! on every route,
//! and an OpenAPI document generated from the same route table as the router.

mod audit;
mod auth;
mod channels;
mod debug;
mod dto;
mod error;
mod extract;
mod handlers;
mod hooks;
mod mcp;
mod metrics;
mod openai;
mod openapi;
mod routes;
mod routines;
mod sse;

pub use auth::load_or_create_token;
pub use error::ApiError;
pub use openapi::document as openapi_document;

use axum::Router;
use reef_runtime::Runtime;
use std::sync::Arc;

/// What every handler gets.
#[derive(Clone)]
pub struct AppState {
    pub runtime: Runtime,
    /// When each hook last recorded a refusal, and how many it held since.
    pub(crate) hook_refusals: Arc<hooks::Refusals>,
    /// The dashboard's sessions and login links.
    pub(crate) logins: Arc<reef_dashboard::Logins>,
    /// Where the daemon listens (for the links it hands out).
    pub(crate) addr: std::net::SocketAddr,
}

/// The router: every API route and `/mcp` behind the bearer token `token`, and the webhooks;
/// every request that may change something is recorded in the audit log.
/// `addr` is where the daemon listens: `/mcp` answers only requests addressed to it.
pub fn router(runtime: Runtime, token: &str, addr: std::net::SocketAddr) -> Router {
    let logins = Arc::new(reef_dashboard::Logins::new(token));
    let own = own_names(addr);
    let dashboard = reef_dashboard::router(runtime.clone(), logins.clone(), own.clone());
    let mut router: Router<AppState> = Router::new();
    for route in routes::table() {
        router = router.route(route.path, route.handler);
    }
    let token = auth::Token(Arc::from(token));
    let metrics = Router::new().route("/metrics", axum::routing::get(metrics::metrics));
    let (behind_token, public) = if runtime.config().metrics.public {
        (Router::new(), metrics)
    } else {
        (metrics, Router::new())
    };
    let audited = runtime.clone();
    router
        .merge(mcp::router(runtime.clone(), &own))
        .merge(behind_token)
        .route(
            "/v1/openapi.json",
            axum::routing::get(|| async { axum::Json(openapi::document()) }),
        )
        .layer(axum::middleware::from_fn_with_state(
            token,
            auth::require_token,
        ))
        .merge(hooks_router(&runtime))
        .merge(public)
        .with_state(AppState {
            runtime,
            hook_refusals: Arc::default(),
            logins,
            addr,
        })
        .merge(dashboard)
        .layer(axum::middleware::from_fn_with_state(audited, audit::record))
}

/// The daemon's own names (its address, and the loopback names when it listens on loopback
/// or on every address), as `Host` values and origins: the dashboard and `/mcp` refuse any
/// other (DNS rebinding, cross-site requests).
fn own_names(addr: std::net::SocketAddr) -> reef_dashboard::Own {
    let port = addr.port();
    let mut names = vec![match addr {
        std::net::SocketAddr::V4(a) => a.ip().to_string(),
        std::net::SocketAddr::V6(a) => format!("[{}]", a.ip()),
    }];
    if addr.ip().is_loopback() || addr.ip().is_unspecified() {
        names.extend(["127.0.0.1", "localhost", "[::1]"].map(String::from));
    }
    names.dedup();
    let mut hosts: Vec<String> = names.iter().map(|n| format!("{n}:{port}")).collect();
    let mut origins: Vec<String> = names.iter().map(|n| format!("http://{n}:{port}")).collect();
    // On port 80 a browser names the host without the port.
    if port == 80 {
        hosts.extend(names.iter().cloned());
        origins.extend(names.iter().map(|n| format!("http://{n}")));
    }
    reef_dashboard::Own {
        hosts,
        origins,
        port,
    }
}

/// `POST /hooks/NAME`, outside the bearer token (a delivery's signature authenticates it),
/// with bodies up to `hooks.max_body`.
fn hooks_router(runtime: &Runtime) -> Router<AppState> {
    let limit = usize::try_from(runtime.config().hooks.max_body).unwrap_or(usize::MAX);
    Router::new()
        .route("/hooks/{name}", axum::routing::post(hooks::deliver))
        .layer(axum::extract::DefaultBodyLimit::max(limit))
}

/// Serves `router` on `listener` until `shutdown` completes, then finishes open requests.
pub async fn serve(
    listener: tokio::net::TcpListener,
    router: Router,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    use axum::serve::ListenerExt as _;
    // Answers are often written in small pieces (an SSE event, then the next): without
    // TCP_NODELAY each can wait for the client's delayed acknowledgement.
    let listener = listener.tap_io(|tcp| {
        if let Err(err) = tcp.set_nodelay(true) {
            tracing::debug!(%err, "cannot set TCP_NODELAY");
        }
    });
    // The client's address is known to handlers (the dashboard's sign-in lockout).
    let service = router.into_make_service_with_connect_info::<std::net::SocketAddr>();
    axum::serve(listener, service)
        .with_graceful_shutdown(shutdown)
        .await
}
