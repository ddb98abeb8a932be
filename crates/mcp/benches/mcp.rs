//! The round trip of an MCP tool call through reef's client (`McpHub::call_tool`, what an
//! agent's `SERVER__TOOL` runs) to a local stdio server, the Python SDK's test server calling
//! `echo`: p50/p99 with the server in the landlock sandbox and unconfined, next to the Python
//! SDK's own client calling the same server directly (the baseline), all in one run.
//!
//! Run with `cargo build --release -p reef-sandbox --bins && cargo bench -p reef-mcp --bench mcp`.
#![allow(clippy::print_stdout, reason = "a benchmark reports on stdout")]
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "benchmark set-up")]

use reef_config::{McpConfig, McpServerConfig, McpTransport};
use reef_mcp::{Launcher, McpHub};
use reef_sandbox::{HelperCommand, SandboxBackend, SandboxPolicy};
use reef_test_support::mcp::{mcp_python, mcp_script, python_read_only};
use serde_json::json;
use std::time::{Duration, Instant};

const CALLS: usize = 500;

fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    samples.sort();
    let i = ((samples.len() as f64 - 1.0) * p).round() as usize;
    samples[i]
}

fn hub(dir: &std::path::Path, backend: SandboxBackend) -> McpHub {
    let server = McpServerConfig {
        name: "py".into(),
        transport: McpTransport::Stdio {
            command: mcp_python().display().to_string(),
            args: vec![mcp_script("py_server.py").display().to_string()],
            env: Vec::new(),
        },
        timeout_secs: 30,
        enabled: true,
        templates: None,
        network: None,
        allow_domains: None,
        writable: None,
        read_only: python_read_only(),
    };
    let config = McpConfig {
        max_tools_per_server: 128,
        servers: [("py".to_owned(), server)].into(),
    };
    let policy = SandboxPolicy {
        backend,
        helper: Some(HelperCommand {
            program: reef_test_support::sandbox_helper(),
            args: Vec::new(),
        }),
        ..SandboxPolicy::default()
    };
    McpHub::new(
        &config,
        Launcher {
            policy,
            servers_dir: dir.to_path_buf(),
            secrets: Vec::new(),
            vault: None,
        },
    )
}

async fn through_reef(backend: SandboxBackend) -> (Duration, Duration, Duration) {
    let dir = tempfile::tempdir().unwrap();
    let hub = hub(dir.path(), backend);
    let start = Instant::now();
    hub.tools("py").await.unwrap();
    let started = start.elapsed();
    let args = json!({"text": "hello"}).as_object().cloned().unwrap();
    for _ in 0..20 {
        hub.call_tool("py", "echo", args.clone()).await.unwrap();
    }
    let mut samples = Vec::with_capacity(CALLS);
    for _ in 0..CALLS {
        let start = Instant::now();
        let result = hub.call_tool("py", "echo", args.clone()).await.unwrap();
        samples.push(start.elapsed());
        assert!(!result.is_error);
    }
    hub.shutdown().await;
    (
        percentile(&mut samples, 0.5),
        percentile(&mut samples, 0.99),
        started,
    )
}

fn python_baseline() -> (f64, f64) {
    let out = std::process::Command::new(mcp_python())
        .arg(mcp_script("bench_client.py"))
        .arg(CALLS.to_string())
        .output()
        .unwrap();
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "bench_client.py: {e}: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (
        report["p50_us"].as_f64().unwrap(),
        report["p99_us"].as_f64().unwrap(),
    )
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let (py50, py99) = python_baseline();
    let (c50, c99, c_start) = through_reef(SandboxBackend::Landlock).await;
    let (p50, p99, p_start) = through_reef(SandboxBackend::Plain).await;
    println!(
        "MCP tool call round trip, `echo` of the Python SDK server over stdio, {CALLS} calls:"
    );
    println!(
        "  Python SDK client, direct     p50 {py50:>8.1} µs   p99 {py99:>8.1} µs   (baseline)"
    );
    println!(
        "  reef client, landlock sandbox p50 {:>8.1} µs   p99 {:>8.1} µs   ({:.2}x the baseline's p50)",
        us(c50),
        us(c99),
        us(c50) / py50
    );
    println!(
        "  reef client, unconfined       p50 {:>8.1} µs   p99 {:>8.1} µs   ({:.2}x)",
        us(p50),
        us(p99),
        us(p50) / py50
    );
    println!(
        "  first use (start, handshake, tools/list): landlock {:.0} ms, unconfined {:.0} ms",
        c_start.as_secs_f64() * 1e3,
        p_start.as_secs_f64() * 1e3
    );
}
