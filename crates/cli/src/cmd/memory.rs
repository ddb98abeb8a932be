//! `reef memory add|search|list|forget|import`: long-term memory from the command line, in an
//! agent's namespace (`--agent`, default `main`) and the shared one.

use crate::args::{MemoryCommand, MemoryScopeArgs};
use crate::exit::Exit;
use crate::home;
use crate::render::clip;
use anyhow::Context as _;
use reef_store::{Memory, NewMemory, SHARED_NAMESPACE, Saved, SearchOutcome, SearchRequest};
use std::io::Read as _;
use std::path::{Path, PathBuf};

/// Files `import` reads, by extension.
const TEXT_EXTENSIONS: &[&str] = &["md", "markdown", "txt", "text", "rst", "org"];

/// Files larger than this are skipped by `import` (with a warning).
const MAX_IMPORT_BYTES: u64 = 8 * 1024 * 1024;

pub async fn memory(overrides: &[String], command: MemoryCommand) -> anyhow::Result<u8> {
    let config = home::load_config(overrides)?;
    let store = home::open_store(&config)?;
    let memory = reef_agent::memory(&config, store);
    // Next to a running daemon, searches are the daemon's and embedding is its background
    // embedder's.
    let daemon = crate::cmd::client::daemon_running(&config);
    match command {
        MemoryCommand::Add { text, tags, scope } => {
            add(&memory, text, tags, &scope, daemon).await?;
        }
        MemoryCommand::Search {
            query,
            limit,
            mode,
            tags,
            since_days,
            scope,
        } => {
            let request = SearchRequest {
                namespaces: readable(&scope)?,
                text: query,
                tags,
                since: since_days.map(|d| {
                    reef_store::timestamp_ago(std::time::Duration::from_secs(u64::from(d) * 86_400))
                }),
                limit: limit as usize,
                mode: mode.parse()?,
            };
            let outcome = if daemon {
                ask_daemon(&config, &request).await?
            } else {
                memory.search(request).await?
            };
            show(&outcome, scope.json)?;
        }
        MemoryCommand::List { limit, scope } => {
            let items = memory
                .store()
                .list_memory(readable(&scope)?, limit as usize)
                .await?;
            if scope.json {
                println!("{}", serde_json::to_string_pretty(&items)?);
            } else if items.is_empty() {
                println!("no memories yet");
            }
            for item in items.iter().filter(|_| !scope.json) {
                println!(
                    "#{:<5} {:<16} {}  {}",
                    item.id,
                    item.namespace,
                    item.created_at,
                    clip(item.text.trim(), 80)
                );
            }
        }
        MemoryCommand::Forget { id, scope } => {
            let forgotten = memory
                .store()
                .forget_memory(vec![target(&scope)?], id)
                .await?;
            if scope.json {
                println!("{}", serde_json::json!({"id": id, "forgotten": forgotten}));
            }
            if !forgotten {
                return Err(Exit::usage(format!(
                    "no memory #{id} in {}",
                    target(&scope)?
                )));
            }
            if !scope.json {
                eprintln!("forgot memory #{id}");
            }
        }
        MemoryCommand::Import { dir, tags, scope } => {
            return import(&memory, &dir, tags, &scope, daemon).await;
        }
    }
    Ok(crate::exit::OK)
}

/// The agent's own namespace, `agent:NAME`.
fn own(agent: &str) -> anyhow::Result<String> {
    let namespace = format!("agent:{agent}");
    reef_store::check_namespace(&namespace).map_err(|_| {
        Exit::usage(format!(
            "--agent: `{agent}` is not an agent name (no spaces, not empty)"
        ))
    })?;
    Ok(namespace)
}

/// The namespace a write goes to: the shared one with `--shared`, else the agent's own.
fn target(scope: &MemoryScopeArgs) -> anyhow::Result<String> {
    if scope.shared {
        Ok(SHARED_NAMESPACE.to_owned())
    } else {
        own(&scope.agent)
    }
}

/// The namespaces a read covers: the agent's own and the shared one.
fn readable(scope: &MemoryScopeArgs) -> anyhow::Result<Vec<String>> {
    Ok(vec![own(&scope.agent)?, SHARED_NAMESPACE.to_owned()])
}

