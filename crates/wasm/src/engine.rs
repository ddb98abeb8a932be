//! The engine (fuel and epoch interruption on), the thread that advances its epoch, and the
//! compiled-module cache: `CACHE_DIR/<module blake3>-<engine hash>.cwasm`.

use crate::error::WasmError;
use std::hash::{Hash, Hasher};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use wasmtime::{Config, Engine, Module};

/// How often the epoch advances: the granularity of deadlines.
pub(crate) const EPOCH_TICK: Duration = Duration::from_millis(10);

/// A compiled module, ready to instantiate.
#[derive(Clone)]
pub struct WasmModule {
    pub(crate) module: Module,
    /// Whether it came from the on-disk cache rather than a fresh compile.
    pub from_cache: bool,
}

impl std::fmt::Debug for WasmModule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WasmModule")
            .field("from_cache", &self.from_cache)
            .finish()
    }
}

/// The WASM engine of one reef process.
pub struct WasmEngine {
    pub(crate) engine: Engine,
    cache_dir: Option<PathBuf>,
    stop: Arc<AtomicBool>,
}

impl std::fmt::Debug for WasmEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WasmEngine")
            .field("cache_dir", &self.cache_dir)
            .finish()
    }
}

impl Drop for WasmEngine {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

impl WasmEngine {
    /// An engine caching compiled modules in `cache_dir` (none: compile every time).
    pub fn new(cache_dir: Option<PathBuf>) -> Result<Self, WasmError> {
        let mut config = Config::new();
        // One linear memory per module, so the cap is the module's memory.
        config
            .consume_fuel(true)
            .epoch_interruption(true)
            .wasm_multi_memory(false);
        let engine = Engine::new(&config).map_err(|e| WasmError::Setup(e.to_string()))?;
        let stop = Arc::new(AtomicBool::new(false));
        let (ticking, flag) = (engine.clone(), stop.clone());
        std::thread::Builder::new()
            .name("reef-wasm-epoch".into())
            .spawn(move || {
                while !flag.load(Ordering::Relaxed) {
                    std::thread::sleep(EPOCH_TICK);
                    ticking.increment_epoch();
                }
            })
            .map_err(|e| WasmError::Setup(format!("cannot start the epoch thread: {e}")))?;
        Ok(Self {
            engine,
            cache_dir,
            stop,
        })
    }

    /// The module `wasm`, whose BLAKE3 hash (hex) the caller checked is `hash`: from the cache
    /// when compiled before with the same engine settings, else compiled and cached.
    pub fn module(&self, wasm: &[u8], hash: &str) -> Result<WasmModule, WasmError> {
        let path = self.cache_path(hash);
        if let Some(path) = &path
            && let Some(module) = self.cached(path)
        {
            return Ok(WasmModule {
                module,
                from_cache: true,
            });
        }
        let module = Module::from_binary(&self.engine, wasm)
            .map_err(|e| WasmError::Invalid(format!("{e:#}")))?;
        if let Some(path) = path {
            self.store_cached(&module, &path);
        }
        Ok(WasmModule {
            module,
            from_cache: false,
        })
    }

    /// Where the compiled form of the module with `hash` is cached.
    fn cache_path(&self, hash: &str) -> Option<PathBuf> {
        let dir = self.cache_dir.as_ref()?;
        let valid = hash.len() == 64 && hash.chars().all(|c| c.is_ascii_hexdigit());
        if !valid {
            return None;
        }
        let mut settings = std::collections::hash_map::DefaultHasher::new();
        self.engine
            .precompile_compatibility_hash()
            .hash(&mut settings);
        Some(dir.join(format!("{hash}-{:016x}.cwasm", settings.finish())))
    }

    fn cached(&self, path: &PathBuf) -> Option<Module> {
        if !path.is_file() {
            return None;
        }
        // SAFETY: the file is one this engine wrote (`store_cached`) in reef's home, which
        // the sandbox hides from agents and their commands, named by the BLAKE3 hash of the
        // module the caller verified and by this engine's settings; wasmtime also checks
        // that its header matches this engine and refuses it otherwise.
        #[allow(unsafe_code, reason = "loading reef's own precompiled module cache")]
        let loaded = unsafe { Module::deserialize_file(&self.engine, path) };
        match loaded {
            Ok(module) => Some(module),
            Err(err) => {
                tracing::warn!(path = %path.display(), "a cached module was not usable, compiling again: {err}");
                None
            }
        }
    }

    fn store_cached(&self, module: &Module, path: &PathBuf) {
        let write = || -> Result<(), String> {
            let bytes = module.serialize().map_err(|e| e.to_string())?;
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
            }
            // A name of its own per writer: two first calls of one module may race here.
            static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let tmp = path.with_extension(format!("tmp{}-{n}", std::process::id()));
            std::fs::write(&tmp, bytes).map_err(|e| e.to_string())?;
            std::fs::rename(&tmp, path).map_err(|e| e.to_string())
        };
        if let Err(err) = write() {
            tracing::warn!(path = %path.display(), "could not cache a compiled module: {err}");
        }
    }
}
