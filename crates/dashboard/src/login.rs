//! Signing in and out: the login form (the API token), one-time links, logout.

use crate::Dash;
use crate::auth::{Refusal, Session};
use crate::guard::{Client, cleared_cookie, cookie, over_tls, session_cookie};
use crate::view::{LoginPage, page};
use axum::Extension;
use axum::extract::{Form, Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;
use std::time::Duration;

/// How long a wrong token waits before its answer (guessing stays slow).
const WRONG_TOKEN_DELAY: Duration = Duration::from_secs(1);

#[derive(Deserialize)]
pub(crate) struct LoginForm {
    token: String,
}

/// `GET /login` (a signed-in browser goes to the overview).
pub(crate) async fn form(State(d): State<Dash>, headers: HeaderMap) -> Response {
    if cookie(&headers, &d.own.cookie()).is_some_and(|id| d.logins.session(id).is_some()) {
        return Redirect::to("/").into_response();
    }
    login_page(StatusCode::OK, None)
}

/// `POST /login`: the API token from the form.
pub(crate) async fn sign_in(
    State(d): State<Dash>,
    Extension(Client(client)): Extension<Client>,
    headers: HeaderMap,
    Form(form): Form<LoginForm>,
) -> Response {
    match d.logins.sign_in(client, &form.token) {
        Ok(session) => signed_in(&d, &session, &headers),
        Err(refusal) => {
            tokio::time::sleep(WRONG_TOKEN_DELAY).await;
            let (status, message) = match refusal {
                Refusal::WrongToken { left } => (
                    StatusCode::UNAUTHORIZED,
                    format!(
                        "That is not the daemon's API token ({left} more tries before this \
                         address is locked out). It is in $REEF_HOME/api-token, or run \
                         `reef dashboard` for a login link."
                    ),
                ),
                Refusal::LockedOut { wait } => (
                    StatusCode::TOO_MANY_REQUESTS,
                    format!(
                        "Too many wrong tokens from this address: try again in {} minutes, \
                         or run `reef dashboard` for a login link.",
                        wait.as_secs().div_ceil(60)
                    ),
                ),
                Refusal::BadLink => (StatusCode::UNAUTHORIZED, "Sign-in failed.".to_owned()),
            };
            tracing::info!(%client, "dashboard sign-in refused");
            login_page(status, Some(message))
        }
    }
}

/// `GET /login/{code}`: a one-time link from `reef dashboard` shows a button; only the
/// button's POST uses the link up (a chat's link preview or a browser's prefetch does not).
pub(crate) async fn link_form(Path(code): Path<String>) -> Response {
    page(&LoginPage {
        message: None,
        link: Some(code),
    })
}

/// `POST /login/{code}`.
pub(crate) async fn follow_link(
    State(d): State<Dash>,
    Path(code): Path<String>,
    headers: HeaderMap,
) -> Response {
    match d.logins.follow_link(&code) {
        Ok(session) => signed_in(&d, &session, &headers),
        Err(_) => login_page(
            StatusCode::UNAUTHORIZED,
            Some(
                "This login link was used already or has expired: run `reef dashboard` for \
                 a new one."
                    .to_owned(),
            ),
        ),
    }
}

/// `POST /logout`.
pub(crate) async fn sign_out(
    State(d): State<Dash>,
    Extension(session): Extension<Session>,
) -> Response {
    d.logins.sign_out(&session.id);
    (
        StatusCode::OK,
        [
            (header::SET_COOKIE, cleared_cookie(&d.own)),
            (
                header::HeaderName::from_static("hx-redirect"),
                "/login".to_owned(),
            ),
        ],
    )
        .into_response()
}

fn signed_in(d: &Dash, session: &Session, headers: &HeaderMap) -> Response {
    let mut response = (
        StatusCode::SEE_OTHER,
        [
            (
                header::SET_COOKIE,
                session_cookie(&d.own, session, over_tls(headers)),
            ),
            (header::LOCATION, "/".to_owned()),
        ],
    )
        .into_response();
    response
        .extensions_mut()
        .insert(crate::guard::Authenticated("dashboard sign-in"));
    response
}

fn login_page(status: StatusCode, message: Option<String>) -> Response {
    (
        status,
        page(&LoginPage {
            message,
            link: None,
        }),
    )
        .into_response()
}
