//! `LocalClient`: the embedded model behind the same `ModelClient` interface as the cloud
//! providers. Engines are shared per model file and settings within a process, so agents that
//! use the same local model load its weights once.

use crate::engine::{Engine, EngineEvent, EngineSettings, Generation};
use crate::error::LocalError;
use crate::protocol;
use async_trait::async_trait;
use reef_core::{
    ModelClient, ModelError, ModelRequest, ModelResponse, OnStream, StreamEvent, ToolCallId, Usage,
};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

/// One local provider as configured.
#[derive(Clone, Debug)]
pub struct LocalSettings {
    /// The provider's config key, named in errors.
    pub provider: String,
    /// The catalogue name (or file stem) reported as the model.
    pub model: String,
    pub model_path: PathBuf,
    /// Inference threads; None: the idle cores at load time.
    pub threads: Option<u32>,
    /// The context window in tokens (prompt plus reply).
    pub context_tokens: u32,
    pub max_output_tokens: u32,
    /// How tokens are chosen (greedy unless a temperature above 0 is set).
    pub sampling: reef_core::Sampling,
}

/// Totals over the requests a client has served, for benchmarks and diagnostics.
#[derive(Clone, Copy, Debug, Default)]
pub struct LocalStats {
    pub requests: u64,
    pub prompt_tokens: u64,
    /// Prompt tokens reused from the KV cache instead of decoded.
    pub cached_tokens: u64,
    pub prompt_time: Duration,
    pub output_tokens: u64,
    pub generation_time: Duration,
}

impl LocalStats {
    /// Uncached prompt tokens decoded per second.
    pub fn prompt_tokens_per_sec(&self) -> f64 {
        per_sec(self.prompt_tokens - self.cached_tokens, self.prompt_time)
    }

    pub fn generation_tokens_per_sec(&self) -> f64 {
        per_sec(self.output_tokens, self.generation_time)
    }

    fn add(&mut self, g: &Generation) {
        self.requests += 1;
        self.prompt_tokens += g.prompt_tokens;
        self.cached_tokens += g.cached_tokens;
        self.prompt_time += g.prompt_time;
        self.output_tokens += g.output_tokens;
        self.generation_time += g.generation_time;
    }
}

fn per_sec(tokens: u64, time: Duration) -> f64 {
    if time.is_zero() {
        0.0
    } else {
        tokens as f64 / time.as_secs_f64()
    }
}

/// A model client running a GGUF model in-process.
#[derive(Debug)]
pub struct LocalClient {
    settings: LocalSettings,
    engine: tokio::sync::OnceCell<Arc<Engine>>,
    stats: Mutex<LocalStats>,
}

impl LocalClient {
    /// A client for the model file; it is loaded on the first request (or `load`). A missing
    /// file is reported then, as a `NotFound` error naming `reef models pull`, so that a
    /// failover chain with a local member not yet downloaded still serves from the others.
    pub fn new(settings: LocalSettings) -> Self {
        Self {
            settings,
            engine: tokio::sync::OnceCell::new(),
            stats: Mutex::new(LocalStats::default()),
        }
    }

    pub fn stats(&self) -> LocalStats {
        self.stats.lock().map(|s| *s).unwrap_or_default()
    }

    /// Loads the model now (otherwise the first request does).
    pub async fn load(&self) -> Result<(), LocalError> {
        self.engine().await.map(|_| ())
    }

    /// The threads the engine uses (known once loaded).
    pub fn threads(&self) -> Option<u32> {
        self.engine.get().map(|e| e.settings.threads)
    }

    async fn engine(&self) -> Result<&Arc<Engine>, LocalError> {
        self.engine
            .get_or_try_init(|| async {
                if !self.settings.model_path.is_file() {
                    return Err(LocalError::Missing {
                        path: self.settings.model_path.clone(),
                        name: self.settings.model.clone(),
                    });
                }
                let settings = EngineSettings {
                    model_path: self.settings.model_path.clone(),
                    threads: self.settings.threads.unwrap_or_else(idle_cores),
                    context_tokens: self.settings.context_tokens,
                };
                tokio::task::spawn_blocking(move || shared_engine(settings))
                    .await
                    .map_err(|e| LocalError::Backend(format!("loader task failed: {e}")))?
            })
            .await
    }
}

