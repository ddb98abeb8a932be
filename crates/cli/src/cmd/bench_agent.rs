//! `reef bench agent`: runs the agent task suite as `reef run` turns, each task in a fresh
//! workspace, checks each result by its effect or its answer, and reports the pass rate,
//! model rounds, tokens and wall time per task.

use super::agent_suite::{self, Task};
use super::session::Tools;
use crate::args::BenchAgentArgs;
use crate::exit::{self, Exit};
use crate::home;
use anyhow::Context as _;
use reef_core::{EventMsg, ModelClient, Op, TurnOutcome};
use serde::Serialize;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

/// How one task went.
#[derive(Debug, Serialize)]
struct TaskResult {
    name: String,
    passed: bool,
    /// Failed checks, one per line.
    failures: Vec<String>,
    /// How the turn ended: completed, max_rounds, timed_out, …
    outcome: String,
    answer: String,
    rounds: u32,
    tokens: u64,
    wall_secs: f64,
    tool_calls: Vec<String>,
    /// Tool calls that ran after the lenient parser recovered them from text.
    text_calls: u32,
    /// Answers the small-model profile sent back to the model.
    sent_back: u32,
}

pub async fn agent(overrides: &[String], args: BenchAgentArgs) -> anyhow::Result<u8> {
    let (text, origin) = match &args.suite {
        Some(path) => (
            std::fs::read_to_string(path).map_err(|e| {
                Exit::usage(format!("--suite: cannot read {}: {e}", path.display()))
            })?,
            path.display().to_string(),
        ),
        None => (agent_suite::BUILTIN.to_owned(), "built-in suite".to_owned()),
    };
    let mut tasks = agent_suite::parse(&text, &origin)?;
    if let Some(only) = &args.task {
        tasks.retain(|t| only.contains(&t.name));
        if tasks.is_empty() {
            return Err(Exit::usage(format!(
                "--task: no task of the suite is named {}",
                only.join(", ")
            )));
        }
    }
    let mut overrides = overrides.to_vec();
    overrides.extend(model_overrides(
        overrides.as_slice(),
        args.model.as_deref(),
    )?);
    let mut config = home::load_config(&overrides)?;
    let provider = config.provider()?.clone();
    // An embedded model left to pick its threads takes the cores idle when it loads; a
    // benchmark uses them all, so that its figures do not depend on what ran just before.
    if provider.wire_api == reef_core::WireApi::Local && provider.threads.is_none() {
        let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
        if config.implicit_local {
            // The zero-config default exists only while no provider is configured.
            overrides.push(format!("providers.{}.wire_api=local", provider.name));
            overrides.push(format!(
                "providers.{}.model={}",
                provider.name, provider.model
            ));
        }
        overrides.push(format!("providers.{}.threads={cores}", provider.name));
        config = home::load_config(&overrides)?;
    }
    let provider = config.provider()?.clone();
    let model = reef_agent::default_model(&config)?;

    let scratch = tempfile::tempdir().context("cannot create a scratch directory")?;
    let store = reef_store::Store::open(&scratch.path().join("bench.db"))?;
    let tools = Tools::from_config(&config, Some(&store)).await?;
    // One workspace path for every task (emptied in between), so the system prompt, which
    // names it, stays the same and a local model's cache keeps serving it.
    let workspace = scratch.path().join("workspace");
    if !args.json {
        let threads = provider
            .threads
            .map(|n| format!(", {n} threads"))
            .unwrap_or_default();
        println!(
            "{} tasks ({origin}) with {} ({}{threads})",
            tasks.len(),
            provider.name,
            provider.model
        );
    }
    let mut results = Vec::with_capacity(tasks.len());
    for task in &tasks {
        let result = run_task(&config, &model, &tools, &store, &workspace, task).await?;
        if !args.json {
            print_result(&result);
        }
        results.push(result);
    }
    let report = summary(&results, &provider.name, &provider.model);
    if args.json {
        let doc = serde_json::json!({"summary": report, "tasks": results});
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        println!(
            "passed {}/{} ({:.0}%); per task: median {} rounds, median {:.1} s, median {} \
             tokens; {} of {} tool calls were recovered from text; {} answers sent back",
            report.passed,
            report.tasks,
            report.pass_rate * 100.0,
            report.median_rounds,
            report.median_wall_secs,
            report.median_tokens,
            report.text_calls,
            report.tool_calls,
            report.sent_back
        );
    }
    Ok(exit::OK)
}

/// `-c` overrides that make `--model NAME` the default: a configured provider, or a model of
/// reef's catalogue run by the embedded engine.
fn model_overrides(given: &[String], model: Option<&str>) -> anyhow::Result<Vec<String>> {
    let Some(name) = model else {
        return Ok(Vec::new());
    };
    let config = home::load_config(given)?;
    if config.providers.contains_key(name) {
        return Ok(vec![format!("model.default={name}")]);
    }
    if reef_models::find(name).is_some() {
        return Ok(vec![
            "providers.bench-local.wire_api=local".into(),
            format!("providers.bench-local.model={name}"),
            "model.default=bench-local".into(),
        ]);
    }
    Err(Exit::usage(format!(
        "--model: `{name}` is neither a configured provider ({}) nor a catalogue model \
         (`reef models list`)",
        config
            .providers
            .keys()
            .cloned()
            .collect::<Vec<_>>()
            .join(", ")
    )))
}

