//! Cost of skill tools, in one run:
//! - WASM: the first call's compile time of an echo module (a fresh engine, no cache), the
//!   time to load it from the on-disk cache, then p50/p99 of a call of the precompiled module
//!   (`WasmEngine::run`: store, WASI, instantiate, `_start`) and of the whole tool call an agent
//!   makes (arguments checked, `main.wasm` read and hashed against its pin, the cached module,
//!   the run on a blocking thread);
//! - subprocess: p50/p99 of a parameter skill's `run.sh` through the landlock sandbox next to a
//!   plain `shell` call of the same command, interleaved so load drifts affect both alike.
//!
//! Run with `cargo build --release -p reef-sandbox --bins && cargo bench -p reef-skills --bench skills`.
#![allow(clippy::print_stdout, reason = "a benchmark reports on stdout")]
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "benchmark set-up")]

use reef_core::{SessionId, Tool, ToolCallId, ToolContext};
use reef_sandbox::{HelperCommand, Sandbox, SandboxBackend, SandboxPolicy};
use reef_skills::{SkillSet, SkillSettings};
use reef_wasm::{Call, Limits, WasmEngine};
use serde_json::json;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

const WASM_CALLS: usize = 5000;
const PROCESS_CALLS: usize = 100;

fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    samples.sort();
    let i = ((samples.len() as f64 - 1.0) * p).round() as usize;
    samples[i]
}

fn micros(d: Duration) -> String {
    format!("{:.1} µs", d.as_secs_f64() * 1e6)
}

fn ctx(ws: &Path) -> ToolContext {
    ToolContext {
        workspace: ws.to_path_buf(),
        session_id: SessionId::new(),
        call_id: ToolCallId::new(),
        read_only: Vec::new(),
    }
}

fn write(path: &Path, bytes: &[u8]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let (ws, home) = (dir.path().join("ws"), dir.path().join("home"));
    std::fs::create_dir_all(&ws).unwrap();
    let echo = ::wat::parse_str(reef_test_support::wat::ECHO).unwrap();
    let hash = blake3::hash(&echo).to_hex().to_string();
    let args = br#"{"text":"hello"}"#.to_vec();

    // First-call compile time, on fresh engines without a cache.
    let mut compiles = Vec::new();
    for _ in 0..5 {
        let engine = WasmEngine::new(None).unwrap();
        let start = Instant::now();
        let module = engine.module(&echo, &hash).unwrap();
        compiles.push(start.elapsed());
        assert!(!module.from_cache);
    }
    let cache = dir.path().join("cache");
    WasmEngine::new(Some(cache.clone()))
        .unwrap()
        .module(&echo, &hash)
        .unwrap();
    let engine = WasmEngine::new(Some(cache)).unwrap();
    let start = Instant::now();
    let module = engine.module(&echo, &hash).unwrap();
    let from_cache = start.elapsed();
    assert!(module.from_cache);

    let run = || {
        let out = engine
            .run(
                &module,
                Call {
                    stdin: args.clone(),
                    workspace: None,
                    program: "main.wasm".into(),
                    limits: Limits::default(),
                    http: None,
                },
            )
            .unwrap();
        assert_eq!(out.stdout.as_bytes(), args.as_slice());
    };
    for _ in 0..200 {
        run();
    }
    let mut raw: Vec<Duration> = (0..WASM_CALLS)
        .map(|_| {
            let start = Instant::now();
            run();
            start.elapsed()
        })
        .collect();

    // The same module as a skill, called as an agent calls it.
    write(
        &home.join("skills/echo/SKILL.md"),
        b"---\nname: echo\ndescription: Echo.\nmode: wasm\nparameters:\n  text: string\n---\n",
    );
    write(&home.join("skills/echo/main.wasm"), &echo);
    write(
        &home.join("skills/stamp/SKILL.md"),
        b"---\nname: stamp\ndescription: Stamp.\nparameters:\n  text: string\n---\n",
    );
    write(
        &home.join("skills/stamp/run.sh"),
        b"echo \"$REEF_ARG_TEXT\"\n",
    );
    let sandbox = Arc::new(Sandbox::new(SandboxPolicy {
        backend: SandboxBackend::Landlock,
        helper: Some(HelperCommand {
            program: reef_test_support::sandbox_helper(),
            args: Vec::new(),
        }),
        hidden: vec![home.clone()],
        ..SandboxPolicy::default()
    }));
    let set = SkillSet::new(
        home.clone(),
        Vec::new(),
        SkillSettings::default(),
        sandbox.clone(),
    );
    let loaded = set.load(&ws);
    let tool = |name: &str| -> Arc<dyn Tool> {
        loaded
            .tools
            .iter()
            .find(|t| t.spec().name == name)
            .unwrap()
            .clone()
    };
    let (wasm_tool, stamp) = (tool("echo"), tool("stamp"));
    let shell = reef_tools::builtin_registry(sandbox, reef_tools::BuiltinConfig::default())
        .get("shell")
        .unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let c = ctx(&ws);
    let mut tool_calls = Vec::with_capacity(WASM_CALLS);
    let (mut process, mut plain) = (Vec::new(), Vec::new());
    rt.block_on(async {
        for _ in 0..200 {
            wasm_tool.call(&c, json!({"text": "hello"})).await.unwrap();
        }
        for _ in 0..WASM_CALLS {
            let start = Instant::now();
            wasm_tool.call(&c, json!({"text": "hello"})).await.unwrap();
            tool_calls.push(start.elapsed());
        }
        for i in 0..PROCESS_CALLS + 5 {
            let start = Instant::now();
            stamp.call(&c, json!({"text": "hello"})).await.unwrap();
            let skill = start.elapsed();
            let start = Instant::now();
            shell
                .call(&c, json!({"command": "echo hello"}))
                .await
                .unwrap();
            let direct = start.elapsed();
            if i >= 5 {
                process.push(skill);
                plain.push(direct);
            }
        }
    });

    let compile = percentile(&mut compiles, 0.5);
    println!("WASM echo module ({} bytes)", echo.len());
    println!(
        "  first call compile (median of 5): {:.2} ms",
        compile.as_secs_f64() * 1e3
    );
    println!(
        "  load from the module cache:       {:.2} ms",
        from_cache.as_secs_f64() * 1e3
    );
    println!(
        "  run, precompiled ({WASM_CALLS} calls):   p50 {}  p99 {}",
        micros(percentile(&mut raw, 0.5)),
        micros(percentile(&mut raw, 0.99))
    );
    println!(
        "  tool call ({WASM_CALLS} calls):           p50 {}  p99 {}",
        micros(percentile(&mut tool_calls, 0.5)),
        micros(percentile(&mut tool_calls, 0.99))
    );
    let (pp50, sp50) = (percentile(&mut process, 0.5), percentile(&mut plain, 0.5));
    println!(
        "subprocess skill vs plain shell, landlock sandbox ({PROCESS_CALLS} each, interleaved)"
    );
    println!(
        "  skill run.sh:  p50 {:.2} ms  p99 {:.2} ms",
        pp50.as_secs_f64() * 1e3,
        percentile(&mut process, 0.99).as_secs_f64() * 1e3
    );
    println!(
        "  shell echo:    p50 {:.2} ms  p99 {:.2} ms",
        sp50.as_secs_f64() * 1e3,
        percentile(&mut plain, 0.99).as_secs_f64() * 1e3
    );
    println!(
        "  ratio of p50s: {:.2}",
        pp50.as_secs_f64() / sp50.as_secs_f64()
    );
}
