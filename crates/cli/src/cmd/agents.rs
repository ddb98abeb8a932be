//! Client commands of the daemon: `reef agent …`, `send`, `questions`, `answer`, `approve`,
//! `deny`. Each prints a short human line or, with `--json`, the daemon's JSON.

use crate::cmd::client::{field as s, for_home as client, print_json, segment};
use crate::daemon_args::{
    AgentCommand, AnswerArgs, ApproveArgs, DenyArgs, QuestionsArgs, SendArgs,
};
use crate::exit::{self, Exit};
use crate::render::{clip, compaction_line};
use anyhow::Context as _;
use reef_core::CompactionStrategy;
use serde_json::{Value, json};
use std::time::Duration;

fn agent_line(a: &Value) -> String {
    format!(
        "{:<20} {:<10} {:<11} model={}",
        s(a, "name"),
        s(a, "template"),
        s(a, "state"),
        a.get("model").and_then(Value::as_str).unwrap_or("default")
    )
}

pub async fn agent(overrides: &[String], command: AgentCommand) -> anyhow::Result<u8> {
    let c = client(overrides)?;
    let (value, json) = match command {
        AgentCommand::Spawn {
            name,
            template,
            model,
            persona,
            task,
            json,
        } => {
            let body = json!({"name": name, "template": template, "model": model,
                              "persona": persona, "task": task});
            (c.post("/v1/agents", Some(body)).await?, json)
        }
        AgentCommand::List { json } => {
            let agents = c.get("/v1/agents").await?;
            if !json {
                let list = agents.as_array().cloned().unwrap_or_default();
                if list.is_empty() {
                    println!(
                        "no agents; create one with `reef agent spawn NAME --template worker`"
                    );
                }
                for a in &list {
                    println!("{}", agent_line(a));
                }
                return Ok(exit::OK);
            }
            (agents, true)
        }
        AgentCommand::Status { name, json } => {
            let agent = c.get(&format!("/v1/agents/{}", segment(&name))).await?;
            if !json {
                println!("{}", agent_line(&agent));
                println!("  id        {}", s(&agent, "id"));
                println!("  workspace {}", s(&agent, "workspace"));
                println!("  session   {}", s(&agent, "session"));
                println!("  tools     {}", agent["tools"]);
                println!("  budget    {}", agent["budget"]);
                println!("  sandbox   {}", sandbox_line(&agent["sandbox"]));
                let inbox = c
                    .get(&format!(
                        "/v1/agents/{}/inbox?status=pending",
                        segment(&name)
                    ))
                    .await?;
                println!(
                    "  inbox     {} pending",
                    inbox.as_array().map_or(0, Vec::len)
                );
                return Ok(exit::OK);
            }
            (agent, true)
        }
        AgentCommand::Logs { name, tail, json } => {
            let events = c
                .get(&format!("/v1/events?agent={}&last={tail}", segment(&name)))
                .await?;
            let tail: Vec<Value> = events.as_array().cloned().unwrap_or_default();
            if json {
                print_json(&Value::Array(tail));
            } else {
                for e in &tail {
                    println!(
                        "{:>6} {} {:<22} {}",
                        e["seq"],
                        s(e, "created_at"),
                        s(e, "kind"),
                        log_detail(s(e, "kind"), &e["data"])
                    );
                }
            }
            return Ok(exit::OK);
        }
        AgentCommand::Pause { name, json } => (
            c.post(&format!("/v1/agents/{}/pause", segment(&name)), None)
                .await?,
            json,
        ),
        AgentCommand::Resume { name, json } => (
            c.post(&format!("/v1/agents/{}/resume", segment(&name)), None)
                .await?,
            json,
        ),
        AgentCommand::Stop { name, json } => (
            c.post(&format!("/v1/agents/{}/stop", segment(&name)), None)
                .await?,
            json,
        ),
        AgentCommand::Destroy { name, purge, json } => {
            c.delete(&format!("/v1/agents/{}?purge={purge}", segment(&name)))
                .await?;
            let value = json!({"destroyed": name, "purged": purge});
            if !json {
                println!("destroyed {name}{}", if purge { " (purged)" } else { "" });
                return Ok(exit::OK);
            }
            (value, true)
        }
        AgentCommand::Compact { name, json } => {
            let done = c
                .post(&format!("/v1/agents/{}/compact", segment(&name)), None)
                .await
                .with_context(|| format!("cannot compact agent `{name}`"))?;
            if !json {
                println!("{name}: {}", compaction_text(&done));
                if let Some(summary) = done.get("summary").and_then(Value::as_str) {
                    println!("summary:");
                    for line in summary.lines() {
                        println!("  {line}");
                    }
                }
                return Ok(exit::OK);
            }
            (done, true)
        }
        AgentCommand::Reset { name, json } => {
            let done = c
                .post(&format!("/v1/agents/{}/reset", segment(&name)), None)
                .await
                .with_context(|| format!("cannot reset agent `{name}`"))?;
            if !json {
                println!("{name}: new session {}", s(&done, "session"));
                return Ok(exit::OK);
            }
            (done, true)
        }
        AgentCommand::Model { name, model, json } => (
            c.put(
                &format!("/v1/agents/{}/model", segment(&name)),
                json!({"model": model}),
            )
            .await?,
            json,
        ),
        AgentCommand::Debug {
            name,
            breaks,
            timeout,
            json,
            command,
        } => {
            let args = crate::cmd::debug::DebugArgs {
                name,
                breaks,
                command,
                timeout,
                json,
            };
            return crate::cmd::debug::debug(&c, args).await;
        }
        AgentCommand::Persona {
            name,
            persona,
            json,
        } => (
            c.put(
                &format!("/v1/agents/{}/persona", segment(&name)),
                json!({"persona": persona}),
            )
            .await?,
            json,
        ),
    };
    if json {
        print_json(&value);
    } else {
        println!("{}", agent_line(&value));
    }
    Ok(exit::OK)
}

