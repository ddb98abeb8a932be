//! Embedders built from settings: an OpenAI-compatible `/embeddings` endpoint, or the
//! in-process model of reef-embed (behind the `embed` feature).

use crate::error::LlmError;
use crate::http::Transport;
use crate::settings::ProviderSettings;
use async_trait::async_trait;
use reef_core::{Embedder, ModelError, ModelErrorKind};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::Arc;

/// Texts sent in one `/embeddings` request.
const HTTP_BATCH: usize = 64;

/// Which embedder to build.
#[derive(Clone, Debug)]
pub enum EmbedderSettings {
    /// Catalogue model `name`, installed in `dir` (`NAME.safetensors` and its companions).
    Local {
        name: String,
        dir: PathBuf,
        threads: usize,
    },
    /// `POST {base_url}/embeddings` of an OpenAI-compatible provider; `provider.model` is the
    /// embedding model.
    Http(ProviderSettings),
}

/// The embedder the settings describe. A local model whose files are missing, or a build
/// without the `embed` feature, is an error: callers fall back to keyword search and say why.
pub fn build_embedder(settings: EmbedderSettings) -> Result<Arc<dyn Embedder>, LlmError> {
    match settings {
        EmbedderSettings::Http(provider) => Ok(Arc::new(HttpEmbedder::new(provider)?)),
        EmbedderSettings::Local { name, dir, threads } => {
            local_embedder(&name, &dir, threads, LocalEngine::fastest())
        }
    }
}

/// Which implementation computes a local model's vectors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LocalEngine {
    /// reef's fused encoder in f32 (the reference's function, to float rounding).
    Fused,
    /// The fused encoder with int8 linear layers, on CPUs with AVX-512 VNNI.
    Int8,
    /// The reference encoder (candle's layers over padded batches), which `reef bench memory`
    /// measures the fused ones against.
    Reference,
}

impl LocalEngine {
    /// What `build_embedder` uses: `Int8` where the CPU has AVX-512 VNNI, `Fused` elsewhere.
    pub fn fastest() -> Self {
        #[cfg(feature = "embed")]
        if reef_embed::Engine::fastest() == reef_embed::Engine::Int8 {
            return Self::Int8;
        }
        Self::Fused
    }

    /// Its name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Self::Fused => "fused f32",
            Self::Int8 => "fused int8",
            Self::Reference => "reference (candle)",
        }
    }
}

/// The local model `name` in `dir` computed by `engine`.
pub fn build_local_embedder(
    name: &str,
    dir: &std::path::Path,
    threads: usize,
    engine: LocalEngine,
) -> Result<Arc<dyn Embedder>, LlmError> {
    local_embedder(name, dir, threads, engine)
}

/// The in-process model, loaded on the first `embed` (a session that never searches memory
/// does not pay for loading it). Until its files are there, every `embed` fails with NotFound
/// naming `reef models pull`, so a long-running process picks the model up once it is pulled.
#[cfg(feature = "embed")]
fn local_embedder(
    name: &str,
    dir: &std::path::Path,
    threads: usize,
    engine: LocalEngine,
) -> Result<Arc<dyn Embedder>, LlmError> {
    let files = reef_embed::ModelFiles::in_dir(dir, name);
    Ok(Arc::new(LazyLocal {
        name: name.to_owned(),
        files,
        threads,
        engine: match engine {
            LocalEngine::Fused => reef_embed::Engine::Fused,
            LocalEngine::Int8 => reef_embed::Engine::Int8,
            LocalEngine::Reference => reef_embed::Engine::Reference,
        },
        loaded: tokio::sync::OnceCell::new(),
    }))
}

#[cfg(feature = "embed")]
struct LazyLocal {
    name: String,
    files: reef_embed::ModelFiles,
    threads: usize,
    engine: reef_embed::Engine,
    loaded: tokio::sync::OnceCell<reef_embed::LocalEmbedder>,
}

#[cfg(feature = "embed")]
#[async_trait]
impl Embedder for LazyLocal {
    fn id(&self) -> &str {
        &self.name
    }

