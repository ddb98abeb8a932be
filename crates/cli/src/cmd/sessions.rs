//! `reef sessions list|show` (and dispatch of `replay`): stored sessions and their transcripts, with each compaction
//! shown where it happened.

use crate::args::SessionsCommand;
use crate::home;
use crate::render::{clip, compaction_line};
use reef_core::{CompactionTrigger, Message};
use reef_store::CompactionRecord;

pub async fn sessions(overrides: &[String], command: SessionsCommand) -> anyhow::Result<u8> {
    let config = home::load_config(overrides)?;
    let store = home::open_store(&config)?;
    match command {
        SessionsCommand::List { json, limit } => {
            let list = store.list_sessions(limit).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&list)?);
            } else if list.is_empty() {
                println!("no sessions yet");
            } else {
                for s in list {
                    println!(
                        "{}  {}  {:>4} msgs  {:>7} tok  {}",
                        s.id,
                        s.updated_at,
                        s.message_count,
                        s.input_tokens + s.output_tokens,
                        clip(s.title.as_deref().unwrap_or("(untitled)"), 60)
                    );
                }
            }
        }
        SessionsCommand::Replay {
            id,
            from,
            model,
            json,
        } => {
            return super::replay::replay(&config, &store, &id, from, model.as_deref(), json).await;
        }
        SessionsCommand::Show { id, json } => {
            let id = store.resolve_session(&id).await?;
            let record = store
                .get_session(&id)
                .await?
                .ok_or_else(|| anyhow::anyhow!("session {id} disappeared"))?;
            let messages = store.messages(&id).await?;
            let usage = store.usage(&id).await?;
            let compactions = store.compactions(&id).await?;
            if json {
                let doc = serde_json::json!({
                    "session": record,
                    "messages": messages,
                    "compactions": compactions,
                    "usage": usage,
                });
                println!("{}", serde_json::to_string_pretty(&doc)?);
                return Ok(crate::exit::OK);
            }
            println!("session   {}", record.id);
            println!(
                "title     {}",
                record.title.as_deref().unwrap_or("(untitled)")
            );
            println!("model     {} / {}", record.provider, record.model);
            println!("workspace {}", record.workspace);
            println!(
                "created   {}  updated {}",
                record.created_at, record.updated_at
            );
            // Compactions recorded before the first message (none in practice) come first.
            let mut pending = compactions.iter().peekable();
            while let Some(c) = pending.next_if(|c| c.after_seq == 0) {
                print_compaction(c);
            }
            for stored in messages {
                println!();
                match &stored.message {
                    Message::System { content } => println!("## system\n{content}"),
                    Message::User { content } => println!("## user\n{content}"),
                    Message::Assistant {
                        content,
                        tool_calls,
                    } => {
                        println!("## assistant");
                        if !content.is_empty() {
                            println!("{content}");
                        }
                        for call in tool_calls {
                            println!("→ {} [{}] {}", call.name, call.id, call.arguments);
                        }
                    }
                    Message::Tool {
                        call_id,
                        name,
                        content,
                        is_error,
                    } => {
                        let tag = if *is_error { " (error)" } else { "" };
                        println!("## tool {name} [{call_id}]{tag}\n{content}");
                    }
                }
                while let Some(c) = pending.next_if(|c| c.after_seq <= stored.seq) {
                    print_compaction(c);
                }
            }
            for c in pending {
                print_compaction(c);
            }
            let (input, output) = usage.iter().fold((0, 0), |(i, o), r| {
                (i + r.usage.input_tokens, o + r.usage.output_tokens)
            });
            println!();
            println!(
                "usage: {} model request(s), {input} input + {output} output tokens",
                usage.len()
            );
        }
    }
    Ok(crate::exit::OK)
}

/// One compaction in a transcript: what it replaced, why, the sizes, and the summary indented.
fn print_compaction(c: &CompactionRecord) {
    let trigger = match c.trigger {
        CompactionTrigger::Threshold => "the context passed agent.compact_at",
        CompactionTrigger::ContextLengthError => "the provider said the context was too long",
        CompactionTrigger::Manual => "asked for",
    };
    println!();
    println!(
        "── {} ({trigger})",
        compaction_line(
            c.strategy,
            (c.from_seq, c.to_seq),
            (c.tokens_before, c.tokens_after, c.window)
        )
    );
    match &c.summary {
        Some(summary) => {
            println!("   summary:");
            for line in summary.lines() {
                println!("     {line}");
            }
        }
        None => println!("   (the messages were dropped from the context; they stay here)"),
    }
}
