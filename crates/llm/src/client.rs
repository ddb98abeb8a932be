//! Building a `ModelClient` from settings, and the reachability probe used by `reef doctor`.

use crate::anthropic::AnthropicClient;
use crate::error::LlmError;
use crate::http::{build_http_client, error_chain, validate_base_url};
use crate::ollama::OllamaClient;
use crate::openai::OpenAiClient;
use crate::retry::{error_excerpt, truncate};
use crate::settings::ProviderSettings;
use reef_core::{ModelClient, ModelError, ModelErrorKind, WireApi};
use std::sync::Arc;

/// The client for the settings' wire API. Fails on an invalid `base_url`, or when an https
/// provider is configured and no trusted root certificates can be loaded.
pub fn build_client(settings: ProviderSettings) -> Result<Arc<dyn ModelClient>, LlmError> {
    Ok(match settings.wire_api {
        WireApi::OpenaiChat => Arc::new(OpenAiClient::new(settings)?),
        WireApi::Anthropic => Arc::new(AnthropicClient::new(settings)?),
        WireApi::Ollama => Arc::new(OllamaClient::new(settings)?),
        WireApi::Local => local_client(settings)?,
    })
}

/// The embedded model for a `WireApi::Local` provider.
#[cfg(feature = "local")]
fn local_client(settings: ProviderSettings) -> Result<Arc<dyn ModelClient>, LlmError> {
    let error = |message: String| LlmError::Local {
        provider: settings.name.clone(),
        message,
    };
    let local = settings
        .local
        .clone()
        .ok_or_else(|| error("no model_path is set".into()))?;
    let client = reef_local::LocalClient::new(reef_local::LocalSettings {
        provider: settings.name.clone(),
        model: settings.model.clone(),
        model_path: local.model_path,
        threads: local.threads,
        context_tokens: settings.context_tokens,
        max_output_tokens: settings.max_output_tokens,
        sampling: settings.sampling,
    });
    Ok(Arc::new(client))
}

#[cfg(not(feature = "local"))]
fn local_client(settings: ProviderSettings) -> Result<Arc<dyn ModelClient>, LlmError> {
    Err(LlmError::Local {
        provider: settings.name,
        message: "this reef was built without the `local` feature (embedded models)".into(),
    })
}

/// Probes a provider with `GET {base_url}/models` (cheap on both wire APIs, no tokens spent).
/// Any HTTP answer counts as reachable and is described briefly, except 401/403, which is an
/// `Auth` error; failing to connect or to answer within `request_timeout` is an error too.
pub async fn check_reachable(settings: &ProviderSettings) -> Result<String, ModelError> {
    let err = |kind, msg: String| ModelError::new(settings.name.clone(), kind, msg);
    if settings.wire_api == WireApi::Local {
        // In-process: "reachable" means the model file is there.
        let path = settings.local.as_ref().map(|l| l.model_path.clone());
        return match path {
            Some(path) if path.is_file() => {
                let size = std::fs::metadata(&path).map_or(0, |m| m.len());
                Ok(format!(
                    "{} ({} MB, in-process)",
                    path.display(),
                    size / 1_000_000
                ))
            }
            Some(path) => Err(err(
                ModelErrorKind::NotFound,
                format!(
                    "{} is missing; fetch it with `reef models pull {}`",
                    path.display(),
                    settings.model
                ),
            )),
            None => Err(err(ModelErrorKind::NotFound, "no model_path is set".into())),
        };
    }
    let url =
        validate_base_url(settings).map_err(|e| err(ModelErrorKind::BadRequest, e.to_string()))?;
    let client = build_http_client(Some(settings.request_timeout), url.scheme() == "https")
        .map_err(|e| err(ModelErrorKind::Connection, e.to_string()))?;
    let endpoint = match settings.wire_api {
        // Ollama lists its local models at /api/tags.
        WireApi::Ollama => settings.endpoint("/api/tags"),
        _ => settings.endpoint("/models"),
    };
    let mut request = client.get(&endpoint);
    match (settings.wire_api, &settings.api_key) {
        (WireApi::OpenaiChat, Some(key)) => {
            request = request.header("authorization", format!("Bearer {key}"));
        }
        (WireApi::Anthropic, key) => {
            request = request.header("anthropic-version", "2023-06-01");
            if let Some(key) = key {
                request = request.header("x-api-key", key);
            }
        }
        (WireApi::OpenaiChat | WireApi::Ollama | WireApi::Local, None) => {}
        (WireApi::Ollama | WireApi::Local, Some(key)) => {
            request = request.header("authorization", format!("Bearer {key}"));
        }
    }
    let response = request.send().await.map_err(|e| {
        let kind = if e.is_timeout() {
            ModelErrorKind::Timeout
        } else {
            ModelErrorKind::Connection
        };
        err(kind, format!("{endpoint}: {}", error_chain(&e)))
    })?;
    let status = response.status().as_u16();
    if matches!(status, 401 | 403) {
        let body = response.text().await.unwrap_or_default();
        return Err(err(ModelErrorKind::Auth, error_excerpt(&body)).with_status(status));
    }
    let mut description = format!("{endpoint} answered HTTP {status}");
    if status == 200
        && let Ok(json) = response.json::<serde_json::Value>().await
        && let Some(models) = json
            .get("data")
            .or_else(|| json.get("models"))
            .and_then(serde_json::Value::as_array)
        && !models.is_empty()
    {
        let names: Vec<&str> = models
            .iter()
            .filter_map(|m| {
                m.get("id")
                    .or_else(|| m.get("name"))
                    .and_then(serde_json::Value::as_str)
            })
            .take(5)
            .collect();
        description.push_str(&format!(
            " ({} models: {}{})",
            models.len(),
            truncate(&names.join(", "), 120),
            if models.len() > names.len() {
                ", …"
            } else {
                ""
            }
        ));
    }
    Ok(description)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_client_rejects_bad_base_url_and_names_provider() {
        let settings = ProviderSettings {
            name: "backup".into(),
            base_url: "localhost:8080".into(),
            ..ProviderSettings::default()
        };
        let err = build_client(settings).err().map(|e| e.to_string()).unwrap();
        assert!(
            err.contains("`backup`") && err.contains("localhost:8080"),
            "{err}"
        );
    }

    #[test]
    fn build_client_reports_provider_and_model() {
        let settings = ProviderSettings {
            wire_api: WireApi::Anthropic,
            model: "claude-x".into(),
            ..ProviderSettings::default()
        };
        let client = build_client(settings).unwrap();
        assert_eq!(client.provider(), "main");
        assert_eq!(client.model(), "claude-x");
    }
}
