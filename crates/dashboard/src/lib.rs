//! reef-dashboard: the operator's control room in a browser tab, served by the daemon at `/`.
//! Pages (overview, agent, spawn, costs, events, and a terminal when enabled) are rendered on the server (askama templates, escaped by default) and kept live by
//! fragments sent over SSE (htmx and its SSE extension, vendored); the operator signs in
//! with the API token or a one-time link and holds a cookie session with a CSRF token.

mod actions;
mod assets;
mod auth;
mod chart;
mod costs;
mod events;
mod guard;
mod health;
mod inspect;
mod live;
mod login;
mod pages;
mod terminal;
mod view;

pub use assets::all as assets;
pub use auth::{LINK_LIFETIME, Logins, Refusal, SESSION_LIFETIME, Session};
pub use guard::{Authenticated, CSP, CSRF_HEADER, Own};

use axum::Router;
use axum::middleware::{from_fn, from_fn_with_state};
use axum::routing::{get, post};
use reef_runtime::Runtime;
use std::sync::Arc;

/// What the dashboard's handlers share.
#[derive(Clone)]
pub(crate) struct Dash {
    pub runtime: Runtime,
    pub logins: Arc<Logins>,
    pub own: Arc<Own>,
    /// Terminals open now (at most `terminal::MAX_TERMINALS`).
    pub terminals: Arc<std::sync::atomic::AtomicUsize>,
}

/// The dashboard's routes (`/`, `/login`, `/agents/…`, `/assets/…`), to be merged into the
/// daemon's router. `own` is where the daemon is reached: other `Host`s and `Origin`s get 403.
pub fn router(runtime: Runtime, logins: Arc<Logins>, own: Own) -> Router {
    let dash = Dash {
        runtime,
        logins,
        own: Arc::new(own),
        terminals: Arc::default(),
    };
    let signed_in = Router::new()
        .route("/", get(pages::overview))
        .route("/live", get(live::overview))
        .route("/spawn", get(pages::spawn).post(actions::spawn))
        .route("/costs", get(costs::costs))
        .route("/costs/live", get(live::costs))
        .route("/events", get(events::events))
        .route("/events/live", get(live::events))
        .route("/agents/{name}", get(pages::agent))
        .route("/agents/{name}/live", get(live::agent))
        .route("/agents/{name}/transcript", get(pages::transcript_page))
        .route("/agents/{name}/do/{action}", post(actions::agent))
        .route("/agents/{name}/memory", get(inspect::memory))
        .route("/agents/{name}/memory/{id}/forget", post(inspect::forget))
        .route("/agents/{name}/files", get(inspect::files))
        .route("/agents/{name}/terminal", get(terminal::terminal_page))
        .route("/agents/{name}/terminal/socket", get(terminal::socket))
        .route("/pending/{id}/{action}", post(actions::pending))
        .route("/logout", post(login::sign_out))
        .layer(from_fn_with_state(dash.clone(), guard::signed_in));
    let open = Router::new()
        .route("/login", get(login::form).post(login::sign_in))
        .route(
            "/login/{code}",
            get(login::link_form).post(login::follow_link),
        )
        .route("/assets/{file}", get(assets::serve));
    signed_in
        .merge(open)
        .layer(from_fn_with_state(dash.clone(), guard::own_origin))
        .layer(from_fn(guard::headers))
        .with_state(dash)
}