    fn dimensions(&self) -> usize {
        self.loaded.get().map_or(0, Embedder::dimensions)
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, ModelError> {
        if self.loaded.get().is_none()
            && let Some(missing) = self.files.missing()
        {
            return Err(ModelError::new(
                self.name.clone(),
                ModelErrorKind::NotFound,
                format!(
                    "{} is not installed (run `reef models pull {}`)",
                    missing.display(),
                    self.name
                ),
            ));
        }
        let model = self
            .loaded
            .get_or_try_init(|| async {
                let (name, files, threads, engine) = (
                    self.name.clone(),
                    self.files.clone(),
                    self.threads,
                    self.engine,
                );
                tokio::task::spawn_blocking(move || {
                    reef_embed::LocalEmbedder::load_engine(&name, &files, threads, engine)
                })
                .await
                .map_err(|e| e.to_string())?
                .map_err(|e| e.to_string())
            })
            .await
            .map_err(|m| ModelError::new(self.name.clone(), ModelErrorKind::NotFound, m))?;
        model.embed(texts).await
    }
}

#[cfg(not(feature = "embed"))]
fn local_embedder(
    name: &str,
    _dir: &std::path::Path,
    _threads: usize,
    _engine: LocalEngine,
) -> Result<Arc<dyn Embedder>, LlmError> {
    Err(LlmError::Local {
        provider: name.to_owned(),
        message: "this reef was built without the `embed` feature (local embeddings)".into(),
    })
}

/// An OpenAI-compatible embeddings endpoint.
#[derive(Debug)]
pub struct HttpEmbedder {
    transport: Transport,
    id: String,
    dimensions: std::sync::atomic::AtomicUsize,
}

impl HttpEmbedder {
    pub fn new(settings: ProviderSettings) -> Result<Self, LlmError> {
        let id = format!("{}:{}", settings.name, settings.model);
        Ok(Self {
            transport: Transport::new(settings)?,
            id,
            dimensions: std::sync::atomic::AtomicUsize::new(0),
        })
    }

    async fn embed_batch(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, ModelError> {
        let body = json!({"model": self.transport.settings.model, "input": texts});
        let headers = self.transport.bearer_headers();
        let reply = self
            .transport
            .post_for_json("/embeddings", &headers, &body)
            .await?;
        parse_embeddings(&reply, texts.len())
            .map_err(|m| self.transport.error(ModelErrorKind::Malformed, m))
    }
}

/// The vectors of an `/embeddings` reply, put in input order by `index` and normalised.
fn parse_embeddings(reply: &Value, expected: usize) -> Result<Vec<Vec<f32>>, String> {
    let data = reply
        .get("data")
        .and_then(Value::as_array)
        .ok_or("the reply has no `data` array")?;
    let mut out: Vec<Option<Vec<f32>>> = vec![None; expected];
    for (position, item) in data.iter().enumerate() {
        let index = item
            .get("index")
            .and_then(Value::as_u64)
            .map_or(position, |i| i as usize);
        let vector = item
            .get("embedding")
            .and_then(Value::as_array)
            .ok_or("an item has no `embedding` array")?
            .iter()
            .map(|x| x.as_f64().map(|f| f as f32))
            .collect::<Option<Vec<f32>>>()
            .ok_or("an embedding holds a non-number")?;
        let slot = out
            .get_mut(index)
            .ok_or_else(|| format!("index {index} is out of range for {expected} inputs"))?;
        let mut vector = vector;
        reef_core::normalize(&mut vector);
        *slot = Some(vector);
    }
    let vectors: Option<Vec<Vec<f32>>> = out.into_iter().collect();
    let vectors = vectors.ok_or_else(|| {
        format!(
            "{} embeddings for {expected} inputs",
            data.len().min(expected)
        )
    })?;
    if vectors.windows(2).any(|w| w[0].len() != w[1].len()) || vectors.iter().any(Vec::is_empty) {
        return Err("embeddings of different lengths".into());
    }
    Ok(vectors)
}

#[async_trait]
impl Embedder for HttpEmbedder {
    fn id(&self) -> &str {
        &self.id
    }

    /// 0 until the first reply shows the length.
    fn dimensions(&self) -> usize {
        self.dimensions.load(std::sync::atomic::Ordering::Relaxed)
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, ModelError> {
        let mut out = Vec::with_capacity(texts.len());
        for batch in texts.chunks(HTTP_BATCH) {
            out.extend(self.embed_batch(batch).await?);
        }
        if let Some(first) = out.first() {
            self.dimensions
                .store(first.len(), std::sync::atomic::Ordering::Relaxed);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::parse_embeddings;
    use serde_json::json;

    #[test]
    fn replies_are_ordered_by_index_and_normalised() {
        let reply = json!({"data": [
            {"index": 1, "embedding": [0.0, 2.0]},
            {"index": 0, "embedding": [3.0, 4.0]},
        ]});
        let v = parse_embeddings(&reply, 2).unwrap();
        assert_eq!(v, vec![vec![0.6, 0.8], vec![0.0, 1.0]]);
    }

    #[test]
    fn short_or_broken_replies_are_errors() {
        let one = json!({"data": [{"index": 0, "embedding": [1.0]}]});
        assert!(
            parse_embeddings(&one, 2)
                .unwrap_err()
                .contains("1 embeddings for 2")
        );
        let bad = json!({"data": [{"index": 0, "embedding": ["x"]}]});
        assert!(
            parse_embeddings(&bad, 1)
                .unwrap_err()
                .contains("non-number")
        );
        assert!(
            parse_embeddings(&json!({}), 1)
                .unwrap_err()
                .contains("data")
        );
    }
}
