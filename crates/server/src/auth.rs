//! Bearer-token auth: the root token is created on first start in `$REEF_HOME/api-token`
//! with mode 0600 and compared in constant time; scoped tokens (`reef token create`) are
//! found by their hash in the store, and a revoked one is refused at its next request. Each
//! token's requests are counted in a sliding minute, and past its limit refused with 429.

use crate::error::ApiError;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;
use reef_runtime::Runtime;
use reef_security::api_token::{Scope, SlidingWindow, TOKEN_PREFIX, token_hash};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

/// Reads the token at `path`, or creates it (64 hex digits from the OS's randomness) with
/// mode 0600. A token file readable by others is refused: anyone who can read it controls
/// the daemon.
pub fn load_or_create_token(path: &Path) -> std::io::Result<String> {
    match std::fs::read_to_string(path) {
        Ok(text) => {
            let mode = std::fs::metadata(path)?.permissions().mode();
            if mode & 0o077 != 0 {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::PermissionDenied,
                    format!(
                        "{} is readable by other users (mode {:o}); run `chmod 600 {}`",
                        path.display(),
                        mode & 0o777,
                        path.display()
                    ),
                ));
            }
            let token = text.trim().to_owned();
            if token.len() < 32 {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!(
                        "{} holds a token shorter than 32 characters",
                        path.display()
                    ),
                ));
            }
            Ok(token)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir)?;
            }
            let mut bytes = [0u8; 32];
            std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
            let token: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(path)?;
            file.write_all(token.as_bytes())?;
            file.write_all(b"\n")?;
            Ok(token)
        }
        Err(e) => Err(e),
    }
}

/// Who may call: the root token, and the scoped tokens kept (by hash) in the store, each
/// with its own window of recent requests.
pub(crate) struct Keys {
    root: Arc<str>,
    root_rate: Option<u32>,
    default_rate: Option<u32>,
    windows: Mutex<HashMap<String, SlidingWindow>>,
}

impl Keys {
    pub(crate) fn new(root: &str, daemon: &reef_config::DaemonConfig) -> Keys {
        Keys {
            root: Arc::from(root),
            root_rate: daemon.root_rate_limit,
            default_rate: daemon.rate_limit,
            windows: Mutex::default(),
        }
    }
}

/// The caller of a request that passed the token check: which token, and what it may do.
/// Handlers that narrow what they return (an `agent:NAME` token sees its agent only) read it
/// from the request's extensions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Grant {
    /// `root`, or a scoped token's id.
    pub id: String,
    /// `root`, or a scoped token's name.
    pub name: String,
    pub scope: Scope,
}

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for Grant {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        _state: &S,
    ) -> Result<Grant, ApiError> {
        parts.extensions.get::<Grant>().cloned().ok_or_else(|| {
            ApiError::new(
                StatusCode::FORBIDDEN,
                "this request carries no checked token",
            )
        })
    }
}

impl Grant {
    /// Whether this token is limited to one agent other than `agent`.
    pub(crate) fn excludes(&self, agent: &str) -> bool {
        self.scope.agent().is_some_and(|own| own != agent)
    }

    /// The agent filter a request about events may use: an `agent:NAME` token's own agent,
    /// whatever else it asked for is refused.
    pub(crate) fn narrow_agent(&self, asked: Option<&str>) -> Result<Option<String>, ApiError> {
        match (self.scope.agent(), asked) {
            (None, asked) => Ok(asked.map(str::to_owned)),
            (Some(own), None) => Ok(Some(own.to_owned())),
            (Some(own), Some(asked)) if asked == own => Ok(Some(own.to_owned())),
            (Some(own), Some(asked)) => Err(ApiError::new(
                StatusCode::FORBIDDEN,
                format!(
                    "token `{}` (scope agent:{own}) cannot see agent {asked}'s events",
                    self.name
                ),
            )),
        }
    }
}

pub(crate) async fn require_token(
    State((keys, runtime)): State<(Arc<Keys>, Runtime)>,
    mut request: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let given = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    let Some(given) = given else {
        return Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "missing `Authorization: Bearer <token>`; the token is in $REEF_HOME/api-token",
        ));
    };
    let (grant, rate) = check(&keys, runtime.store(), given).await?;
    if let Some(rate) = rate {
        admit(&keys, &grant, rate)?;
    }
    request.extensions_mut().insert(grant.clone());
    let mut response = next.run(request).await;
    response
        .extensions_mut()
        .insert(reef_dashboard::Authenticated("api token"));
    response.extensions_mut().insert(grant);
    Ok(response)
}

/// The grant of token text `given` (the root token, or a scoped token not revoked) and its
/// rate limit per minute, or why it is refused (401).
pub(crate) async fn check(
    keys: &Keys,
    store: &reef_store::Store,
    given: &str,
) -> Result<(Grant, Option<u32>), ApiError> {
    let checked = if constant_time_eq(given.as_bytes(), keys.root.as_bytes()) {
        let grant = Grant {
            id: "root".into(),
            name: "root".into(),
            scope: Scope::Operator,
        };
        (grant, keys.root_rate)
    } else {
        let found = match given.starts_with(TOKEN_PREFIX) {
            true => store.api_token_by_hash(&token_hash(given)).await?,
            false => None,
        };
        match found {
            Some(token) if token.revoked_at.is_none() => {
                // A token's own 0 means no limit; none of its own, the daemon's default.
                let rate = match token.rate {
                    Some(0) => None,
                    Some(n) => Some(n),
                    None => keys.default_rate,
                };
                let grant = Grant {
                    id: token.id,
                    name: token.name,
                    scope: token.scope,
                };
                (grant, rate)
            }
            Some(token) => {
                return Err(ApiError::new(
                    StatusCode::UNAUTHORIZED,
                    format!("token `{}` was revoked", token.name),
                ));
            }
            None => {
                return Err(ApiError::new(
                    StatusCode::UNAUTHORIZED,
                    "the bearer token is wrong; the root token is in $REEF_HOME/api-token, \
                     `reef token create` makes scoped ones",
                ));
            }
        }
    };
    Ok(checked)
}

/// Counts the request in the token's window, or refuses it with when to retry.
pub(crate) fn admit(keys: &Keys, grant: &Grant, rate: u32) -> Result<(), ApiError> {
    let mut windows = keys.windows.lock().unwrap_or_else(PoisonError::into_inner);
    let window = windows
        .entry(grant.id.clone())
        .or_insert_with(|| SlidingWindow::per_minute(rate));
    window.admit(Instant::now()).map_err(|wait| {
        let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
        let mut err = ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            format!(
                "token `{}` made {rate} requests in the last minute, its limit; retry in {secs} s",
                grant.name
            ),
        );
        err.retry_after = Some(secs.max(1));
        err
    })
}

pub(crate) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
