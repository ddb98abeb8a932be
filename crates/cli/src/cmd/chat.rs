//! `reef chat`: an interactive conversation with slash commands, on one agent session that
//! lives for the whole chat (`/new`, `/model` and `/compact` are operations on it).

use super::session;
use crate::args::ChatArgs;
use crate::exit;
use crate::render::{Mode, Renderer};
use reef_agent::{AgentHandle, ModelResolver};
use reef_config::Config;
use reef_core::{EventMsg, Op, SessionId};
use reef_store::Store;
use std::io::Write as _;
use std::sync::Arc;
use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::signal::unix::Signal;

const HELP: &str = "commands:
  /quit           leave (Ctrl-D too)
  /new            start a new session (same workspace and model; notes and memory stay)
  /compact        shrink the context now: older turns are summarized or dropped, as
                  agent.compaction says (the transcript keeps them)
  /model [NAME]   show the model, or switch to the configured provider NAME
  /cost           tokens used by this session, per provider and model
  /help           this list
Ctrl-C interrupts a running turn; at the prompt it leaves.";

/// What the chat knows of its session, from the session's events.
struct Current {
    id: SessionId,
    provider: String,
    model: String,
}

/// What one chat works with.
struct Chat {
    config: Config,
    store: Store,
    tools: session::Tools,
    handle: AgentHandle,
    renderer: Renderer,
    sigint: Signal,
    current: Current,
}

pub async fn chat(overrides: &[String], args: ChatArgs) -> anyhow::Result<u8> {
    let (config, store) = session::prepare(overrides)?;
    super::models::ensure_installed(&config, args.yes).await?;
    let tools = session::Tools::from_config(&config, Some(&store)).await?;
    let mut opened = session::open(&config, &store, &tools, args.session.as_deref()).await?;
    opened.set_model_resolver(resolver(&config));
    let current = Current {
        id: opened.id().clone(),
        provider: opened.model().provider().to_owned(),
        model: opened.model().model().to_owned(),
    };
    let sigint = session::interrupts()?;
    let mut chat = Chat {
        config,
        store,
        tools,
        handle: reef_agent::spawn(opened),
        renderer: Renderer::new(Mode::Human),
        sigint,
        current,
    };
    eprintln!(
        "[session {} · {} / {} · /help for commands]",
        chat.current.id, chat.current.provider, chat.current.model
    );
    let result = chat.converse().await;
    session::shutdown(chat.handle, &mut chat.renderer).await;
    result
}

/// Finds a configured provider by name for `Op::SetModel` (`None`: the default model).
fn resolver(config: &Config) -> ModelResolver {
    let config = Arc::new(config.clone());
    Arc::new(move |name: Option<&str>| {
        let Some(name) = name else {
            return reef_agent::default_model(&config).map_err(|e| e.to_string());
        };
        let Some(provider) = config.providers.get(name) else {
            let names: Vec<&str> = config.providers.keys().map(String::as_str).collect();
            return Err(format!(
                "no provider `{name}`; configured: {}",
                names.join(", ")
            ));
        };
        reef_agent::model_client(provider).map_err(|e| format!("cannot use provider `{name}`: {e}"))
    })
}

impl Chat {
    /// Reads lines until `/quit`, end of input or Ctrl-C at the prompt.
    async fn converse(&mut self) -> anyhow::Result<u8> {
        let mut lines = BufReader::new(tokio::io::stdin()).lines();
        loop {
            prompt();
            let line = tokio::select! {
                line = lines.next_line() => line?,
                _ = self.sigint.recv() => {
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
                    ("new", _) => self.new_session().await?,
                    ("compact", _) => {
                        self.command(Op::Compact, "the compaction").await?;
                    }
                    ("model", None) => self.show_models(),
                    ("model", Some(name)) => self.switch_model(name).await?,
                    ("cost", _) => show_cost(&self.store, &self.current.id).await?,
                    (other, _) => eprintln!("unknown command /{other}; /help lists them"),
                }
                continue;
            }
            let result = session::drive_turn(
                &mut self.handle,
                &mut self.renderer,
                &mut self.sigint,
                line.to_owned(),
                self.tools.warning.as_deref(),
            )
            .await;
            if let Err(err) = result {
                eprintln!("error: {err:#}");
            }
        }
    }

    /// Submits `op`, renders its events and returns them once it is done. The session answers
    /// operations in order and always answers `Interrupt` when no turn runs, so the interrupt
    /// submitted after `op` marks where `op`'s events end. The first Ctrl-C says that `what`
    /// cannot be interrupted; a second one exits at once.
    async fn command(&mut self, op: Op, what: &str) -> anyhow::Result<Vec<EventMsg>> {
        let id = self.handle.submit(op);
        let end = self.handle.submit(Op::Interrupt);
        let mut events = Vec::new();
        let mut warned = false;
        loop {
            tokio::select! {
                event = self.handle.next_event() => {
                    let Some(event) = event else {
                        anyhow::bail!("the session ended unexpectedly");
                    };
                    if event.id == end {
                        return Ok(events);
                    }
                    self.renderer.event(&event);
                    if event.id == id {
                        events.push(event.msg);
                    }
                }
                _ = self.sigint.recv() => {
                    if warned {
                        std::process::exit(i32::from(exit::INTERRUPTED));
                    }
                    warned = true;
                    eprintln!(
                        "\n^C: {what} cannot be interrupted; it ends shortly \
                         (press Ctrl-C again to quit now)"
                    );
                }
            }
        }
    }

    async fn new_session(&mut self) -> anyhow::Result<()> {
        for msg in self.command(Op::NewSession, "starting a session").await? {
            if let EventMsg::SessionConfigured {
                session_id,
                provider,
                model,
                ..
            } = msg
            {
                eprintln!("[new session {session_id} · {provider} / {model}]");
                self.current = Current {
                    id: session_id,
                    provider,
                    model,
                };
            }
        }
        Ok(())
    }

    async fn switch_model(&mut self, name: &str) -> anyhow::Result<()> {
        let op = Op::SetModel {
            provider: Some(name.to_owned()),
        };
        for msg in self.command(op, "switching the model").await? {
            if let EventMsg::ModelChanged { provider, model } = msg {
                self.current.provider = provider;
                self.current.model = model;
            }
        }
        Ok(())
    }

    fn show_models(&self) {
        eprintln!(
            "current: {} ({})",
            self.current.provider, self.current.model
        );
        for (name, p) in &self.config.providers {
            eprintln!("  {name}: {} {} at {}", p.wire_api, p.model, p.base_url);
        }
    }
}

fn prompt() {
    let mut out = std::io::stdout().lock();
    let _ = write!(out, "you> ");
    let _ = out.flush();
}

async fn show_cost(store: &Store, session: &SessionId) -> anyhow::Result<()> {
    let records = store.usage(session).await?;
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
