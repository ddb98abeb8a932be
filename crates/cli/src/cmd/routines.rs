//! `reef routine …` and `reef job …`: clients of `/v1/routines` and `/v1/jobs`. Each prints
//! short human lines or, with `--json`, the daemon's JSON.

use crate::cmd::client::{field as s, for_home as client, print_json, segment};
use crate::exit;
use crate::routine_args::{JobCommand, RoutineCommand};
use serde_json::Value;

/// `every 2s`, `cron 0 9 * * MON-FRI (Europe/Berlin)`, `event agent.* ~ failed`, …
pub fn trigger_text(trigger: &Value) -> String {
    serde_json::from_value::<reef_core::Trigger>(trigger.clone())
        .map(|t| reef_config::describe_trigger(&t))
        .unwrap_or_else(|_| trigger.to_string())
}

fn action_text(action: &Value) -> String {
    match action["kind"].as_str() {
        Some("message") => format!("message {}", s(action, "agent")),
        Some("spawn") => format!(
            "spawn {} (timeout {})",
            s(action, "template"),
            reef_config::describe_every(action["timeout_secs"].as_u64().unwrap_or(0) * 1000)
        ),
        Some("heartbeat") => format!("heartbeat {}", s(action, "agent")),
        _ => action.to_string(),
    }
}

fn routine_line(r: &Value) -> String {
    let state = if r["enabled"].as_bool() == Some(true) {
        "enabled"
    } else {
        "disabled"
    };
    format!(
        "{:<20} {:<8} {:<40} {:<28} next {}",
        s(r, "name"),
        state,
        trigger_text(&r["spec"]["trigger"]),
        action_text(&r["spec"]["action"]),
        r["next"].as_str().unwrap_or("-")
    )
}

fn job_line(j: &Value) -> String {
    let what = match (j["routine"].as_str(), j["agent"].as_str()) {
        (Some(r), Some(a)) => format!("{r} → {a}"),
        (Some(r), None) => r.to_owned(),
        (None, Some(a)) => a.to_owned(),
        (None, None) => "-".into(),
    };
    let why = j["reason"]
        .as_str()
        .map(|r| format!(" ({r})"))
        .unwrap_or_default();
    format!(
        "{:<6} {:<8} {:<10} {:<32} {}{why}",
        j["id"],
        s(j, "kind"),
        s(j, "state"),
        what,
        j["scheduled"].as_str().unwrap_or(s(j, "created_at"))
    )
}

pub async fn routine(overrides: &[String], command: RoutineCommand) -> anyhow::Result<u8> {
    let c = client(overrides)?;
    let path = |name: &str| format!("/v1/routines/{}", segment(name));
    let (value, json) = match command {
        RoutineCommand::List(flag) => {
            let list = c.get("/v1/routines").await?;
            if !flag.json {
                let items = list.as_array().cloned().unwrap_or_default();
                if items.is_empty() {
                    println!(
                        "no routines; add [routines.NAME] to reef.toml or `reef routine create`"
                    );
                }
                for r in &items {
                    println!("{}", routine_line(r));
                }
                return Ok(exit::OK);
            }
            (list, true)
        }
        RoutineCommand::Show { name, json } => (c.get(&path(&name)).await?, json),
        RoutineCommand::Create { name, fields, json } => {
            let mut body = serde_json::to_value(fields.into_fields())?;
            body["name"] = Value::String(name);
            (c.post("/v1/routines", Some(body)).await?, json)
        }
        RoutineCommand::Edit { name, fields, json } => {
            let body = serde_json::to_value(fields.into_fields())?;
            (c.put(&path(&name), body).await?, json)
        }
        RoutineCommand::Delete { name, json } => {
            c.delete(&path(&name)).await?;
            if !json {
                println!("deleted routine {name}");
                return Ok(exit::OK);
            }
            (serde_json::json!({"deleted": name}), true)
        }
        RoutineCommand::Enable { name, json } => (
            c.post(&format!("{}/enable", path(&name)), None).await?,
            json,
        ),
        RoutineCommand::Disable { name, json } => (
            c.post(&format!("{}/disable", path(&name)), None).await?,
            json,
        ),
        RoutineCommand::Run { name, json } => {
            let run = c.post(&format!("{}/run", path(&name)), None).await?;
            if !json {
                match run["outcome"].as_str() {
                    Some("started") => println!("{name}: started job {}", run["job_id"]),
                    Some(outcome) => println!(
                        "{name}: {outcome}: {}",
                        run["reason"].as_str().unwrap_or("no reason given")
                    ),
                    None => println!("{run}"),
                }
                return Ok(exit::OK);
            }
            (run, true)
        }
        RoutineCommand::History { name, limit, json } => {
            let fires = c
                .get(&format!("{}/history?limit={limit}", path(&name)))
                .await?;
            if !json {
                for f in fires.as_array().cloned().unwrap_or_default() {
                    let job = f["job_id"]
                        .as_u64()
                        .map(|j| format!(" job {j} {}", s(&f, "state")))
                        .unwrap_or_default();
                    let why = f["reason"]
                        .as_str()
                        .map(|r| format!(" ({r})"))
                        .unwrap_or_default();
                    println!("{} {:<8}{job}{why}", s(&f, "scheduled"), s(&f, "outcome"));
                }
                return Ok(exit::OK);
            }
            (fires, true)
        }
    };
    if json {
        print_json(&value);
    } else {
        println!("{}", routine_line(&value));
        if let Some(reason) = value["disabled_reason"].as_str() {
            println!("  disabled: {reason}");
        }
        println!("  failures in a row: {}", value["failures"]);
        println!("  guardrails: {}", value["spec"]["guardrails"]);
    }
    Ok(exit::OK)
}

pub async fn job(overrides: &[String], command: JobCommand) -> anyhow::Result<u8> {
    let c = client(overrides)?;
    let (value, json) = match command {
        JobCommand::List { state, limit, json } => {
            let query = match &state {
                Some(state) => format!("/v1/jobs?limit={limit}&state={}", segment(state)),
                None => format!("/v1/jobs?limit={limit}"),
            };
            let jobs = c.get(&query).await?;
            if !json {
                let items = jobs.as_array().cloned().unwrap_or_default();
                if items.is_empty() {
                    println!("no jobs");
                }
                for j in &items {
                    println!("{}", job_line(j));
                }
                return Ok(exit::OK);
            }
            (jobs, true)
        }
        JobCommand::Status { id, json } => (c.get(&format!("/v1/jobs/{id}")).await?, json),
        JobCommand::Cancel { id, json } => {
            (c.post(&format!("/v1/jobs/{id}/cancel"), None).await?, json)
        }
    };
    if json {
        print_json(&value);
    } else {
        println!("{}", job_line(&value));
        if let Some(result) = value["result"].as_str() {
            println!("  result: {result}");
        }
    }
    Ok(exit::OK)
}
