//! `reef cap show|grant|revoke`: agents' capability tokens, read and written in the store
//! directly (the daemon need not run; a running one applies a change at the agent's next
//! call).

use crate::cap_args::CapCommand;
use crate::exit::{self, Exit};
use crate::home;
use reef_core::{ANY, Budget, Capabilities};
use reef_runtime::RuntimeError;
use reef_runtime::caps::{self, TokenReport};
use reef_security::cap::{Grant, OPERATOR, Token};
use reef_store::Store;
use serde_json::json;

pub async fn cap(overrides: &[String], command: CapCommand) -> anyhow::Result<u8> {
    let config = home::load_config(overrides)?;
    let store = home::open_store(&config)?;
    match command {
        CapCommand::Show { agent, json } => {
            let report = caps::show(&store, &agent).await.map_err(failure)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&report_json(&report))?);
            } else {
                print!("{}", describe(&report));
            }
            Ok(exit::OK)
        }
        CapCommand::Grant { agent, rights } => {
            let token = caps::grant(&store, &agent, &rights)
                .await
                .map_err(failure)?;
            let what = if rights.is_empty() {
                "the rights it had".to_owned()
            } else {
                rights.join(", ")
            };
            let ids: Vec<String> = token
                .revocation_ids()
                .iter()
                .map(|id| caps::short_id(id).to_owned())
                .collect();
            println!(
                "granted {agent} {what}: a new token from the root key (revocation id {})",
                ids.join(", ")
            );
            Ok(exit::OK)
        }
        CapCommand::Revoke { agent, id } => {
            let ids = caps::revoke(&store, &agent, id.as_deref())
                .await
                .map_err(failure)?;
            let reached = descendants(&store, &ids).await?;
            let shown: Vec<&str> = ids.iter().map(|id| caps::short_id(id)).collect();
            println!(
                "revoked {}; these agents fail their next check: {}",
                shown.join(", "),
                reached.join(", ")
            );
            Ok(exit::OK)
        }
    }
}

/// Bad names and arguments are usage errors (exit 2); the rest are failures.
fn failure(err: RuntimeError) -> anyhow::Error {
    match err {
        RuntimeError::NotFound(_) | RuntimeError::Invalid { .. } => Exit::usage(err.to_string()),
        other => Exit::runtime(other.to_string()),
    }
}

/// The agents whose tokens hold one of `ids`.
async fn descendants(store: &Store, ids: &[String]) -> anyhow::Result<Vec<String>> {
    let mut out = Vec::new();
    for agent in store.list_agents().await? {
        let Some(text) = store
            .capability_state(&agent.name)
            .await?
            .and_then(|s| s.token)
        else {
            continue;
        };
        if let Ok(token) = Token::parse(&text, store.capability_root())
            && token.revocation_ids().iter().any(|id| ids.contains(id))
        {
            out.push(agent.name);
        }
    }
    Ok(out)
}

fn report_json(report: &TokenReport) -> serde_json::Value {
    let (verified, error, blocks) = match &report.token {
        None => (false, Some("no token minted yet".to_owned()), Vec::new()),
        Some(Err(err)) => (false, Some(err.to_string()), Vec::new()),
        Some(Ok(token)) => {
            let blocks = token
                .grants()
                .iter()
                .zip(token.revocation_ids())
                .map(|(grant, id)| {
                    json!({"by": grant.by, "for": grant.agent,
                           "capabilities": grant.capabilities, "budget": grant.budget,
                           "revocation_id": id, "revoked": report.revoked.contains(&id)})
                })
                .collect();
            (true, None, blocks)
        }
    };
    json!({"agent": report.agent.name, "verified": verified, "error": error,
           "revoked": !report.revoked.is_empty(), "blocks": blocks})
}

/// The report in words: each block's rights, who stated them, and the token's state.
fn describe(report: &TokenReport) -> String {
    let agent = &report.agent;
    let mut out = format!(
        "{} (template {}, {})\n",
        agent.name, agent.template, agent.state
    );
    let token = match &report.token {
        None => {
            out.push_str("no token yet: one is minted when the agent next runs\n");
            return out;
        }
        Some(Err(err)) => {
            out.push_str(&format!(
                "{err}\nevery call it makes is refused; `reef cap grant {}` mints a new token\n",
                agent.name
            ));
            return out;
        }
        Some(Ok(token)) => token,
    };
    let blocks = token.grants().len();
    out.push_str(&format!(
        "token: verifies under the root key; {blocks} block{}; a call is allowed only when \
         every block allows it\n",
        if blocks == 1 { "" } else { "s" }
    ));
    for (i, (grant, id)) in token
        .grants()
        .iter()
        .zip(token.revocation_ids())
        .enumerate()
    {
        let from = if grant.by == OPERATOR {
            "granted by the operator".to_owned()
        } else {
            format!("narrowed by {} for {}", grant.by, grant.agent)
        };
        out.push_str(&format!(
            "block {}, {from} (revocation id {}):\n",
            i + 1,
            caps::short_id(&id)
        ));
        for line in rights_in_words(grant) {
            out.push_str(&format!("  {line}\n"));
        }
    }
    if report.revoked.is_empty() {
        out.push_str("status: in force\n");
    } else {
        let shown: Vec<&str> = report.revoked.iter().map(|id| caps::short_id(id)).collect();
        out.push_str(&format!(
            "status: REVOKED ({}); every call is refused\n",
            shown.join(", ")
        ));
    }
    out
}

fn rights_in_words(grant: &Grant) -> Vec<String> {
    let c: &Capabilities = &grant.capabilities;
    let list = |items: &[String], any: &str| {
        if items.iter().any(|i| i == ANY || i == "*") {
            any.to_owned()
        } else if items.is_empty() {
            "nothing".to_owned()
        } else {
            items.join(", ")
        }
    };
    let yes_no = |b: bool| if b { "yes" } else { "no" };
    vec![
        format!("may call: {}", list(&c.tools, "every tool")),
        format!(
            "may read: {}; may write: {}",
            list(&c.read, "the whole workspace"),
            list(&c.write, "the whole workspace")
        ),
        format!("may reach: {}", list(&c.domains, "any host")),
        format!("may use the secrets: {}", list(&c.secrets, "any secret")),
        format!("may post to: {}", list(&c.channels, "any room")),
        if c.spawn {
            format!("may spawn from: {}", list(&c.templates, "any template"))
        } else {
            "may spawn: no".to_owned()
        },
        format!(
            "memory: its own namespace (read, write), shared ({})",
            if c.shared_memory_write {
                "read, write"
            } else {
                "read"
            }
        ),
        format!(
            "may schedule routines: {}; may write skills: {}",
            yes_no(c.schedule),
            yes_no(c.skill_write)
        ),
        format!("budget: {}", budget_in_words(&grant.budget)),
    ]
}

fn budget_in_words(b: &Budget) -> String {
    let mut parts = Vec::new();
    if let Some(t) = b.tokens {
        parts.push(format!("{} tokens", crate::render::thousands(t)));
    }
    if let Some(c) = b.cost_micros {
        parts.push(format!("${:.2}", c as f64 / 1e6));
    }
    if let Some(r) = b.rounds {
        parts.push(format!("{r} rounds a turn"));
    }
    if let Some(w) = b.wall_secs {
        parts.push(format!("{w} s a turn"));
    }
    if parts.is_empty() {
        "no limits".to_owned()
    } else {
        parts.join(", ")
    }
}
