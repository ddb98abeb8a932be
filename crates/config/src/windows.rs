//! Default context windows (`[providers.NAME] context_tokens` when it is not set).

use reef_core::WireApi;

/// The smallest and largest `context_tokens` accepted.
pub(crate) const CONTEXT_TOKENS_RANGE: std::ops::RangeInclusive<u32> = 512..=1_048_576;

/// The context window (prompt plus reply, in tokens) assumed for a provider that does not set
/// `context_tokens`, by wire API and model name:
///
/// | wire          | model name starts with       | window    |
/// |---------------|------------------------------|-----------|
/// | `local`       | (any)                        | 8192      |
/// | `anthropic`   | (any)                        | 200000    |
/// | `openai-chat` | `gpt-4.1`                    | 1047576   |
/// | `openai-chat` | `gpt-5`                      | 400000    |
/// | `openai-chat` | `o1`, `o3`, `o4`             | 200000    |
/// | `openai-chat` | `gpt-4o`, `gpt-4-turbo`      | 128000    |
/// | `openai-chat` | `gpt-3.5`                    | 16385     |
/// | `openai-chat` | anything else (vLLM, llama.cpp, LM Studio, unknown) | 8192 |
/// | `ollama`      | (any)                        | 4096 (Ollama's own default `num_ctx`; reef sends it) |
///
/// Model names are matched case-insensitively after any routing prefix such as OpenRouter's
/// `openai/`. The fallback is deliberately small: a window assumed too small only compacts
/// early, one assumed too large fails requests.
pub fn default_context_tokens(wire_api: WireApi, model: &str) -> u32 {
    match wire_api {
        WireApi::Local => 8192,
        WireApi::Anthropic => 200_000,
        WireApi::Ollama => 4096,
        WireApi::OpenaiChat => {
            let model = model.to_ascii_lowercase();
            let name = model.rsplit('/').next().unwrap_or(&model);
            let starts = |prefixes: &[&str]| prefixes.iter().any(|p| name.starts_with(p));
            if starts(&["gpt-4.1"]) {
                1_047_576
            } else if starts(&["gpt-5"]) {
                400_000
            } else if starts(&["o1", "o3", "o4"]) {
                200_000
            } else if starts(&["gpt-4o", "gpt-4-turbo"]) {
                128_000
            } else if starts(&["gpt-3.5"]) {
                16_385
            } else {
                8192
            }
        }
    }
}
