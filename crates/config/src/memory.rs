//! `[memory]`: which embedder memory search uses, how documents are chunked, how keyword and
//! vector rankings are weighted when fused, and the cap on the `MEMORY.md` notes injected into
//! every prompt.

use crate::error::ConfigError;
use serde::Deserialize;

/// The embedding model used when `[memory] embedder` is not set (a `reef models` name).
pub const DEFAULT_EMBEDDER: &str = "minilm";

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct MemoryToml {
    pub embedder: Option<String>,
    pub embedding_model: Option<String>,
    pub embed_threads: Option<usize>,
    pub chunk_size: Option<usize>,
    pub chunk_overlap: Option<usize>,
    pub fusion: Option<String>,
    pub keyword_weight: Option<f64>,
    pub identifier_weight: Option<f64>,
    pub vector_weight: Option<f64>,
    pub rrf_k: Option<f64>,
    pub notes_max_chars: Option<usize>,
}

/// How hybrid search combines its keyword and vector rankings.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FusionChoice {
    /// Cosine similarity plus weighted keyword evidence (`fusion = "evidence"`).
    #[default]
    Evidence,
    /// Reciprocal-rank fusion (`fusion = "rrf"`).
    Rrf,
}

/// Where memory's vectors come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EmbedderChoice {
    /// Keyword search only.
    None,
    /// A catalogue embedding model run in-process (`embedder = "minilm"`).
    Local { model: String },
    /// An OpenAI-compatible `/embeddings` endpoint of a configured provider
    /// (`embedder = "provider:NAME"`, `embedding_model = "…"`).
    Provider { provider: String, model: String },
}

/// The resolved `[memory]` section.
#[derive(Clone, Debug)]
pub struct MemoryConfig {
    pub embedder: EmbedderChoice,
    /// Threads of the in-process embedder; None: all online cores.
    pub embed_threads: Option<usize>,
    /// Characters per chunk, and shared between neighbouring chunks.
    pub chunk_size: usize,
    pub chunk_overlap: usize,
    pub fusion: FusionChoice,
    /// The keyword side's weight; None: the fusion's own default (chosen on reef's labelled
    /// set, see `reef bench memory`).
    pub keyword_weight: Option<f64>,
    /// Evidence fusion: the weight of a query's identifiers found exactly; None: its default.
    pub identifier_weight: Option<f64>,
    /// The vector side's weight.
    pub vector_weight: f64,
    /// The rank constant of reciprocal-rank fusion: a hit at rank r adds `weight / (rrf_k + r)`;
    /// smaller values let the top of each ranking count for more.
    pub rrf_k: f64,
    /// The most characters of an agent's `MEMORY.md` injected into its prompt.
    pub notes_max_chars: usize,
}

impl Default for MemoryConfig {
    fn default() -> Self {
        Self {
            embedder: EmbedderChoice::Local {
                model: DEFAULT_EMBEDDER.to_owned(),
            },
            embed_threads: None,
            chunk_size: 800,
            chunk_overlap: 100,
            fusion: FusionChoice::Evidence,
            keyword_weight: None,
            identifier_weight: None,
            vector_weight: 1.0,
            rrf_k: 60.0,
            notes_max_chars: 4000,
        }
    }
}

