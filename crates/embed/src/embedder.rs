//! `LocalEmbedder`: loads the model files, tokenizes texts in length-sorted batches and runs
//! the encoder on its own thread pool, so the number of cores it uses is fixed at load.

use crate::bert::{Bert, BertConfig, device};
use crate::encoder::{Encoder, Precision};
use crate::error::EmbedError;
use crate::kernels::Threads;
use crate::quant::Kernel;
use async_trait::async_trait;
use candle_core::DType;
use candle_nn::VarBuilder;
use reef_core::{Embedder, ModelError, ModelErrorKind};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokenizers::{Tokenizer, TruncationParams};

/// Tokens per text the encoder sees; longer texts are truncated (the model was trained on 256).
const MAX_TOKENS: usize = 256;

/// Texts encoded in one forward pass.
const BATCH: usize = 16;

/// Where a model's three files are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelFiles {
    pub weights: PathBuf,
    pub tokenizer: PathBuf,
    pub config: PathBuf,
}

impl ModelFiles {
    /// The layout `reef models pull` installs: `NAME.safetensors`, `NAME.tokenizer.json` and
    /// `NAME.config.json` in the models directory.
    pub fn in_dir(dir: &Path, name: &str) -> Self {
        Self {
            weights: dir.join(format!("{name}.safetensors")),
            tokenizer: dir.join(format!("{name}.tokenizer.json")),
            config: dir.join(format!("{name}.config.json")),
        }
    }

    /// The first of the files that does not exist.
    pub fn missing(&self) -> Option<&Path> {
        [&self.weights, &self.tokenizer, &self.config]
            .into_iter()
            .find(|p| !p.is_file())
            .map(PathBuf::as_path)
    }
}

/// Which implementation of the encoder computes the vectors. `Fused` and `Reference` compute
/// the same function to float rounding; `Int8` approximates it (cosine above 0.998 to the f32
/// vectors on real text) several times faster. [`Engine::fastest`] is what reef uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    /// reef's own forward pass over unpadded batches (`encoder.rs`), in f32.
    Fused,
    /// The fused forward pass with int8 linear layers summed by AVX-512 VNNI (`quant.rs`).
    /// Loading it on a CPU without VNNI is an error.
    Int8,
    /// candle's layers over padded batches (`bert.rs`): the reference the fused encoder is
    /// checked and benchmarked against.
    Reference,
}

impl Engine {
    /// `Int8` where the CPU has AVX-512 VNNI, `Fused` elsewhere.
    pub fn fastest() -> Self {
        if Kernel::detect().is_some() {
            Self::Int8
        } else {
            Self::Fused
        }
    }
}

enum Model {
    Fused(Encoder),
    Reference(Bert),
}

struct Inner {
    model: Model,
    tokenizer: Tokenizer,
    pool: rayon::ThreadPool,
    dimensions: usize,
}

/// A sentence-embedding model loaded in this process. Cheap to clone.
#[derive(Clone)]
pub struct LocalEmbedder {
    inner: Arc<Inner>,
    id: String,
    threads: usize,
}

impl std::fmt::Debug for LocalEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalEmbedder")
            .field("id", &self.id)
            .field("threads", &self.threads)
            .finish()
    }
}

impl LocalEmbedder {
    /// Loads model `name` from `files`, computing on `threads` threads (at least 1) with the
    /// fastest engine this CPU runs.
    pub fn load(name: &str, files: &ModelFiles, threads: usize) -> Result<Self, EmbedError> {
        Self::load_engine(name, files, threads, Engine::fastest())
    }