pub async fn send(overrides: &[String], args: SendArgs) -> anyhow::Result<u8> {
    let c = client(overrides)?;
    let body = json!({"text": args.text, "expect_reply": args.wait, "timeout_secs": args.timeout});
    // Without --timeout the daemon's request_timeout_secs applies (null is "not given").
    let sent = c
        .post(
            &format!("/v1/agents/{}/messages", segment(&args.agent)),
            Some(body),
        )
        .await?;
    let Some(request) = sent.get("request_id").and_then(Value::as_str) else {
        if args.json {
            print_json(&sent);
        } else {
            println!("queued as message #{} for {}", sent["inbox_id"], args.agent);
        }
        return Ok(exit::OK);
    };
    // The reply is recorded on the request; poll it until it is final.
    loop {
        let item = c
            .get(&format!("/v1/questions/{}", segment(request)))
            .await?;
        match s(&item, "status") {
            "pending" => tokio::time::sleep(Duration::from_millis(200)).await,
            "answered" => {
                if args.json {
                    print_json(&item);
                } else {
                    println!("{}", s(&item, "answer"));
                }
                return Ok(exit::OK);
            }
            other => {
                let reason = item
                    .get("answer")
                    .and_then(Value::as_str)
                    .map(|r| format!(": {r}"))
                    .unwrap_or_default();
                return Err(anyhow::Error::new(Exit {
                    code: exit::RUNTIME,
                    message: format!(
                        "no reply from {}: the request was {other}{reason}",
                        args.agent
                    ),
                }));
            }
        }
    }
}

pub async fn questions(overrides: &[String], args: QuestionsArgs) -> anyhow::Result<u8> {
    let c = client(overrides)?;
    let items = c.get(&format!("/v1/questions?all={}", args.all)).await?;
    if args.json {
        print_json(&items);
        return Ok(exit::OK);
    }
    let list = items.as_array().cloned().unwrap_or_default();
    if list.is_empty() {
        println!("nothing is waiting for you");
    }
    for q in &list {
        let who = q["payload"]
            .get("agent")
            .and_then(Value::as_str)
            .unwrap_or("-");
        let what = match s(q, "kind") {
            "question" => {
                let options = q["payload"]["options"]
                    .as_array()
                    .map(|o| {
                        o.iter()
                            .filter_map(Value::as_str)
                            .collect::<Vec<_>>()
                            .join(" | ")
                    })
                    .unwrap_or_default();
                let question = q["payload"]["question"].as_str().unwrap_or("");
                if options.is_empty() {
                    question.to_owned()
                } else {
                    format!("{question} [{options}]")
                }
            }
            "approval" => format!("run `{}`?", q["payload"]["command"].as_str().unwrap_or("")),
            "breakpoint" => match q["payload"]["stop"]["tool"].as_str() {
                Some(tool) => format!(
                    "paused before `{tool}` {} (reef agent debug)",
                    q["payload"]["stop"]["arguments"]
                ),
                None => "paused before a model request (reef agent debug)".to_owned(),
            },
            _ => q["payload"]["text"].as_str().unwrap_or("").to_owned(),
        };
        println!(
            "{:<20} {:<8} {:<9} {who}: {what}",
            s(q, "id"),
            s(q, "kind"),
            s(q, "status")
        );
    }
    Ok(exit::OK)
}

