//! reef-embed: sentence embeddings computed in-process on CPU. `LocalEmbedder` runs
//! all-MiniLM-L6-v2 (a 6-layer BERT, 384 dimensions) from the safetensors, `config.json` and
//! `tokenizer.json` it ships with, and implements `reef_core::Embedder`.

mod bert;
mod embedder;
mod encoder;
mod error;
mod kernels;
mod quant;

pub use embedder::{Engine, LocalEmbedder, ModelFiles};
pub use error::EmbedError;
