//! reef-llm: Model clients for reef: OpenAI chat completions and Anthropic Messages, streaming, retries and usage.
