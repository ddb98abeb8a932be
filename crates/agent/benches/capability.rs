//! Benchmark: what the capability check and the leak scan cost per tool call, next to the call
//! itself, in one process. Measured, each `CALLS` times after a warm-up:
//! - the tool call: `read_file` of a small file, called directly;
//! - the token check alone: `Token::check` of the call's needs (one biscuit authorizer run per
//!   need the token has not decided before, the revocation ids against a set), for a path never
//!   asked about and for the same call again;
//! - the whole check a daemon agent's call passes: its token and the revoked ids read from the
//!   SQLite store, then the token check (`Rights::decide`);
//! - the leak scan a call that sends data out passes (`Secrets::review_outgoing`: five
//!   configured secrets read from their files, scanned for in every encoding, plus the 18
//!   credential patterns), on an `http_fetch`-sized argument object and on a 16 KiB body.
//!
//! Run with `cargo bench -p reef-agent --bench capability`.
#![allow(
    clippy::print_stdout,
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a benchmark reports on stdout and aborts on setup failure"
)]

use reef_agent::{Rights, TokenSource};
use reef_core::{AgentId, Budget, Capabilities, Need, SessionId, ToolCallId, ToolContext};
use reef_sandbox::{Sandbox, SandboxPolicy};
use reef_security::cap::{Grant, OPERATOR, Token};
use reef_store::{NewAgent, Store};
use reef_tools::BuiltinConfig;
use serde_json::json;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

const CALLS: usize = 3000;
const WARMUP: usize = 300;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let at = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[at.min(sorted.len() - 1)]
}

async fn measure<F, Fut>(mut f: F) -> (Duration, Duration)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = ()>,
{
    for _ in 0..WARMUP {
        f().await;
    }
    let mut times = Vec::with_capacity(CALLS);
    for _ in 0..CALLS {
        let start = Instant::now();
        f().await;
        times.push(start.elapsed());
    }
    times.sort();
    (percentile(&times, 0.5), percentile(&times, 0.99))
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let workspace = dir.path().join("workspace");
        std::fs::create_dir_all(workspace.join("notes")).unwrap();
        std::fs::write(workspace.join("notes/a.md"), "hello\n".repeat(20)).unwrap();
        let store = Store::open(&dir.path().join("reef.db")).unwrap();
        // A child of a manager, as a spawned worker holds it: two blocks.
        let capabilities = Capabilities {
            tools: vec!["read_file".into(), "write_file".into(), "shell".into()],
            read: vec!["notes/**".into(), "src/**".into()],
            domains: vec!["*.example.com".into()],
            ..Capabilities::default()
        };
        let grant = |agent: &str, by: &str| Grant {
            agent: agent.into(),
            by: by.into(),
            capabilities: capabilities.clone(),
            budget: Budget::default(),
        };
        let token = Token::mint(store.capability_root(), &grant("boss", OPERATOR))
            .unwrap()
            .attenuate(&grant("ada", "boss"))
            .unwrap();
        let agent = store
            .create_agent(NewAgent {
                id: AgentId::new(),
                name: "ada".into(),
                template: "worker".into(),
                persona: String::new(),
                model: None,
                workspace: workspace.display().to_string(),
                capabilities: capabilities.clone(),
                budget: Budget::default(),
                parent: None,
                ephemeral: false,
            })
            .await
            .unwrap();
        store
            .set_agent_token(&agent.id, token.text(), None, "cap.minted", json!({}))
            .await
            .unwrap();

        let tools = reef_tools::builtin_registry(
            Arc::new(Sandbox::new(SandboxPolicy::default())),
            BuiltinConfig::default(),
        );
        let read_file = tools.get("read_file").unwrap();
        let ctx = ToolContext {
            workspace: workspace.clone(),
            session_id: SessionId::new(),
            call_id: ToolCallId::from("call_1"),
            read_only: Vec::new(),
        };
        let args = json!({"path": "notes/a.md"});
        let needs = vec![
            Need::Tool("read_file".into()),
            Need::Read("notes/a.md".into()),
        ];
        assert_eq!(read_file.needs(&args), needs[1..]);

        let call = measure(|| {
            let (tool, ctx, args) = (read_file.clone(), ctx.clone(), args.clone());
            async move {
                tool.call(&ctx, args).await.unwrap();
            }
        })
        .await;
        let check = measure(|| {
            let (token, needs) = (&token, &needs);
            async move {
                token.check(needs, |_| false).unwrap();
            }
        })
        .await;
        // A path not asked about before each time: the authorizer runs.
        let mut n = 0u64;
        let first = measure(|| {
            n += 1;
            let needs = [
                Need::Tool("read_file".into()),
                Need::Read(format!("notes/{n}.md")),
            ];
            let token = &token;
            async move {
                token.check(&needs, |_| false).unwrap();
            }
        })
        .await;
        let rights = Rights::new(TokenSource::Stored);
        let decide = measure(|| {
            let (rights, store, needs) = (&rights, &store, &needs);
            async move {
                rights.decide(store, "ada", needs).await.unwrap();
            }
        })
        .await;

        let mut specs = Vec::new();
        for i in 0..5 {
            let path = dir.path().join(format!("secret{i}"));
            std::fs::write(&path, format!("value-{i}-Zq8Lm2Rx7Tv4Kp9W")).unwrap();
            specs.push(reef_core::SecretSpec {
                name: format!("S{i}"),
                source: reef_core::SecretSource::File(path),
                description: None,
                policy: reef_core::SecretPolicy::default(),
            });
        }
        let secrets = reef_tools::Secrets::new(specs);
        let hosts = vec!["api.example.com".to_owned()];
        let small = json!({"url": "https://api.example.com/v1/search?q=reef+agents&page=2",
            "method": "POST", "headers": {"Accept": "application/json"},
            "body": "{\"query\": \"coral reef monitoring\", \"limit\": 20}"})
        .to_string();
        let large = json!({"url": "https://api.example.com/upload", "method": "POST",
            "body": "lorem ipsum dolor sit amet 0123456789 ".repeat(420)})
        .to_string();
        let scan_small = measure(|| {
            let (secrets, text, hosts) = (&secrets, &small, &hosts);
            async move {
                assert!(
                    secrets
                        .review_outgoing(text, Some(hosts))
                        .findings
                        .is_empty()
                );
            }
        })
        .await;
        let scan_large = measure(|| {
            let (secrets, text, hosts) = (&secrets, &large, &hosts);
            async move {
                assert!(
                    secrets
                        .review_outgoing(text, Some(hosts))
                        .findings
                        .is_empty()
                );
            }
        })
        .await;

        println!("reef capability check per tool call ({CALLS} calls; a 2-block token, 2 needs)");
        println!("{:<44} {:>10} {:>10} {:>9}", "", "p50", "p99", "p50/call");
        for (label, (p50, p99)) in [
            ("read_file call (the tool itself)", call),
            ("token check, a path never asked before", first),
            ("token check, the same call again", check),
            ("full check (store read + token check)", decide),
            ("leak scan, 5 secrets, 200 B of arguments", scan_small),
            ("leak scan, 5 secrets, 16 KiB of arguments", scan_large),
        ] {
            println!(
                "{label:<44} {:>8.1}µs {:>8.1}µs {:>8.2}x",
                p50.as_secs_f64() * 1e6,
                p99.as_secs_f64() * 1e6,
                p50.as_secs_f64() / call.0.as_secs_f64()
            );
        }
    });
}
