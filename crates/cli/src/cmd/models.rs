//! `reef models pull|list|rm`, and the offer to pull a missing local model before a session.

use crate::args::ModelsCommand;
use crate::exit::Exit;
use crate::home;
use anyhow::Context as _;
use reef_config::Config;
use reef_core::WireApi;
use reef_models::{CatalogueEntry, ModelStore, PullEvent, PullOutcome, Puller};
use std::io::{BufRead as _, IsTerminal as _, Write as _};
use std::sync::Mutex;

pub async fn models(overrides: &[String], command: ModelsCommand) -> anyhow::Result<u8> {
    let config = home::load_config(overrides)?;
    let store = ModelStore::new(&config.models.dir);
    match command {
        ModelsCommand::Pull { name } => {
            let entry = reef_models::entry(&name).map_err(|e| Exit::usage(e.to_string()))?;
            pull(&config, entry).await?;
        }
        ModelsCommand::List(flag) => list(&store, flag.json)?,
        ModelsCommand::Rm { name } => {
            let freed = store.remove(&name).map_err(|e| match e {
                reef_models::ModelsError::NotInstalled(_) => Exit::usage(e.to_string()),
                other => anyhow::Error::new(other),
            })?;
            eprintln!("removed {name} ({})", megabytes(freed));
        }
    }
    Ok(crate::exit::OK)
}

/// Downloads `entry` with a progress line on stderr.
pub async fn pull(config: &Config, entry: &CatalogueEntry) -> anyhow::Result<()> {
    let puller = Puller::new(
        ModelStore::new(&config.models.dir),
        &config.models.index_url,
    )?;
    let progress = Progress::new(entry.name);
    let outcome = puller.pull(entry, &|e| progress.on(e)).await;
    progress.end_line();
    match outcome? {
        PullOutcome::AlreadyInstalled { path } => {
            eprintln!("{} is already installed: {}", entry.name, path.display());
        }
        PullOutcome::Downloaded { path, source } => {
            eprintln!(
                "{} installed ({}, sha256 verified) from {source}\n  {}",
                entry.name,
                megabytes(entry.size),
                path.display()
            );
        }
    }
    Ok(())
}

fn list(store: &ModelStore, json: bool) -> anyhow::Result<()> {
    let installed = store.list()?;
    let mut rows = Vec::new();
    for entry in reef_models::CATALOGUE {
        let found = installed
            .iter()
            .find(|m| m.name == entry.name)
            .filter(|_| store.is_installed(entry.name));
        rows.push(serde_json::json!({
            "name": entry.name,
            "kind": entry.kind,
            "installed": found.is_some(),
            "size": entry.size,
            "tools": entry.tools,
            "default": entry.name == reef_models::DEFAULT_MODEL,
            "path": found.map(|m| m.path.display().to_string()),
            "description": entry.description,
        }));
    }
    for model in installed.iter().filter(|m| !m.catalogued) {
        rows.push(serde_json::json!({
            "name": model.name,
            "kind": serde_json::Value::Null,
            "installed": true,
            "size": model.size,
            "tools": serde_json::Value::Null,
            "default": false,
            "path": model.path.display().to_string(),
            "description": "not in the catalogue (added by hand)",
        }));
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(());
    }
    println!("{:<30} {:>9}  {:<9}  DESCRIPTION", "NAME", "SIZE", "STATUS");
    for row in &rows {
        let name = row["name"].as_str().unwrap_or_default();
        let marker = if row["default"] == true { " *" } else { "" };
        println!(
            "{:<30} {:>9}  {:<9}  {}",
            format!("{name}{marker}"),
            megabytes(row["size"].as_u64().unwrap_or(0)),
            if row["installed"] == true {
                "installed"
            } else {
                "-"
            },
            row["description"].as_str().unwrap_or_default()
        );
    }
    println!("(* the default; models live in {})", store.dir().display());
    Ok(())
}

