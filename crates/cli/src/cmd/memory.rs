//! `reef memory add|search|list|forget|import`: long-term memory from the command line, in an
//! agent's namespace (`--agent`, default `main`) and the shared one.

use crate::args::{MemoryCommand, MemoryScopeArgs};
use crate::exit::Exit;
use crate::home;
use crate::render::clip;
use anyhow::Context as _;
use reef_store::{Memory, NewMemory, SHARED_NAMESPACE, SearchRequest};
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
    match command {
        MemoryCommand::Add { text, tags, scope } => add(&memory, text, tags, &scope).await?,
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
            search(&memory, request, scope.json).await?;
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
        MemoryCommand::Import { dir, tags, scope } => import(&memory, &dir, tags, &scope).await?,
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
    let saved = memory
        .save(NewMemory {
            namespace: target(scope)?,
            text,
            tags,
            source: Some("operator".into()),
        })
        .await?;
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

async fn search(memory: &Memory, request: SearchRequest, json: bool) -> anyhow::Result<()> {
    let outcome = memory.search(request).await?;
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
    skipped: Vec<String>,
    notes: Vec<String>,
}

async fn import(
    memory: &Memory,
    dir: &Path,
    tags: Vec<String>,
    scope: &MemoryScopeArgs,
) -> anyhow::Result<()> {
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
        let source = path.display().to_string();
        let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        if size > MAX_IMPORT_BYTES {
            report.skipped.push(format!("{source}: larger than 8 MiB"));
            continue;
        }
        let text = match std::fs::read(&path).map(String::from_utf8) {
            Ok(Ok(text)) if !text.trim().is_empty() => text,
            Ok(Ok(_)) => {
                report.skipped.push(format!("{source}: empty"));
                continue;
            }
            Ok(Err(_)) => {
                report.skipped.push(format!("{source}: not UTF-8 text"));
                continue;
            }
            Err(e) => {
                report.skipped.push(format!("{source}: {e}"));
                continue;
            }
        };
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
        let saved = memory
            .save(NewMemory {
                namespace: namespace.clone(),
                text,
                tags: tags.clone(),
                source: Some(source),
            })
            .await?;
        report.chunks += saved.item.chunks;
        if let Some(note) = saved.note
            && !report.notes.contains(&note)
        {
            report.notes.push(note);
        }
    }
    if scope.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    for skipped in &report.skipped {
        eprintln!("skipped {skipped}");
    }
    for note in &report.notes {
        eprintln!("note: {note}");
    }
    println!(
        "imported into {namespace}: {} new, {} updated, {} unchanged file(s); {} chunk(s)",
        report.added, report.updated, report.unchanged, report.chunks
    );
    Ok(())
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