async fn run_task(
    config: &reef_config::Config,
    model: &Arc<dyn ModelClient>,
    tools: &Tools,
    store: &reef_store::Store,
    workspace: &Path,
    task: &Task,
) -> anyhow::Result<TaskResult> {
    if workspace.exists() {
        std::fs::remove_dir_all(workspace).context("cannot empty the task workspace")?;
    }
    std::fs::create_dir_all(workspace).context("cannot create the task workspace")?;
    agent_suite::lay_out(task, workspace).context("cannot write the task's files")?;
    let opts = reef_agent::session_options(config, workspace.to_owned());
    let session =
        reef_agent::Session::create(model.clone(), tools.registry.clone(), store.clone(), opts)
            .await?;
    let mut handle = reef_agent::spawn(session);
    let started = Instant::now();
    handle.submit(Op::UserInput {
        text: task.prompt.clone(),
    });
    let mut tool_calls = Vec::new();
    let mut text_calls = 0;
    let mut sent_back = 0;
    let (outcome, rounds, usage) = loop {
        let Some(event) = handle.next_event().await else {
            anyhow::bail!("the session ended unexpectedly");
        };
        match event.msg {
            EventMsg::ToolCallBegin {
                name, arguments, ..
            } => tool_calls.push(format!("{name} {arguments}")),
            EventMsg::Warning { message } if message.contains("the answer was sent back") => {
                sent_back += 1;
            }
            EventMsg::Warning { message } if message.contains("tool call(s) as text") => {
                // "… reef parsed them and ran N": the calls that ran.
                text_calls += message
                    .rsplit(' ')
                    .next()
                    .and_then(|n| n.parse::<u32>().ok())
                    .unwrap_or(1);
            }
            EventMsg::TurnEnded {
                outcome,
                rounds,
                usage,
            } => break (outcome, rounds, usage),
            _ => {}
        }
    };
    let wall_secs = started.elapsed().as_secs_f64();
    handle.submit(Op::Shutdown);
    while handle.next_event().await.is_some() {}
    handle.join().await;
    let answer = match &outcome {
        TurnOutcome::Completed { text } => text.clone(),
        _ => String::new(),
    };
    let mut failures = agent_suite::check(task, workspace, &answer);
    match &outcome {
        TurnOutcome::Completed { .. } => {}
        TurnOutcome::Failed { error } => {
            failures.insert(0, format!("the turn failed: {error}"));
        }
        other => failures.insert(
            0,
            format!("the turn did not complete: {}", outcome_name(other)),
        ),
    }
    Ok(TaskResult {
        name: task.name.clone(),
        passed: failures.is_empty(),
        failures,
        outcome: outcome_name(&outcome),
        answer,
        rounds,
        tokens: usage.input_tokens + usage.output_tokens,
        wall_secs,
        tool_calls,
        text_calls,
        sent_back,
    })
}

fn outcome_name(outcome: &TurnOutcome) -> String {
    serde_json::to_value(outcome)
        .ok()
        .and_then(|v| v.get("status").and_then(|k| k.as_str()).map(str::to_owned))
        .unwrap_or_else(|| format!("{outcome:?}"))
}

fn print_result(r: &TaskResult) {
    println!(
        "{} {:<28} {:>2} rounds {:>7} tokens {:>6.1} s{}",
        if r.passed { "PASS" } else { "FAIL" },
        r.name,
        r.rounds,
        r.tokens,
        r.wall_secs,
        match r.sent_back {
            0 => String::new(),
            n => format!("  ({n} sent back)"),
        }
    );
    for call in &r.tool_calls {
        println!("       called {}", crate::render::clip(call, 160));
    }
    if !r.passed {
        for failure in &r.failures {
            println!("       {failure}");
        }
        println!(
            "       answered: {}",
            crate::render::clip(&r.answer.replace('\n', " "), 160)
        );
    }
}

#[derive(Debug, Serialize)]
struct Summary {
    provider: String,
    model: String,
    tasks: usize,
    passed: usize,
    pass_rate: f64,
    median_rounds: u32,
    median_wall_secs: f64,
    median_tokens: u64,
    total_wall_secs: f64,
    tool_calls: usize,
    text_calls: u32,
    sent_back: u32,
}

fn summary(results: &[TaskResult], provider: &str, model: &str) -> Summary {
    let passed = results.iter().filter(|r| r.passed).count();
    Summary {
        provider: provider.to_owned(),
        model: model.to_owned(),
        tasks: results.len(),
        passed,
        pass_rate: passed as f64 / results.len().max(1) as f64,
        median_rounds: median(results.iter().map(|r| r.rounds).collect()),
        median_wall_secs: median_f(results.iter().map(|r| r.wall_secs).collect()),
        median_tokens: median(results.iter().map(|r| r.tokens).collect()),
        total_wall_secs: results.iter().map(|r| r.wall_secs).sum(),
        tool_calls: results.iter().map(|r| r.tool_calls.len()).sum(),
        text_calls: results.iter().map(|r| r.text_calls).sum(),
        sent_back: results.iter().map(|r| r.sent_back).sum(),
    }
}

fn median<T: Ord + Copy + Default>(mut values: Vec<T>) -> T {
    values.sort_unstable();
    values.get(values.len() / 2).copied().unwrap_or_default()
}

fn median_f(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(0.0)
}
