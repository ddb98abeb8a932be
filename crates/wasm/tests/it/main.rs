//! The WASM runtime on modules written in WebAssembly text: arguments in and out, fuel, the
//! deadline, the memory cap, the workspace as the only file system, the HTTP host call, and the
//! compiled-module cache.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "test code")]

use reef_test_support::wat;
use reef_wasm::{Call, HttpHost, Limits, WasmEngine, WasmError, WasmModule};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

fn module(engine: &WasmEngine, text: &str) -> WasmModule {
    let bytes = ::wat::parse_str(text).unwrap();
    let hash = blake3::hash(&bytes).to_hex().to_string();
    engine.module(&bytes, &hash).unwrap()
}

fn call(stdin: &str, workspace: Option<&Path>) -> Call {
    Call {
        stdin: stdin.as_bytes().to_vec(),
        workspace: workspace.map(|w| (w.to_path_buf(), false)),
        program: "main.wasm".into(),
        limits: Limits::default(),
        http: None,
    }
}

#[test]
fn echo_returns_its_json_arguments() {
    let engine = WasmEngine::new(None).unwrap();
    let echo = module(&engine, wat::ECHO);
    let out = engine
        .run(&echo, call(r#"{"text":"héllo"}"#, None))
        .unwrap();
    assert_eq!(out.exit_code, 0);
    assert_eq!(out.stdout, r#"{"text":"héllo"}"#);
    assert!(
        out.fuel_used > 0 && out.fuel_used < 10_000,
        "{}",
        out.fuel_used
    );
}

#[test]
fn an_endless_loop_is_stopped_by_fuel_or_by_the_deadline() {
    let engine = WasmEngine::new(None).unwrap();
    let looping = module(&engine, wat::ENDLESS_LOOP);
    let mut by_fuel = call("", None);
    by_fuel.limits.fuel = 1_000_000;
    let err = engine.run(&looping, by_fuel).unwrap_err();
    assert!(matches!(err, WasmError::OutOfFuel(1_000_000)), "{err}");
    assert!(err.to_string().contains("ran out of fuel"), "{err}");

    let mut by_time = call("", None);
    by_time.limits.fuel = u64::MAX / 2;
    by_time.limits.timeout = Duration::from_millis(200);
    let err = engine.run(&looping, by_time).unwrap_err();
    assert!(matches!(err, WasmError::Timeout(_)), "{err}");
    assert!(err.to_string().contains("0.2 s deadline"), "{err}");
}

#[test]
fn a_memory_bomb_stops_at_the_cap() {
    let engine = WasmEngine::new(None).unwrap();
    let bomb = module(&engine, wat::MEMORY_BOMB);
    let mut capped = call("", None);
    capped.limits.memory_bytes = 8 * 1024 * 1024;
    let err = engine.run(&bomb, capped).unwrap_err();
    assert!(matches!(err, WasmError::Memory(_)), "{err}");
    assert_eq!(
        err.to_string(),
        "the module exceeded its memory cap of 8 MiB"
    );
}

#[test]
fn a_failing_module_reports_its_exit_code_and_stderr() {
    let engine = WasmEngine::new(None).unwrap();
    let failing = module(&engine, &wat::fail("no such city", 3));
    let out = engine.run(&failing, call("", None)).unwrap();
    assert_eq!(out.exit_code, 3);
    assert_eq!(out.stderr, "no such city");
}

#[test]
fn the_workspace_is_the_only_file_system_and_it_is_read_only() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    std::fs::write(ws.join("inside.txt"), "inside text").unwrap();
    std::fs::write(dir.path().join("outside.txt"), "outside secret").unwrap();
    std::os::unix::fs::symlink(dir.path().join("outside.txt"), ws.join("link.txt")).unwrap();
    let engine = WasmEngine::new(None).unwrap();
    let read = |path: &str, workspace: Option<&Path>| {
        let m = module(&engine, &wat::read_file(path));
        engine.run(&m, call("", workspace)).unwrap().stdout
    };
    assert_eq!(read("inside.txt", Some(&ws)), "inside text");
    for escape in ["../outside.txt", "link.txt", "/etc/passwd"] {
        let got = read(escape, Some(&ws));
        assert!(got.starts_with("REFUSED "), "{escape}: {got}");
    }
    assert!(
        read("inside.txt", None).starts_with("REFUSED "),
        "no preopen, no files"
    );
}

struct Recorder {
    seen: Mutex<Vec<String>>,
}

impl HttpHost for Recorder {
    fn request(&self, request: &[u8]) -> Vec<u8> {
        self.seen
            .lock()
            .unwrap()
            .push(String::from_utf8_lossy(request).into_owned());
        br#"{"status":200,"body":"pong"}"#.to_vec()
    }
}

#[test]
fn http_requests_go_only_through_the_host() {
    let engine = WasmEngine::new(None).unwrap();
    let request = r#"{"method":"GET","url":"https://api.example.org/ping"}"#;
    let m = module(&engine, &wat::http(request));
    let refused = engine.run(&m, call("", None)).unwrap();
    assert!(
        refused.stdout.contains("may not make HTTP requests"),
        "{}",
        refused.stdout
    );

    let host = Arc::new(Recorder {
        seen: Mutex::new(Vec::new()),
    });
    let mut with_host = call("", None);
    with_host.http = Some(host.clone());
    let out = engine.run(&m, with_host).unwrap();
    assert_eq!(out.stdout, r#"{"status":200,"body":"pong"}"#);
    assert_eq!(host.seen.lock().unwrap().as_slice(), [request.to_owned()]);
}

#[test]
fn a_module_importing_sockets_or_unknown_functions_is_refused() {
    let engine = WasmEngine::new(None).unwrap();
    let text = r#"(module
      (import "env" "connect" (func $c (param i32) (result i32)))
      (memory (export "memory") 1)
      (func (export "_start") (drop (call $c (i32.const 0)))))"#;
    let m = module(&engine, text);
    let err = engine.run(&m, call("", None)).unwrap_err();
    assert!(matches!(err, WasmError::Invalid(_)), "{err}");
}

#[test]
fn compiled_modules_are_cached_by_hash_and_engine() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache/wasm");
    let bytes = ::wat::parse_str(wat::ECHO).unwrap();
    let hash = blake3::hash(&bytes).to_hex().to_string();
    let first = WasmEngine::new(Some(cache.clone())).unwrap();
    assert!(!first.module(&bytes, &hash).unwrap().from_cache);
    let files: Vec<_> = std::fs::read_dir(&cache)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(files.len(), 1);
    assert!(files[0].to_string_lossy().starts_with(&hash), "{files:?}");
    // A new engine (a restarted reef) uses the cached form, and it runs.
    let second = WasmEngine::new(Some(cache)).unwrap();
    let cached = second.module(&bytes, &hash).unwrap();
    assert!(cached.from_cache);
    assert_eq!(
        second.run(&cached, call("[1]", None)).unwrap().stdout,
        "[1]"
    );
}

#[test]
fn a_second_memory_is_refused_so_the_cap_holds() {
    let engine = WasmEngine::new(None).unwrap();
    let bytes = ::wat::parse_str(r#"(module (memory 1) (memory $two 1) (func (export "_start")))"#)
        .unwrap();
    let hash = blake3::hash(&bytes).to_hex().to_string();
    let err = engine.module(&bytes, &hash).unwrap_err();
    assert!(matches!(err, WasmError::Invalid(_)), "{err}");
}
