//! Why a WASM call did not finish, each variant saying what the module did or what to fix.

use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum WasmError {
    /// The module is not valid WebAssembly, or imports something reef does not provide.
    #[error("the module cannot be loaded: {0}")]
    Invalid(String),
    /// The module trapped (a bug in it, or `unreachable`).
    #[error("the module trapped: {0}")]
    Trap(String),
    /// It used all its fuel: it ran too many instructions (a loop that does not end?).
    #[error("the module ran out of fuel after {0} units (an endless loop, or too much work)")]
    OutOfFuel(u64),
    /// The epoch deadline passed.
    #[error("the module ran longer than its {} s deadline and was stopped", .0.as_secs_f64())]
    Timeout(Duration),
    /// It asked for more memory than its cap.
    #[error("the module exceeded its memory cap of {} MiB", .0 / (1024 * 1024))]
    Memory(u64),
    /// Setting up the run failed on the host (the workspace cannot be opened, …).
    #[error("the WASM runtime could not set up the call: {0}")]
    Setup(String),
}
