//! reef-server: the daemon's HTTP API on axum — REST for agents, messages, rooms, questions
//! and approvals, sessions and events, routines and jobs, the channels' states, an OpenAI-compatible chat
//! endpoint, inbound webhooks, an SSE event stream, Prometheus `/metrics`, bearer-token auth
//! on every route (the root token, or scoped tokens with per-token rate limits), a `Host`
//! check against DNS rebinding, optional TLS, and an OpenAPI document generated from the
//! same route table as the router.

mod audit;
mod auth;
mod channel_hooks;
mod channels;
mod debug;
mod dto;
mod error;
mod extract;
mod handlers;
mod hooks;
mod host;
mod mcp;
mod memory;
mod metrics;
mod openai;
mod openapi;
pub mod quic;
mod routes;
mod routines;
mod scope;
mod sse;
pub mod tls;

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

/// The router: every API route, `/mcp` and `/metrics` behind a bearer token whose scope
/// reaches the route (rate-limited per token) and addressed to one of the daemon's names, the
/// webhooks, and the dashboard; every request that may change something is recorded in the
/// audit log. `token` is the root token; `addr` is where the daemon listens.
pub fn router(runtime: Runtime, token: &str, addr: std::net::SocketAddr) -> Router {
    let daemon = &runtime.config().daemon;
    let own = host::own_names(addr, &daemon.hosts, daemon.tls.is_some());
    let keys = Arc::new(auth::Keys::new(token, daemon));
    let logins = Arc::new(reef_dashboard::Logins::new(token));
    let dashboard = reef_dashboard::router(runtime.clone(), logins.clone(), own.clone());
    let gate = |access, path: &str| {
        axum::middleware::from_fn_with_state(scope::Gate::new(access, path), scope::require)
    };
    let mut router: Router<AppState> = Router::new();
    for route in routes::table() {
        let access = scope::Access::of(route.id, route.method);
        router = router.route(
            route.path,
            route.handler.route_layer(gate(access, route.path)),
        );
    }
    let metrics = axum::routing::get(metrics::metrics);
    let (behind_token, public) = if runtime.config().metrics.public {
        (Router::new(), Router::new().route("/metrics", metrics))
    } else {
        let gated = metrics.route_layer(gate(scope::Access::Read, "/metrics"));
        (Router::new().route("/metrics", gated), Router::new())
    };
    let audited = runtime.clone();
    let api = router
        .merge(mcp::router(runtime.clone(), &own).route_layer(gate(scope::Access::Operate, "/mcp")))
        .merge(behind_token)
        .route(
            "/v1/openapi.json",
            axum::routing::get(|| async { axum::Json(openapi::document()) }),
        )
        .layer(axum::middleware::from_fn_with_state(
            (keys, runtime.clone()),
            auth::require_token,
        ))
        .merge(public)
        .layer(axum::middleware::from_fn_with_state(
            Arc::new(own),
            host::own_host,
        ));
    api.merge(hooks_router(&runtime))
        .with_state(AppState {
            runtime,
            hook_refusals: Arc::default(),
            logins,
            addr,
        })
        .merge(dashboard)
        .layer(axum::middleware::from_fn_with_state(audited, audit::record))
}

/// `POST /hooks/NAME`, a Telegram channel's `POST /hooks/telegram/NAME` and a Slack one's
/// `POST /hooks/slack/NAME`, outside the
/// bearer token (a delivery's signature or secret authenticates it), with bodies up to
/// `hooks.max_body`.
fn hooks_router(runtime: &Runtime) -> Router<AppState> {
    let limit = usize::try_from(runtime.config().hooks.max_body).unwrap_or(usize::MAX);
    Router::new()
        .route("/hooks/{name}", axum::routing::post(hooks::deliver))
        .route(
            "/hooks/telegram/{name}",
            axum::routing::post(channel_hooks::telegram),
        )
        .route(
            "/hooks/slack/{name}",
            axum::routing::post(channel_hooks::slack),
        )
        .layer(axum::extract::DefaultBodyLimit::max(limit))
}

/// Serves `router` on `listener` (over TLS with `tls`) until `shutdown` completes, then
/// finishes open requests.
pub async fn serve(
    listener: tokio::net::TcpListener,
    router: Router,
    tls: Option<&tls::TlsSetup>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    use axum::serve::ListenerExt as _;
    // The client's address is known to handlers (the dashboard's sign-in lockout).
    let service = router.into_make_service_with_connect_info::<std::net::SocketAddr>();
    match tls {
        Some(tls) => {
            let listener = tls::TlsListener::new(listener, tls)?.tap_io(|_| {});
            axum::serve(listener, service)
                .with_graceful_shutdown(shutdown)
                .await
        }
        None => {
            // Answers are often written in small pieces (an SSE event, then the next):
            // without TCP_NODELAY each can wait for the client's delayed acknowledgement.
            let listener = listener.tap_io(|tcp| {
                if let Err(err) = tcp.set_nodelay(true) {
                    tracing::debug!(%err, "cannot set TCP_NODELAY");
                }
            });
            axum::serve(listener, service)
                .with_graceful_shutdown(shutdown)
                .await
        }
    }
}
