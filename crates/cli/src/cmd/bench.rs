//! `reef bench model`: the embedded model on this machine — load time, prompt and generation
//! tokens per second (plain and under the tool grammar), and the end-to-end latency of a small
//! tool-using task run as a real agent turn (sandboxed shell included).

use super::session::Tools;
use crate::args::BenchModelArgs;
use crate::exit::Exit;
use crate::home;
use anyhow::Context as _;
use reef_core::{EventMsg, Message, ModelClient, ModelRequest, Op, ToolSpec, TurnOutcome};
use reef_local::{LocalClient, LocalSettings, LocalStats};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub async fn model(overrides: &[String], args: BenchModelArgs) -> anyhow::Result<u8> {
    let config = home::load_config(overrides)?;
    let name = args.model.clone();
    let path = config.models.dir.join(format!("{name}.gguf"));
    if !path.is_file() {
        return Err(Exit::usage(format!(
            "model `{name}` is not installed ({}): run `reef models pull {name}`",
            path.display()
        )));
    }
    if args.runs == 0 {
        return Err(Exit::usage("--runs must be at least 1"));
    }
    let client = Arc::new(LocalClient::new(LocalSettings {
        provider: "bench".into(),
        model: name.clone(),
        model_path: path,
        threads: args.threads,
        context_tokens: 8192,
        max_output_tokens: 512,
        sampling: reef_core::Sampling::default(),
    }));
    let started = Instant::now();
    client.load().await?;
    let load_time = started.elapsed();
    let threads = client.threads().unwrap_or(0);

    // Baseline: the same request shape without and with the tool grammar.
    let question = vec![Message::user(
        "Name three uses of a terminal, one line each.",
    )];
    let plain = measure(&client, &question, Vec::new()).await?;
    let shell = ToolSpec {
        name: "shell".into(),
        description: "Run a shell command and return its output".into(),
        parameters: serde_json::json!({"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}),
    };
    let grammar = measure(&client, &question, vec![shell]).await?;

    // The task, as full agent turns.
    let tools = Tools::from_config(&config, None).await?;
    let scratch = tempfile::tempdir().context("cannot create a scratch directory")?;
    let store = reef_store::Store::open(&scratch.path().join("bench.db"))?;
    let mut runs = Vec::new();
    for _ in 0..args.runs {
        let before = client.stats();
        let model: Arc<dyn ModelClient> = client.clone();
        let opts = reef_agent::session_options(&config, scratch.path().to_owned());
        let session =
            reef_agent::Session::create(model, tools.registry.clone(), store.clone(), opts).await?;
        let mut handle = reef_agent::spawn(session);
        let started = Instant::now();
        handle.submit(Op::UserInput {
            text: args.prompt.clone(),
        });
        let mut calls = Vec::new();
        let outcome = loop {
            let Some(event) = handle.next_event().await else {
                anyhow::bail!("the session ended unexpectedly");
            };
            match event.msg {
                EventMsg::ToolCallBegin {
                    name, arguments, ..
                } => calls.push(format!("{name} {arguments}")),
                EventMsg::TurnEnded { outcome, .. } => break outcome,
                _ => {}
            }
        };
        let latency = started.elapsed();
        handle.submit(Op::Shutdown);
        while handle.next_event().await.is_some() {}
        let stats = delta(client.stats(), before);
        let answer = match &outcome {
            TurnOutcome::Completed { text } => text.clone(),
            other => format!("(turn ended: {other:?})"),
        };
        runs.push(Run {
            latency,
            calls,
            answer,
            stats,
        });
    }

    let report = serde_json::json!({
        "model": name,
        "threads": threads,
        "load_secs": load_time.as_secs_f64(),
        "plain": phase_json(&plain),
        "grammar": phase_json(&grammar),
        "grammar_vs_plain_generation": ratio(grammar.generation_tokens_per_sec(), plain.generation_tokens_per_sec()),
        "task": args.prompt,
        "runs": runs.iter().map(|r| serde_json::json!({
            "latency_secs": r.latency.as_secs_f64(),
            "tool_calls": r.calls,
            "answer": r.answer,
            "model_requests": r.stats.requests,
            "prompt_tokens": r.stats.prompt_tokens,
            "cached_prompt_tokens": r.stats.cached_tokens,
            "output_tokens": r.stats.output_tokens,
            "prompt_tokens_per_sec": r.stats.prompt_tokens_per_sec(),
            "generation_tokens_per_sec": r.stats.generation_tokens_per_sec(),
            "model_share": ratio((r.stats.prompt_time + r.stats.generation_time).as_secs_f64(), r.latency.as_secs_f64()),
        })).collect::<Vec<_>>(),
        "task_latency_secs": summary(runs.iter().map(|r| r.latency.as_secs_f64()).collect()),
    });
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(crate::exit::OK);
    }
    println!(
        "model {name}: loaded in {:.2} s, {threads} threads",
        load_time.as_secs_f64()
    );
    for (label, phase) in [("plain", &plain), ("under the tool grammar", &grammar)] {
        println!(
            "  {label}: prompt {:.1} tok/s ({} tokens), generation {:.1} tok/s ({} tokens)",
            phase.prompt_tokens_per_sec(),
            phase.prompt_tokens - phase.cached_tokens,
            phase.generation_tokens_per_sec(),
            phase.output_tokens
        );
    }
    println!(
        "  generation under the grammar / plain: {:.2}",
        ratio(
            grammar.generation_tokens_per_sec(),
            plain.generation_tokens_per_sec()
        )
    );
    println!("task: {}", args.prompt);
    for (i, run) in runs.iter().enumerate() {
        println!(
            "  run {}: {:.2} s end to end, {} model requests, {} prompt tokens ({} from the KV cache, the rest at {:.1} tok/s), {} generated at {:.1} tok/s, model time {:.0}%",
            i + 1,
            run.latency.as_secs_f64(),
            run.stats.requests,
            run.stats.prompt_tokens,
            run.stats.cached_tokens,
            run.stats.prompt_tokens_per_sec(),
            run.stats.output_tokens,
            run.stats.generation_tokens_per_sec(),
            100.0
                * ratio(
                    (run.stats.prompt_time + run.stats.generation_time).as_secs_f64(),
                    run.latency.as_secs_f64()
                )
        );
        for call in &run.calls {
            println!("    called {call}");
        }
        println!("    answered: {}", run.answer.replace('\n', " "));
    }
    let latencies = summary(runs.iter().map(|r| r.latency.as_secs_f64()).collect());
    println!(
        "  latency: min {:.2} s, median {:.2} s, max {:.2} s",
        latencies["min"].as_f64().unwrap_or(0.0),
        latencies["median"].as_f64().unwrap_or(0.0),
        latencies["max"].as_f64().unwrap_or(0.0)
    );
    Ok(crate::exit::OK)
}

struct Run {
    latency: Duration,
    calls: Vec<String>,
    answer: String,
    stats: LocalStats,
}

/// One request from a clean cache; the statistics of just that request.
async fn measure(
    client: &LocalClient,
    messages: &[Message],
    tools: Vec<ToolSpec>,
) -> anyhow::Result<LocalStats> {
    let before = client.stats();
    // A distinct first message keeps the KV cache from serving the prompt.
    let mut messages = messages.to_vec();
    messages.insert(
        0,
        Message::system(format!(
            "You are a helpful assistant. (run {})",
            before.requests
        )),
    );
    let request = ModelRequest {
        messages,
        tools,
        max_output_tokens: Some(96),
        ..Default::default()
    };
    client.complete(&request, &|_| {}).await?;
    Ok(delta(client.stats(), before))
}

fn delta(after: LocalStats, before: LocalStats) -> LocalStats {
    LocalStats {
        requests: after.requests - before.requests,
        prompt_tokens: after.prompt_tokens - before.prompt_tokens,
        cached_tokens: after.cached_tokens - before.cached_tokens,
        prompt_time: after.prompt_time.saturating_sub(before.prompt_time),
        output_tokens: after.output_tokens - before.output_tokens,
        generation_time: after.generation_time.saturating_sub(before.generation_time),
    }
}

fn phase_json(s: &LocalStats) -> serde_json::Value {
    serde_json::json!({
        "prompt_tokens": s.prompt_tokens - s.cached_tokens,
        "prompt_tokens_per_sec": s.prompt_tokens_per_sec(),
        "output_tokens": s.output_tokens,
        "generation_tokens_per_sec": s.generation_tokens_per_sec(),
    })
}

fn ratio(a: f64, b: f64) -> f64 {
    if b == 0.0 { 0.0 } else { a / b }
}

fn summary(mut values: Vec<f64>) -> serde_json::Value {
    values.sort_by(f64::total_cmp);
    let at = |q: f64| {
        values
            .get(((values.len() - 1) as f64 * q).round() as usize)
            .copied()
            .unwrap_or(0.0)
    };
    serde_json::json!({"min": at(0.0), "median": at(0.5), "max": at(1.0)})
}
