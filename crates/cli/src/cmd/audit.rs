//! `reef audit query|verify|prune`: the audit log, read from the store directly (the daemon
//! need not run), so it can be checked even when the daemon cannot start.

use crate::audit_args::{AuditCommand, AuditQueryArgs};
use crate::exit;
use crate::home;
use reef_store::{AuditFilter, AuditRecord, Store};
use serde_json::json;

/// Characters of a record's data shown on its line.
const DATA_CHARS: usize = 160;

pub async fn audit(overrides: &[String], command: AuditCommand) -> anyhow::Result<u8> {
    let config = home::load_config(overrides)?;
    let store = home::open_store(&config)?;
    match command {
        AuditCommand::Query(args) => query(&store, args).await,
        AuditCommand::Verify(flag) => verify(&store, flag.json).await,
        AuditCommand::Prune { older_than } => {
            let before = reef_store::timestamp_ago(older_than);
            let removed = store.prune_audit(&before).await?;
            if removed == 0 {
                println!("no audit records written before {before}");
            } else {
                println!(
                    "removed {removed} audit records written before {before}; a sealed \
                     checkpoint keeps the chain verifiable"
                );
            }
            Ok(exit::OK)
        }
    }
}

async fn query(store: &Store, args: AuditQueryArgs) -> anyhow::Result<u8> {
    let records = store
        .audit_records(AuditFilter {
            agent: args.agent,
            kind: args.kind,
            since: args.since,
            until: None,
            limit: usize::try_from(args.limit).unwrap_or(usize::MAX),
        })
        .await?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&records)?);
        return Ok(exit::OK);
    }
    if records.is_empty() {
        println!("no audit records match");
        return Ok(exit::OK);
    }
    for record in &records {
        println!("{}", line(record));
    }
    Ok(exit::OK)
}

/// `SEQ  TIME  KIND  AGENT  DATA`, the data as compact JSON cut at [`DATA_CHARS`].
fn line(record: &AuditRecord) -> String {
    let data = record.data.to_string();
    let mut shown: String = data.chars().take(DATA_CHARS).collect();
    if shown.len() < data.len() {
        shown.push('…');
    }
    format!(
        "{:>6}  {}  {:<18}  {:<12}  {}",
        record.seq,
        record.at,
        record.kind,
        record.agent.as_deref().unwrap_or("-"),
        shown
    )
}

async fn verify(store: &Store, json: bool) -> anyhow::Result<u8> {
    let verdict = store.verify_audit().await?;
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({
                "ok": verdict.broken.is_none(),
                "checked": verdict.checked,
                "checkpoint": verdict.checkpoint,
                "head": verdict.head,
                "broken_at": verdict.broken.as_ref().map(reef_store::ChainBreak::seq),
                "reason": verdict.broken.as_ref().map(ToString::to_string),
            }))?
        );
    }
    let from = match verdict.checkpoint {
        Some(seq) => format!(" after the pruning checkpoint at record {seq}"),
        None => String::new(),
    };
    match verdict.broken {
        None => {
            if !json {
                println!(
                    "audit log verified: {} records{from}, the newest is record {}",
                    verdict.checked, verdict.head
                );
            }
            Ok(exit::OK)
        }
        Some(broken) => {
            if !json {
                eprintln!(
                    "reef: the audit log does not verify at record {}: {broken} ({} records \
                     before it{from} chain)",
                    broken.seq(),
                    verdict.checked
                );
            }
            Ok(exit::RUNTIME)
        }
    }
}