async fn add(
    memory: &Memory,
    text: String,
    tags: Vec<String>,
    scope: &MemoryScopeArgs,
    daemon: bool,
) -> anyhow::Result<()> {
    let text = if text == "-" {
        let mut buf = String::new();
        std::io::stdin()
            .read_to_string(&mut buf)
            .context("cannot read the memory text from stdin")?;
        buf
    } else {
        text
    };
    let new = NewMemory {
        namespace: target(scope)?,
        text,
        tags,
        source: Some("operator".into()),
    };
    // Next to a daemon, its background embedder embeds the new chunks (with any backlog);
    // this process would otherwise load the model and embed the namespace's whole backlog.
    let saved = if daemon && memory.embedder().is_ok() {
        Saved {
            item: memory.save_text(new).await?,
            note: Some(
                "the running daemon embeds it in the background; until then it is found by keyword"
                    .into(),
            ),
        }
    } else {
        memory.save(new).await?
    };
    if scope.json {
        println!("{}", serde_json::to_string_pretty(&saved)?);
        return Ok(());
    }
    if let Some(note) = &saved.note {
        eprintln!("note: {note}");
    }
    println!(
        "saved memory #{} in {} ({} chunk{})",
        saved.item.id,
        saved.item.namespace,
        saved.item.chunks,
        if saved.item.chunks == 1 { "" } else { "s" }
    );
    Ok(())
}

/// The daemon's search (`POST /v1/memory/search`): its index is in RAM already, and its
/// background embedder's backlog is in the note.
async fn ask_daemon(
    config: &reef_config::Config,
    request: &SearchRequest,
) -> anyhow::Result<SearchOutcome> {
    let client = crate::cmd::client::Client::connect(config)?;
    let reply = client
        .post(
            "/v1/memory/search",
            Some(serde_json::json!({
                "query": request.text,
                "namespaces": request.namespaces,
                "limit": request.limit,
                "mode": request.mode.to_string(),
                "tags": request.tags,
                "since": request.since,
            })),
        )
        .await?;
    serde_json::from_value(reply).context("the daemon's memory search answer is malformed")
}

fn show(outcome: &SearchOutcome, json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(&outcome)?);
        return Ok(());
    }
    if let Some(note) = &outcome.note {
        eprintln!("note: {note}");
    }
    if outcome.hits.is_empty() {
        println!("no matching memories");
    }
    for hit in &outcome.hits {
        println!(
            "#{:<5} {:<16} {:.4}  {}{}",
            hit.item_id,
            hit.namespace,
            hit.score,
            hit.source.as_deref().unwrap_or(""),
            if hit.tags.is_empty() {
                String::new()
            } else {
                format!("  [{}]", hit.tags.join(", "))
            }
        );
        println!(
            "  {}",
            clip(
                &hit.text.split_whitespace().collect::<Vec<_>>().join(" "),
                300
            )
        );
    }
    Ok(())
}

/// What an import did.
#[derive(Debug, Default, serde::Serialize)]
struct ImportReport {
    added: usize,
    updated: usize,
    unchanged: usize,
    chunks: usize,
    /// Chunks of the namespace embedded by this run.
    embedded: usize,
    /// Chunks of the namespace still without a vector when it ended.
    waiting: u64,
    interrupted: bool,
    skipped: Vec<String>,
    notes: Vec<String>,
}

/// Chunks embedded per step of an import (a step is never cut short by Ctrl-C).
const IMPORT_BATCH: usize = 16;

/// Imports the text files under `dir`: every file's text first (so keyword search has all of
/// it at once), then the chunks without a vector, a batch at a time with the rate and the
/// time left on stderr. Ctrl-C stops between batches; what was stored and embedded stays,
/// and the same command goes on from there (unchanged files are not read again, embedded
/// chunks not embedded again). Next to a running daemon the embedding is left to it.
async fn import(
    memory: &Memory,
    dir: &Path,
    tags: Vec<String>,
    scope: &MemoryScopeArgs,
    daemon: bool,
) -> anyhow::Result<u8> {
    if !dir.is_dir() {
        return Err(Exit::usage(format!(
            "DIR: {} is not a directory",
            dir.display()
        )));
    }
    let namespace = target(scope)?;
    let root = dir
        .canonicalize()
        .with_context(|| format!("cannot resolve {}", dir.display()))?;
    let mut files = Vec::new();
    collect(&root, &mut files)?;
    files.sort();
    let mut report = ImportReport::default();
    for path in files {
        let Some(text) = read_text(&path, &mut report.skipped) else {
            continue;
        };
        let source = path.display().to_string();
        let previous = memory.store().memory_by_source(&namespace, &source).await?;
        match &previous {
            Some((_, old)) if *old == text => {
                report.unchanged += 1;
                continue;
            }
            Some((id, _)) => {
                memory
                    .store()
                    .forget_memory(vec![namespace.clone()], *id)
                    .await?;
                report.updated += 1;
            }
            None => report.added += 1,
        }
        let item = memory
            .save_text(NewMemory {
                namespace: namespace.clone(),
                text,
                tags: tags.clone(),
                source: Some(source),
            })
            .await?;
        report.chunks += item.chunks;
    }
    embed_imported(memory, &namespace, daemon, scope.json, &mut report).await?;
    if scope.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        for skipped in &report.skipped {
            eprintln!("skipped {skipped}");
        }
        for note in &report.notes {
            eprintln!("note: {note}");
        }
        println!(
            "imported into {namespace}: {} new, {} updated, {} unchanged file(s); {} chunk(s); {} embedded, {} waiting",
            report.added,
            report.updated,
            report.unchanged,
            report.chunks,
            report.embedded,
            report.waiting
        );
    }
    Ok(if report.interrupted {
        crate::exit::INTERRUPTED
    } else {
        crate::exit::OK
    })
}