/// Engines by settings, alive while some client holds them: the weights of one model file are
/// loaded once per process however many agents use it.
fn shared_engine(settings: EngineSettings) -> Result<Arc<Engine>, LocalError> {
    static ENGINES: OnceLock<Mutex<HashMap<EngineSettings, Weak<Engine>>>> = OnceLock::new();
    let registry = ENGINES.get_or_init(Default::default);
    let mut engines = registry
        .lock()
        .map_err(|_| LocalError::Backend("engine registry poisoned".into()))?;
    engines.retain(|_, e| e.strong_count() > 0);
    if let Some(engine) = engines.get(&settings).and_then(Weak::upgrade) {
        return Ok(engine);
    }
    let engine = Arc::new(Engine::start(settings.clone())?);
    engines.insert(settings, Arc::downgrade(&engine));
    Ok(engine)
}

/// Cores not busy right now: the online cores less the one-minute load average, at least one.
pub fn idle_cores() -> u32 {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
    let load = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<f64>().ok())
        .unwrap_or(0.0);
    let busy = load.round().clamp(0.0, f64::from(cores)) as u32;
    cores.saturating_sub(busy).max(1)
}

#[async_trait]
impl ModelClient for LocalClient {
    fn provider(&self) -> &str {
        &self.settings.provider
    }

    fn model(&self) -> &str {
        &self.settings.model
    }

    fn wire_api(&self) -> Option<reef_core::WireApi> {
        Some(reef_core::WireApi::Local)
    }

    fn context_tokens(&self) -> Option<u32> {
        Some(self.settings.context_tokens)
    }

    /// Exact: the request is rendered and tokenized on the inference thread just as for
    /// generation (nothing is decoded). Loads the model if needed; `None` on any failure.
    async fn count_tokens(&self, request: &ModelRequest) -> Option<u64> {
        let engine = match self.engine().await {
            Ok(engine) => engine,
            Err(e) => {
                tracing::debug!(provider = %self.settings.provider, error = %e, "cannot count tokens");
                return None;
            }
        };
        let counted = match engine.count(request.clone()) {
            Ok(reply) => reply.await.unwrap_or(Err(LocalError::Stopped)),
            Err(e) => Err(e),
        };
        counted
            .inspect_err(|e| {
                tracing::debug!(provider = %self.settings.provider, error = %e, "cannot count tokens");
            })
            .ok()
    }

    async fn complete(
        &self,
        request: &ModelRequest,
        on_event: &OnStream<'_>,
    ) -> Result<ModelResponse, ModelError> {
        let fail = |e: LocalError| e.into_model_error(&self.settings.provider);
        let engine = self.engine().await.map_err(fail)?;
        let max_output_tokens = request
            .max_output_tokens
            .unwrap_or(self.settings.max_output_tokens)
            .min(self.settings.max_output_tokens.max(1));
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        engine
            .submit(
                request.clone(),
                max_output_tokens,
                self.settings.sampling,
                tx,
            )
            .map_err(fail)?;
        let generation = loop {
            match rx.recv().await {
                Some(EngineEvent::Text(text)) => on_event(StreamEvent::Text(&text)),
                Some(EngineEvent::Done(result)) => break result.map_err(fail)?,
                None => return Err(fail(LocalError::Stopped)),
            }
        };
        if let Ok(mut stats) = self.stats.lock() {
            stats.add(&generation);
        }
        let (content, tool_calls) = protocol::parse_reply(&generation.text, ToolCallId::new);
        Ok(ModelResponse {
            content,
            tool_calls,
            usage: Usage {
                input_tokens: generation.prompt_tokens,
                output_tokens: generation.output_tokens,
                cached_input_tokens: generation.cached_tokens,
            },
            stop_reason: generation.stop,
            model: self.settings.model.clone(),
            served_by: None,
        })
    }
}
