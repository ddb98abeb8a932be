//! What every dashboard request passes through: the `Host` and `Origin` must be the
//! daemon's own (DNS rebinding, cross-site requests), a session cookie for everything but
//! the login and the assets, a CSRF token on every state-changing request, and security
//! headers (a strict Content-Security-Policy among them) on every answer.

use crate::Dash;
use crate::auth::{Session, same};
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

/// The header htmx sends the CSRF token in (set once on `<body>`).
pub const CSRF_HEADER: &str = "x-csrf-token";

/// The policy: scripts, styles and connections only from the daemon itself; nothing inline.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
                       img-src 'self' data:; connect-src 'self'; form-action 'self'; \
                       frame-ancestors 'none'; base-uri 'none'";

/// The daemon's own names, as `Host` values and as origins, and its port.
#[derive(Clone, Debug, Default)]
pub struct Own {
    pub hosts: Vec<String>,
    pub origins: Vec<String>,
    pub port: u16,
}

impl Own {
    /// The session cookie's name. Browsers send a cookie to every port of a host, so the
    /// name carries the daemon's port: two daemons on one machine keep their own sessions.
    /// (Any other server on the same host name still receives it: the session is only as
    /// private as the host's other ports.)
    pub fn cookie(&self) -> String {
        format!("reef_session_{}", self.port)
    }
}

/// The address a request came from (unspecified when the server does not say).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Client(pub IpAddr);

/// Refuses requests addressed to another name or sent from another origin.
pub(crate) async fn own_origin(State(d): State<Dash>, mut req: Request, next: Next) -> Response {
    let headers = req.headers();
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
    if !host.is_some_and(|h| d.own.hosts.iter().any(|o| o.eq_ignore_ascii_case(h))) {
        return refuse(
            StatusCode::FORBIDDEN,
            "this address is not the daemon's own",
        );
    }
    let origin = headers.get(header::ORIGIN).and_then(|h| h.to_str().ok());
    let changes = !matches!(*req.method(), Method::GET | Method::HEAD);
    match origin {
        Some(o) if !d.own.origins.iter().any(|own| own.eq_ignore_ascii_case(o)) => {
            return refuse(
                StatusCode::FORBIDDEN,
                "requests from other sites are refused",
            );
        }
        None if changes => {
            return refuse(StatusCode::FORBIDDEN, "a change needs the page's Origin");
        }
        _ => {}
    }
    let client = req
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |c| c.0.ip());
    req.extensions_mut().insert(Client(client));
    next.run(req).await
}

/// Needs a live session; a change also needs the session's CSRF token.
pub(crate) async fn signed_in(State(d): State<Dash>, mut req: Request, next: Next) -> Response {
    let session = cookie(req.headers(), &d.own.cookie()).and_then(|id| d.logins.session(id));
    let Some(session) = session else {
        let page = req.method() == Method::GET && !req.headers().contains_key("hx-request");
        return if page {
            Redirect::to("/login").into_response()
        } else {
            refuse(
                StatusCode::UNAUTHORIZED,
                "signed out: reload the page to sign in",
            )
        };
    };
    if !matches!(*req.method(), Method::GET | Method::HEAD) {
        let sent = req
            .headers()
            .get(CSRF_HEADER)
            .map(HeaderValue::as_bytes)
            .unwrap_or_default();
        if !same(sent, session.csrf.as_bytes()) {
            return refuse(
                StatusCode::FORBIDDEN,
                "the request lacks this page's CSRF token",
            );
        }
    }
    req.extensions_mut().insert::<Session>(session);
    let mut response = next.run(req).await;
    response.extensions_mut().insert(Authenticated("dashboard"));
    response
}

/// Put on a response by whatever authenticated its request (a dashboard session, a sign-in,
/// the API's bearer token), naming how: the audit log records only such requests, so nobody
/// unauthenticated can write to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Authenticated(pub &'static str);

/// Security headers on every answer; pages are never cached.
pub(crate) async fn headers(req: Request, next: Next) -> Response {
    let mut res = next.run(req).await;
    let h = res.headers_mut();
    // A page may set a policy of its own (the terminal's); every other answer gets the strict one.
    h.entry(header::CONTENT_SECURITY_POLICY)
        .or_insert(HeaderValue::from_static(CSP));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    // Not `no-referrer`: under it a browser sends `Origin: null` with a form's POST.
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    h.entry(header::CACHE_CONTROL)
        .or_insert(HeaderValue::from_static("no-store"));
    res
}

/// The value of cookie `name`.
pub(crate) fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

/// The `Set-Cookie` value for `session`; `Secure` when the page was loaded over TLS.
pub(crate) fn session_cookie(own: &Own, session: &Session, secure: bool) -> String {
    let secs = crate::auth::SESSION_LIFETIME.as_secs();
    let secure = if secure { "; Secure" } else { "" };
    format!(
        "{}={}; Path=/; HttpOnly; SameSite=Strict; Max-Age={secs}{secure}",
        own.cookie(),
        session.id
    )
}

/// The `Set-Cookie` value that ends the session in the browser.
pub(crate) fn cleared_cookie(own: &Own) -> String {
    format!(
        "{}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0",
        own.cookie()
    )
}

/// Whether the page was loaded over TLS (its `Origin` says so).
pub(crate) fn over_tls(headers: &HeaderMap) -> bool {
    headers
        .get(header::ORIGIN)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("https://"))
}

fn refuse(status: StatusCode, why: &'static str) -> Response {
    (status, why).into_response()
}