    /// Loads model `name` to run on `engine`.
    pub fn load_engine(
        name: &str,
        files: &ModelFiles,
        threads: usize,
        engine: Engine,
    ) -> Result<Self, EmbedError> {
        if let Some(path) = files.missing() {
            return Err(EmbedError::Missing {
                path: path.to_owned(),
                model: name.to_owned(),
            });
        }
        let bad = |path: &Path, message: String| EmbedError::BadFile {
            path: path.to_owned(),
            message,
        };
        let config_text = std::fs::read_to_string(&files.config)
            .map_err(|e| bad(&files.config, e.to_string()))?;
        let config: BertConfig = serde_json::from_str(&config_text)
            .map_err(|e| bad(&files.config, format!("not a BERT config: {e}")))?;
        let weights =
            std::fs::read(&files.weights).map_err(|e| bad(&files.weights, e.to_string()))?;
        config
            .check()
            .map_err(|message| bad(&files.config, message))?;
        let model = match engine {
            Engine::Fused | Engine::Int8 => {
                let precision = match engine {
                    Engine::Int8 => Precision::Int8(Kernel::detect().ok_or_else(|| {
                        EmbedError::Compute(
                            "the int8 engine needs a CPU with AVX-512 VNNI; this one has none"
                                .into(),
                        )
                    })?),
                    _ => Precision::F32,
                };
                Model::Fused(
                    Encoder::load(&weights, &config, precision)
                        .map_err(|m| bad(&files.weights, m))?,
                )
            }
            Engine::Reference => {
                let vb = VarBuilder::from_buffered_safetensors(weights, DType::F32, &device())
                    .map_err(|e| bad(&files.weights, e.to_string()))?;
                Model::Reference(
                    Bert::load(vb, &config).map_err(|e| bad(&files.weights, e.to_string()))?,
                )
            }
        };
        let mut tokenizer = Tokenizer::from_file(&files.tokenizer)
            .map_err(|e| bad(&files.tokenizer, e.to_string()))?;
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: MAX_TOKENS.min(config.max_position_embeddings),
                ..Default::default()
            }))
            .map_err(|e| bad(&files.tokenizer, e.to_string()))?;
        tokenizer.with_padding(None);
        let threads = threads.max(1);
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("reef-embed-{i}"))
            .build()
            .map_err(|e| EmbedError::Compute(format!("cannot start {threads} threads: {e}")))?;
        Ok(Self {
            inner: Arc::new(Inner {
                model,
                tokenizer,
                pool,
                dimensions: config.hidden_size,
            }),
            id: name.to_owned(),
            threads,
        })
    }

    /// Threads the model computes on.
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// Embeds `texts` on the calling thread (blocking); one unit vector per text, in order.
    pub fn embed_blocking(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let inner = &self.inner;
        inner.pool.install(|| {
            // Similar lengths together keep padding (wasted work) small.
            let mut order: Vec<usize> = (0..texts.len()).collect();
            order.sort_by_key(|&i| texts[i].len());
            let mut out = vec![Vec::new(); texts.len()];
            for batch in order.chunks(BATCH) {
                let inputs: Vec<&str> = batch.iter().map(|&i| texts[i].as_str()).collect();
                let vectors = embed_batch(inner, inputs, self.threads)?;
                for (&i, v) in batch.iter().zip(vectors) {
                    out[i] = v;
                }
            }
            Ok(out)
        })
    }
}

fn embed_batch(
    inner: &Inner,
    inputs: Vec<&str>,
    threads: usize,
) -> Result<Vec<Vec<f32>>, EmbedError> {
    let encodings = inner
        .tokenizer
        .encode_batch(inputs, true)
        .map_err(|e| EmbedError::Compute(format!("tokenizer: {e}")))?;
    let ids: Vec<&[u32]> = encodings.iter().map(|e| e.get_ids()).collect();
    match &inner.model {
        Model::Fused(encoder) => encoder
            .embed(&ids, Threads::new(threads))
            .map_err(EmbedError::Compute),
        Model::Reference(bert) => bert
            .embed_texts(&ids)
            .map_err(|e| EmbedError::Compute(e.to_string())),
    }
}

#[async_trait]
impl Embedder for LocalEmbedder {
    fn id(&self) -> &str {
        &self.id
    }

    fn dimensions(&self) -> usize {
        self.inner.dimensions
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, ModelError> {
        let this = self.clone();
        let texts = texts.to_vec();
        let failed = |message: String| ModelError::new("local", ModelErrorKind::Server, message);
        tokio::task::spawn_blocking(move || this.embed_blocking(&texts))
            .await
            .map_err(|e| failed(format!("embedding task failed: {e}")))?
            .map_err(|e| failed(e.to_string()))
    }
}
