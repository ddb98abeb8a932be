//! Bearer-token auth: the token is created on first start in `$REEF_HOME/api-token` with
//! mode 0600, and every route checks `Authorization: Bearer <token>` in constant time.

use crate::error::ApiError;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;
use std::io::{Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::sync::Arc;

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

/// The expected token, shared by every request.
#[derive(Clone)]
pub struct Token(pub Arc<str>);

pub async fn require_token(
    State(token): State<Token>,
    request: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let given = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    match given {
        Some(given) if constant_time_eq(given.as_bytes(), token.0.as_bytes()) => {
            let mut response = next.run(request).await;
            response
                .extensions_mut()
                .insert(reef_dashboard::Authenticated("api token"));
            Ok(response)
        }
        Some(_) => Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "the bearer token is wrong; it is in $REEF_HOME/api-token",
        )),
        None => Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "missing `Authorization: Bearer <token>`; the token is in $REEF_HOME/api-token",
        )),
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
