//! One call of a module: a fresh store with its fuel, deadline and memory limiter, WASI with
//! the arguments on stdin, capped stdout and stderr, and the workspace preopened; then
//! `_start`, and what came of it.

use crate::engine::{EPOCH_TICK, WasmEngine, WasmModule};
use crate::error::WasmError;
use crate::http::HttpHost;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use wasmtime::{Linker, ResourceLimiter, Store, Trap};
use wasmtime_wasi::p1::WasiP1Ctx;
use wasmtime_wasi::p2::pipe::{MemoryInputPipe, MemoryOutputPipe};
use wasmtime_wasi::{FsPerms, I32Exit, WasiCtxBuilder};

/// Where the workspace appears to the module.
pub const WORKSPACE_GUEST_PATH: &str = "/workspace";

/// The bounds of one call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Fuel units (roughly, WebAssembly instructions).
    pub fuel: u64,
    /// Wall-clock deadline.
    pub timeout: Duration,
    /// Linear memory and tables together, in bytes.
    pub memory_bytes: u64,
    /// Bytes kept of stdout and of stderr each.
    pub max_output: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            fuel: 10_000_000_000,
            timeout: Duration::from_secs(30),
            memory_bytes: 64 * 1024 * 1024,
            max_output: 1024 * 1024,
        }
    }
}

/// What a call gets.
pub struct Call {
    /// Fed to stdin (the JSON arguments).
    pub stdin: Vec<u8>,
    /// The workspace, preopened at [`WORKSPACE_GUEST_PATH`]; writable when the flag is set.
    pub workspace: Option<(PathBuf, bool)>,
    /// `argv[0]`.
    pub program: String,
    pub limits: Limits,
    /// Answers `reef.http_request`; `None` refuses every request.
    pub http: Option<Arc<dyn HttpHost>>,
}

/// What a call produced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// 0 when `_start` returned; the code given to `proc_exit` otherwise.
    pub exit_code: i32,
    pub stdout: String,
    pub stderr: String,
    pub fuel_used: u64,
}

/// The store's data: WASI, the memory limiter and the HTTP host.
pub(crate) struct State {
    wasi: WasiP1Ctx,
    limiter: Limiter,
    pub(crate) http: Option<Arc<dyn HttpHost>>,
}

/// Counts every memory and table of the instance together against the cap (table elements
/// at 8 bytes each).
struct Limiter {
    cap: u64,
    used: u64,
    hit: bool,
}

impl Limiter {
    fn grow(&mut self, current: u64, desired: u64) -> bool {
        let total = self.used.saturating_sub(current).saturating_add(desired);
        if total > self.cap {
            self.hit = true;
            return false;
        }
        self.used = total;
        true
    }
}

impl ResourceLimiter for Limiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let bytes = |n: usize| u64::try_from(n).unwrap_or(u64::MAX);
        Ok(self.grow(bytes(current), bytes(desired)))
    }

    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let bytes = |n: usize| u64::try_from(n).unwrap_or(u64::MAX).saturating_mul(8);
        Ok(self.grow(bytes(current), bytes(desired)))
    }
}

impl WasmEngine {
    /// Runs `module` once. Blocking: call it from a blocking thread.
    pub fn run(&self, module: &WasmModule, call: Call) -> Result<Outcome, WasmError> {
        let limits = call.limits;
        let stdout = MemoryOutputPipe::new(limits.max_output);
        let stderr = MemoryOutputPipe::new(limits.max_output);
        let mut builder = WasiCtxBuilder::new();
        builder
            .stdin(MemoryInputPipe::new(call.stdin))
            .stdout(stdout.clone())
            .stderr(stderr.clone())
            .args(&[call.program.as_str()]);
        if let Some((dir, writable)) = &call.workspace {
            let perms = if *writable {
                FsPerms::ReadWrite
            } else {
                FsPerms::ReadOnly
            };
            builder
                .preopened_dir(dir, WORKSPACE_GUEST_PATH, perms)
                .map_err(|e| WasmError::Setup(format!("cannot open {}: {e}", dir.display())))?;
        }
        let state = State {
            wasi: builder.build_p1(),
            limiter: Limiter {
                cap: limits.memory_bytes,
                used: 0,
                hit: false,
            },
            http: call.http,
        };
        let mut store = Store::new(&self.engine, state);
        store.limiter(|s| &mut s.limiter);
        store
            .set_fuel(limits.fuel)
            .map_err(|e| WasmError::Setup(e.to_string()))?;
        let ticks = limits.timeout.as_millis() / EPOCH_TICK.as_millis();
        store.set_epoch_deadline(u64::try_from(ticks).unwrap_or(u64::MAX).max(1));
        store.epoch_deadline_trap();

        let mut linker: Linker<State> = Linker::new(&self.engine);
        wasmtime_wasi::p1::add_to_linker_sync(&mut linker, |s: &mut State| &mut s.wasi)
            .map_err(|e| WasmError::Setup(e.to_string()))?;
        crate::http::add_to_linker(&mut linker).map_err(|e| WasmError::Setup(e.to_string()))?;

        let result = linker
            .instantiate(&mut store, &module.module)
            .and_then(|instance| instance.get_typed_func::<(), ()>(&mut store, "_start"))
            .and_then(|start| start.call(&mut store, ()));
        let fuel_used = limits.fuel - store.get_fuel().unwrap_or(0);
        let exit_code = match result {
            Ok(()) => 0,
            Err(err) => {
                if let Some(exit) = err.downcast_ref::<I32Exit>() {
                    exit.0
                } else if store.data().limiter.hit {
                    return Err(WasmError::Memory(limits.memory_bytes));
                } else {
                    return Err(match err.downcast_ref::<Trap>() {
                        Some(Trap::OutOfFuel) => WasmError::OutOfFuel(limits.fuel),
                        Some(Trap::Interrupt) => WasmError::Timeout(limits.timeout),
                        Some(trap) => WasmError::Trap(trap.to_string()),
                        None if err.to_string().contains("unknown import") => {
                            WasmError::Invalid(format!("{err:#}"))
                        }
                        None => WasmError::Trap(format!("{err:#}")),
                    });
                }
            }
        };
        drop(store);
        Ok(Outcome {
            exit_code,
            stdout: String::from_utf8_lossy(&stdout.contents()).into_owned(),
            stderr: String::from_utf8_lossy(&stderr.contents()).into_owned(),
            fuel_used,
        })
    }
}