pub async fn answer(overrides: &[String], args: AnswerArgs) -> anyhow::Result<u8> {
    let c = client(overrides)?;
    let item = c
        .post(
            &format!("/v1/questions/{}/answer", segment(&args.id)),
            Some(json!({"text": args.text})),
        )
        .await?;
    report(&item, args.json);
    Ok(exit::OK)
}

pub async fn approve(overrides: &[String], args: ApproveArgs) -> anyhow::Result<u8> {
    let c = client(overrides)?;
    let item = c
        .post(
            &format!("/v1/questions/{}/approve", segment(&args.id)),
            None,
        )
        .await?;
    report(&item, args.json);
    Ok(exit::OK)
}

pub async fn deny(overrides: &[String], args: DenyArgs) -> anyhow::Result<u8> {
    let c = client(overrides)?;
    let item = c
        .post(
            &format!("/v1/questions/{}/deny", segment(&args.id)),
            Some(json!({"reason": args.reason})),
        )
        .await?;
    report(&item, args.json);
    Ok(exit::OK)
}

/// The compaction line of a compaction as the daemon reports it (`POST …/compact`, the
/// `session.compacted` event).
fn compaction_text(c: &Value) -> String {
    let n = |key: &str| c.get(key).and_then(Value::as_u64).unwrap_or(0);
    match c
        .get("strategy")
        .and_then(Value::as_str)
        .and_then(CompactionStrategy::parse)
    {
        Some(strategy) => compaction_line(
            strategy,
            (n("from_seq"), n("to_seq")),
            (n("tokens_before"), n("tokens_after"), n("window")),
        ),
        None => c.to_string(),
    }
}

/// An event's data as `reef agent logs` shows it: readable where it has a form, else its JSON.
fn log_detail(kind: &str, data: &Value) -> String {
    match kind {
        "session.compacted" => {
            let trigger = s(data, "trigger");
            let summary = data
                .get("summary")
                .and_then(Value::as_str)
                .map(|t| format!(" · summary: {}", clip(t, 160)))
                .unwrap_or_default();
            format!("{} ({trigger}){summary}", compaction_text(data))
        }
        "session.reset" | "session.started" => format!("session {}", s(data, "session")),
        _ => data.to_string(),
    }
}

fn report(item: &Value, json: bool) {
    if json {
        print_json(item);
    } else {
        println!(
            "{} {}: {}",
            s(item, "id"),
            s(item, "status"),
            s(item, "answer")
        );
    }
}

/// An agent's sandbox in one line: backend, network (with its domains), writable paths
/// besides the workspace, the limits that apply, and whether commands are forked from a warm
/// sandbox.
fn sandbox_line(sandbox: &Value) -> String {
    let list = super::debug::list;
    let mut line = format!(
        "{}, network {}",
        s(sandbox, "backend"),
        s(sandbox, "network")
    );
    let domains = list(&sandbox["allow_domains"]);
    if s(sandbox, "network") == "allowlist" {
        line.push_str(&format!(
            " ({})",
            if domains.is_empty() {
                "no domain"
            } else {
                domains.as_str()
            }
        ));
    }
    let writable = list(&sandbox["writable"]);
    line.push_str(&format!(
        ", writes the workspace{}",
        if writable.is_empty() {
            String::new()
        } else {
            format!(" and {writable}")
        }
    ));
    let l = &sandbox["limits"];
    let size = |v: &Value| {
        v.as_u64()
            .map_or("no limit".to_owned(), reef_config::format_size)
    };
    line.push_str(&format!(
        ", memory {}, files {}, cpu {} s, {} processes, {} open files",
        size(&l["memory_bytes"]),
        size(&l["file_size_bytes"]),
        l["cpu_secs"],
        l["max_processes"],
        l["open_files"]
    ));
    if s(sandbox, "backend") == "landlock" {
        line.push_str(if sandbox["warm"] == Value::Bool(true) {
            ", commands forked from a warm sandbox"
        } else {
            ", a sandbox per command"
        });
    }
    let vm = &sandbox["microvm"];
    if !vm.is_null() {
        line.push_str(&format!(
            ", a VM per session ({} MiB, {} CPU(s), {} kept booted, accelerator {})",
            vm["memory_mib"],
            vm["cpus"],
            vm["pool"],
            s(vm, "accelerator")
        ));
    }
    line
}
