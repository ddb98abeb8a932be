//! reef-test-support: Dev-only helpers for reef tests: a scripted mock LLM server speaking both wire APIs, and hermetic homes.