/// Before a session: every local provider the model chain uses must have its file. A missing
/// catalogue model is pulled after asking on a terminal, or at once with `--yes`.
pub async fn ensure_installed(config: &Config, yes: bool) -> anyhow::Result<()> {
    for name in &config.model_chain {
        let Some(provider) = config.providers.get(name) else {
            continue;
        };
        let Some(path) = provider.model_path.as_deref() else {
            continue;
        };
        if provider.wire_api != WireApi::Local || path.is_file() {
            continue;
        }
        let Some(entry) = reef_models::find(&provider.model) else {
            return Err(Exit::usage(format!(
                "provider `{name}`: model file {} does not exist (and `{}` is not a catalogue model reef can pull)",
                path.display(),
                provider.model
            )));
        };
        let why = if config.implicit_local {
            "No model provider is configured, so reef runs the embedded local model".to_owned()
        } else {
            format!("Provider `{name}` runs a local model")
        };
        if !yes {
            if !std::io::stdin().is_terminal() || !std::io::stderr().is_terminal() {
                return Err(Exit::usage(format!(
                    "{why} `{}`, which is not downloaded yet: run `reef models pull {}` or pass --yes",
                    entry.name, entry.name
                )));
            }
            eprint!(
                "{why} `{}` ({}), which is not downloaded yet.\nDownload it now? [Y/n] ",
                entry.name,
                megabytes(entry.size)
            );
            std::io::stderr().flush().ok();
            let mut answer = String::new();
            std::io::stdin()
                .lock()
                .read_line(&mut answer)
                .context("cannot read the answer")?;
            if !matches!(
                answer.trim().to_ascii_lowercase().as_str(),
                "" | "y" | "yes"
            ) {
                return Err(Exit::usage(format!(
                    "not downloaded; `reef models pull {}` fetches it later",
                    entry.name
                )));
            }
        }
        pull(config, entry).await?;
    }
    Ok(())
}

fn megabytes(bytes: u64) -> String {
    if bytes >= 1_000_000_000 {
        format!("{:.1} GB", bytes as f64 / 1e9)
    } else {
        format!("{} MB", bytes.div_ceil(1_000_000))
    }
}

/// A one-line progress display on stderr (redrawn in place on a terminal, a line per 10%
/// otherwise).
struct Progress {
    name: &'static str,
    terminal: bool,
    last: Mutex<(u64, u64)>,
}

impl Progress {
    fn new(name: &'static str) -> Self {
        Self {
            name,
            terminal: std::io::stderr().is_terminal(),
            last: Mutex::new((u64::MAX, 0)),
        }
    }

    fn on(&self, event: PullEvent<'_>) {
        match event {
            PullEvent::Source(source) => eprintln!("pulling {} from {source}", self.name),
            PullEvent::Progress { done, total } => self.bar(done, total),
            PullEvent::Verifying => {
                self.end_line();
                eprintln!("verifying sha256…");
            }
            PullEvent::SourceFailed(failure) => {
                self.end_line();
                eprintln!("  failed: {failure}");
            }
        }
    }

    fn bar(&self, done: u64, total: u64) {
        let Ok(mut last) = self.last.lock() else {
            return;
        };
        let percent = (done.saturating_mul(100))
            .checked_div(total)
            .unwrap_or(0)
            .min(100);
        let step = if self.terminal {
            percent
        } else {
            percent / 10 * 10
        };
        if last.0 == step {
            return;
        }
        *last = (step, done);
        if self.terminal {
            let filled = (percent / 4) as usize;
            eprint!(
                "\r  [{}{}] {percent:>3}%  {} / {}",
                "#".repeat(filled),
                " ".repeat(25 - filled),
                megabytes(done),
                megabytes(total)
            );
        } else {
            eprintln!(
                "  {percent:>3}%  {} / {}",
                megabytes(done),
                megabytes(total)
            );
        }
    }

    fn end_line(&self) {
        if self.terminal && self.last.lock().is_ok_and(|l| l.0 != u64::MAX) {
            eprintln!();
        }
        if let Ok(mut last) = self.last.lock() {
            *last = (u64::MAX, 0);
        }
    }
}
