//! reef-tools: reef's tool registry and built-in tools: shell, files, search and HTTP fetch.