/// A file's text, or `None` with the reason added to `skipped`.
fn read_text(path: &Path, skipped: &mut Vec<String>) -> Option<String> {
    let source = path.display();
    let size = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    if size > MAX_IMPORT_BYTES {
        skipped.push(format!("{source}: larger than 8 MiB"));
        return None;
    }
    match std::fs::read(path).map(String::from_utf8) {
        Ok(Ok(text)) if !text.trim().is_empty() => Some(text),
        Ok(Ok(_)) => {
            skipped.push(format!("{source}: empty"));
            None
        }
        Ok(Err(_)) => {
            skipped.push(format!("{source}: not UTF-8 text"));
            None
        }
        Err(e) => {
            skipped.push(format!("{source}: {e}"));
            None
        }
    }
}

/// Embeds the namespace's chunks that have no vector, with progress, until done, Ctrl-C, or
/// an embedder failure (which leaves them to a later import, search or the daemon).
async fn embed_imported(
    memory: &Memory,
    namespace: &str,
    daemon: bool,
    quiet: bool,
    report: &mut ImportReport,
) -> anyhow::Result<()> {
    if let Err(why) = memory.embedder() {
        report.notes.push(format!("keyword search only: {why}"));
        return Ok(());
    }
    let total = waiting(memory, namespace).await?;
    if daemon {
        report.waiting = total;
        if total > 0 {
            report.notes.push(format!(
                "the daemon embeds the {total} chunk(s) without a vector in the background; \
                 searches answer meanwhile, by keyword for those"
            ));
        }
        return Ok(());
    }
    let started = std::time::Instant::now();
    let mut last_shown = started;
    let mut interrupt = std::pin::pin!(tokio::signal::ctrl_c());
    let namespaces = vec![namespace.to_owned()];
    while (report.embedded as u64) < total {
        let step = tokio::select! {
            step = memory.embed_pending(namespaces.clone(), IMPORT_BATCH) => step,
            _ = &mut interrupt => {
                report.interrupted = true;
                break;
            }
        };
        match step {
            Ok((done, more)) => {
                report.embedded += done;
                if !quiet && (last_shown.elapsed().as_secs_f64() >= 1.0 || !more) {
                    last_shown = std::time::Instant::now();
                    eprintln!(
                        "{}",
                        progress(report.embedded as u64, total, started.elapsed())
                    );
                }
                if !more || done == 0 {
                    break;
                }
            }
            Err(e) => {
                report.notes.push(format!(
                    "embedding stopped ({e}); the rest is found by keyword until the same \
                     import, a search or the daemon embeds it"
                ));
                break;
            }
        }
    }
    report.waiting = waiting(memory, namespace).await?;
    if report.interrupted {
        report.notes.push(format!(
            "interrupted: {} chunk(s) embedded, {} waiting; run the same command again to go \
             on (nothing done is done again)",
            report.embedded, report.waiting
        ));
    }
    Ok(())
}

/// Chunks of `namespace` without a vector from the embedder (0 without one).
async fn waiting(memory: &Memory, namespace: &str) -> anyhow::Result<u64> {
    let Ok(embedder) = memory.embedder() else {
        return Ok(0);
    };
    let c = memory
        .store()
        .vector_coverage(embedder.id(), vec![namespace.to_owned()])
        .await?;
    Ok(c.chunks.saturating_sub(c.embedded))
}

/// `embedding 640/12000 chunks (5%), 5.1 chunks/s, about 37m left`.
fn progress(done: u64, total: u64, elapsed: std::time::Duration) -> String {
    let rate = done as f64 / elapsed.as_secs_f64().max(1e-3);
    let left = if rate > 0.0 {
        let secs = (total.saturating_sub(done)) as f64 / rate;
        format!(", about {} left", crate::render::duration_words(secs))
    } else {
        String::new()
    };
    format!(
        "embedding {done}/{total} chunks ({}%), {rate:.1} chunks/s{left}",
        done * 100 / total.max(1)
    )
}

/// Text files under `dir`, skipping hidden entries.
fn collect(dir: &Path, out: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    let entries =
        std::fs::read_dir(dir).with_context(|| format!("cannot read {}", dir.display()))?;
    for entry in entries {
        let entry = entry.with_context(|| format!("cannot read {}", dir.display()))?;
        let path = entry.path();
        if entry.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        let kind = entry.file_type()?;
        if kind.is_dir() {
            collect(&path, out)?;
        } else if kind.is_file()
            && path
                .extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| TEXT_EXTENSIONS.contains(&e.to_ascii_lowercase().as_str()))
        {
            out.push(path);
        }
    }
    Ok(())
}
