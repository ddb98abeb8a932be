//! `reef chat`: an interactive conversation with slash commands.

use super::session;
use crate::args::ChatArgs;
use crate::exit;
use crate::render::{Mode, Renderer};
use reef_agent::Session;
use reef_config::Config;
use reef_store::Store;
use std::io::Write as _;
use tokio::io::{AsyncBufReadExt as _, BufReader};

const HELP: &str = "commands:
  /quit           leave (Ctrl-D too)
  /new            start a new session
  /model [NAME]   show the model, or switch to the configured provider NAME
  /cost           tokens used by this session, per provider and model
  /help           this list
Ctrl-C interrupts a running turn; at the prompt it leaves.";

pub async fn chat(overrides: &[String], args: ChatArgs) -> anyhow::Result<u8> {
    let (config, store) = session::prepare(overrides)?;
    super::models::ensure_installed(&config, args.yes).await?;
    let tools = session::Tools::from_config(&config, Some(&store)).await?;
    let mut current = session::open(&config, &store, &tools, args.session.as_deref()).await?;
    let mut renderer = Renderer::new(Mode::Human);
    announce(&current);
    let mut sigint = session::interrupts()?;
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    loop {
        prompt();
        let line = tokio::select! {
            line = lines.next_line() => line?,
            _ = sigint.recv() => {
                eprintln!();
                return Ok(exit::OK);
            }
        };
        let Some(line) = line else {
            eprintln!();
            return Ok(exit::OK);
        };
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        if let Some(command) = line.strip_prefix('/') {
            let mut parts = command.split_whitespace();
            match (parts.next().unwrap_or(""), parts.next()) {
                ("quit" | "exit" | "q", _) => return Ok(exit::OK),
                ("help" | "h" | "?", _) => eprintln!("{HELP}"),
                ("new", _) => {
                    current = session::open(&config, &store, &tools, None).await?;
                    announce(&current);
                }
                ("model", None) => show_models(&config, &current),
                ("model", Some(name)) => switch_model(&config, &mut current, name),
                ("cost", _) => show_cost(&store, &current).await?,
                (other, _) => eprintln!("unknown command /{other}; /help lists them"),
            }
            continue;
        }
        let mut handle = reef_agent::spawn(current);
        let result = session::drive_turn(
            &mut handle,
            &mut renderer,
            &mut sigint,
            line.to_owned(),
            tools.warning.as_deref(),
        )
        .await;
        let Some(back) = session::shutdown(handle, &mut renderer).await else {
            anyhow::bail!("the session task failed");
        };
        current = back;
        if let Err(err) = result {
            eprintln!("error: {err:#}");
        }
    }
}

fn prompt() {
    let mut out = std::io::stdout().lock();
    let _ = write!(out, "you> ");
    let _ = out.flush();
}

fn announce(session: &Session) {
    eprintln!(
        "[session {} · {} / {} · /help for commands]",
        session.id(),
        session.model().provider(),
        session.model().model()
    );
}

fn show_models(config: &Config, current: &Session) {
    eprintln!(
        "current: {} ({})",
        current.model().provider(),
        current.model().model()
    );
    for (name, p) in &config.providers {
        eprintln!("  {name}: {} {} at {}", p.wire_api, p.model, p.base_url);
    }
}

fn switch_model(config: &Config, current: &mut Session, name: &str) {
    let Some(provider) = config.providers.get(name) else {
        let names: Vec<&str> = config.providers.keys().map(String::as_str).collect();
        eprintln!("no provider `{name}`; configured: {}", names.join(", "));
        return;
    };
    match reef_agent::model_client(provider) {
        Ok(client) => {
            current.set_model(client);
            eprintln!("switched to {name} ({})", provider.model);
        }
        Err(err) => eprintln!("cannot use provider `{name}`: {err}"),
    }
}

async fn show_cost(store: &Store, current: &Session) -> anyhow::Result<()> {
    let records = store.usage(current.id()).await?;
    // (input, output, cached, requests, cost, unpriced requests) per provider and model.
    type Row = (u64, u64, u64, u32, u64, u32);
    let mut rows: std::collections::BTreeMap<(String, String), Row> = Default::default();
    for r in &records {
        let row = rows
            .entry((r.provider.clone(), r.model.clone()))
            .or_default();
        row.0 += r.usage.input_tokens;
        row.1 += r.usage.output_tokens;
        row.2 += r.usage.cached_input_tokens;
        row.3 += 1;
        match r.cost_micros {
            Some(cost) => row.4 += cost,
            None => row.5 += 1,
        }
    }
    if rows.is_empty() {
        eprintln!("no model requests in this session yet");
    }
    let mut total = 0;
    for ((provider, model), (input, output, cached, requests, cost, unpriced)) in rows {
        total += cost;
        let price_note = if unpriced > 0 {
            format!(" ({unpriced} request(s) without a known price)")
        } else {
            String::new()
        };
        eprintln!(
            "{provider} / {model}: {requests} request(s), {input} input ({cached} cached) + \
             {output} output tokens, ${:.4}{price_note}",
            cost as f64 / 1e6
        );
    }
    eprintln!("total: ${:.4}", total as f64 / 1e6);
    Ok(())
}
