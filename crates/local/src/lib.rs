//! reef-local: the embedded local model. GGUF files run in-process on CPU through llama.cpp;
//! prompts are rendered with the model's own chat template (minijinja); tool calls are sampled
//! under a grammar that lets the model answer or call an offered tool; the KV cache is reused
//! across the rounds of a turn.

mod client;
mod engine;
mod error;
mod grammar;
mod protocol;
mod sample;
mod template;

pub use client::{LocalClient, LocalSettings, LocalStats, idle_cores};
pub use error::LocalError;
pub use template::ChatTemplate;
