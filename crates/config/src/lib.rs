//! reef-config: Layered TOML configuration for reef, with env and command-line overrides and per-value origins.
