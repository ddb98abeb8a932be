//! reef-wasm: runs a WASM skill's module (WASI preview 1, `_start`) the way reef runs any
//! untrusted code: fuel metering and an epoch deadline bound its time, a limiter bounds its
//! memory, its output is capped, it sees the workspace (read-only unless allowed) and nothing
//! else of the host, it has no sockets, and its one way out is the `reef.http_request` host
//! call, which the embedder guards. Compiled modules are cached on disk by module hash and
//! engine settings. The ABI is in docs/wasm-abi.md.

mod engine;
mod error;
mod http;
mod run;

pub use engine::{WasmEngine, WasmModule};
pub use error::WasmError;
pub use http::{HTTP_FUNCTION, HTTP_MODULE, HttpHost};
pub use run::{Call, Limits, Outcome, WORKSPACE_GUEST_PATH};