pub(crate) fn resolve_memory(
    raw: MemoryToml,
    providers: &std::collections::BTreeMap<String, crate::ProviderConfig>,
    origin_of: &dyn Fn(&str) -> String,
) -> Result<MemoryConfig, ConfigError> {
    let invalid = |field: &str, message: String| ConfigError::Invalid {
        origin: origin_of(&format!("memory.{field}")),
        key: format!("memory.{field}"),
        message,
    };
    let defaults = MemoryConfig::default();
    let embedder = match raw.embedder.as_deref().unwrap_or(DEFAULT_EMBEDDER) {
        "none" => EmbedderChoice::None,
        spec => match spec.strip_prefix("provider:") {
            Some(provider) => {
                let Some(p) = providers.get(provider) else {
                    return Err(invalid(
                        "embedder",
                        format!("no provider `{provider}` is configured"),
                    ));
                };
                if p.wire_api != reef_core::WireApi::OpenaiChat {
                    return Err(invalid(
                        "embedder",
                        format!(
                            "provider `{provider}` is not OpenAI-compatible (embeddings use its /embeddings endpoint)"
                        ),
                    ));
                }
                let Some(model) = raw.embedding_model.clone() else {
                    return Err(invalid(
                        "embedding_model",
                        "is required with `embedder = \"provider:NAME\"` (e.g. \"text-embedding-3-small\")".into(),
                    ));
                };
                EmbedderChoice::Provider {
                    provider: provider.to_owned(),
                    model,
                }
            }
            None if spec.is_empty() => {
                return Err(invalid(
                    "embedder",
                    "is empty (use \"minilm\", \"none\" or \"provider:NAME\")".into(),
                ));
            }
            None => EmbedderChoice::Local {
                model: spec.to_owned(),
            },
        },
    };
    if raw.embedding_model.is_some() && !matches!(embedder, EmbedderChoice::Provider { .. }) {
        return Err(invalid(
            "embedding_model",
            "is only used with `embedder = \"provider:NAME\"`".into(),
        ));
    }
    let chunk_size = raw.chunk_size.unwrap_or(defaults.chunk_size);
    let chunk_overlap = raw.chunk_overlap.unwrap_or(defaults.chunk_overlap);
    if chunk_size < 50 {
        return Err(invalid(
            "chunk_size",
            format!("{chunk_size} is below 50 characters"),
        ));
    }
    if chunk_overlap >= chunk_size {
        return Err(invalid(
            "chunk_overlap",
            format!("{chunk_overlap} must be smaller than chunk_size ({chunk_size})"),
        ));
    }
    let weight = |field: &str, value: Option<f64>, default: f64| match value {
        Some(v) if !(v.is_finite() && v >= 0.0) => Err(invalid(
            field,
            format!("{v} is not a weight (a number >= 0)"),
        )),
        other => Ok(other.unwrap_or(default)),
    };
    let keyword_weight = raw
        .keyword_weight
        .map(|w| weight("keyword_weight", Some(w), 0.0))
        .transpose()?;
    let identifier_weight = raw
        .identifier_weight
        .map(|w| weight("identifier_weight", Some(w), 0.0))
        .transpose()?;
    let vector_weight = weight("vector_weight", raw.vector_weight, defaults.vector_weight)?;
    if keyword_weight == Some(0.0) && vector_weight == 0.0 {
        return Err(invalid(
            "vector_weight",
            "and keyword_weight are both 0: nothing would rank".into(),
        ));
    }
    let rrf_k = match raw.rrf_k {
        Some(k) if !(k.is_finite() && k >= 0.0) => {
            return Err(invalid(
                "rrf_k",
                format!("{k} is not a rank constant (a number >= 0)"),
            ));
        }
        other => other.unwrap_or(defaults.rrf_k),
    };
    let fusion = match raw.fusion.as_deref() {
        None | Some("evidence") => FusionChoice::Evidence,
        Some("rrf") => FusionChoice::Rrf,
        Some(other) => {
            return Err(invalid(
                "fusion",
                format!("`{other}` is not a fusion (expected evidence or rrf)"),
            ));
        }
    };
    if raw.embed_threads == Some(0) {
        return Err(invalid("embed_threads", "must be at least 1".into()));
    }
    Ok(MemoryConfig {
        embedder,
        embed_threads: raw.embed_threads,
        chunk_size,
        chunk_overlap,
        fusion,
        keyword_weight,
        identifier_weight,
        vector_weight,
        rrf_k,
        notes_max_chars: raw.notes_max_chars.unwrap_or(defaults.notes_max_chars),
    })
}
