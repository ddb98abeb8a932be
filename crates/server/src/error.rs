//! API errors: every failure is JSON `{"error": "...", "field": ...}` with a status that
//! says what to do — 400 fix the request, 401 send the token, 403 use a token whose scope
//! allows it, 404 check the name, 409 read the current state, 429 wait `Retry-After`
//! seconds, 503 retry later, 500 look at the daemon's log.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use reef_runtime::RuntimeError;
use reef_store::StoreError;
use serde_json::json;

/// A failed request.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
    pub field: Option<String>,
    /// Seconds to wait, sent as `Retry-After` (a rate limit's refusal).
    pub retry_after: Option<u64>,
}

impl ApiError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            message: message.into(),
            field: None,
            retry_after: None,
        }
    }

    pub fn invalid(field: &str, message: impl Into<String>) -> ApiError {
        ApiError {
            status: StatusCode::BAD_REQUEST,
            message: format!("{field}: {}", message.into()),
            field: Some(field.to_owned()),
            retry_after: None,
        }
    }
}

impl From<RuntimeError> for ApiError {
    fn from(err: RuntimeError) -> ApiError {
        let status = match &err {
            RuntimeError::NotFound(_) => StatusCode::NOT_FOUND,
            RuntimeError::Invalid { .. } => StatusCode::BAD_REQUEST,
            RuntimeError::Conflict(_) => StatusCode::CONFLICT,
            RuntimeError::Denied(_) => StatusCode::FORBIDDEN,
            RuntimeError::ShuttingDown => StatusCode::SERVICE_UNAVAILABLE,
            // The database cannot be reached for now: nothing was taken; send it again later.
            RuntimeError::Store(store) if store.is_unavailable() => StatusCode::SERVICE_UNAVAILABLE,
            RuntimeError::Store(_) | RuntimeError::Setup(_) | RuntimeError::Cluster(_) => {
                StatusCode::INTERNAL_SERVER_ERROR
            }
        };
        let field = match &err {
            RuntimeError::Invalid { field, .. } => Some(field.clone()),
            _ => None,
        };
        ApiError {
            status,
            message: err.to_string(),
            field,
            retry_after: (status == StatusCode::SERVICE_UNAVAILABLE).then_some(1),
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(err: StoreError) -> ApiError {
        RuntimeError::from(err).into()
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if self.status.is_server_error() {
            tracing::warn!(status = %self.status, error = %self.message, "API request failed");
        }
        let mut response = (
            self.status,
            Json(json!({"error": self.message, "field": self.field})),
        )
            .into_response();
        if let Some(secs) = self.retry_after {
            response
                .headers_mut()
                .insert(axum::http::header::RETRY_AFTER, secs.into());
        }
        response
    }
}
