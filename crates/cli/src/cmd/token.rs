//! `reef token create|list|revoke`: the HTTP API's scoped tokens, written in the store
//! directly (the daemon need not run; a running one refuses a revoked token at its next
//! request). Only an operator with the home's database can make or revoke one.

use crate::exit::{self, Exit};
use crate::home;
use crate::token_args::TokenCommand;
use reef_security::api_token::{Scope, new_token};
use reef_store::{ApiTokenRecord, NewApiToken, StoreError};
use serde_json::json;

pub async fn token(overrides: &[String], command: TokenCommand) -> anyhow::Result<u8> {
    let config = home::load_config(overrides)?;
    let store = home::open_store(&config)?;
    match command {
        TokenCommand::Create { name, scope, rate } => {
            check_name(&name)?;
            let scope: Scope = scope
                .parse()
                .map_err(|e| Exit::usage(format!("--scope: {e}")))?;
            let made = new_token();
            let record = store
                .create_api_token(NewApiToken {
                    id: made.id,
                    name,
                    scope,
                    hash: made.hash,
                    rate,
                })
                .await
                .map_err(failure)?;
            let limit = describe_rate(record.rate, config.daemon.rate_limit);
            eprintln!(
                "reef: token {} ({}) made with scope {}, {limit}; it is shown once, keep it:",
                record.name, record.id, record.scope
            );
            println!("{}", made.secret);
            Ok(exit::OK)
        }
        TokenCommand::List { json } => {
            let tokens = store.api_tokens().await?;
            if json {
                let rows: Vec<_> = tokens.iter().map(token_json).collect();
                println!("{}", serde_json::to_string_pretty(&rows)?);
                return Ok(exit::OK);
            }
            if tokens.is_empty() {
                println!("no scoped tokens (`reef token create NAME --scope …` makes one)");
                return Ok(exit::OK);
            }
            println!(
                "{:<12}  {:<16}  {:<20}  {:<16}  {:<20}  revoked",
                "id", "name", "scope", "rate", "created"
            );
            for t in &tokens {
                println!(
                    "{:<12}  {:<16}  {:<20}  {:<16}  {:<20}  {}",
                    t.id,
                    t.name,
                    t.scope.to_string(),
                    describe_rate(t.rate, config.daemon.rate_limit),
                    t.created_at,
                    t.revoked_at.as_deref().unwrap_or("-")
                );
            }
            Ok(exit::OK)
        }
        TokenCommand::Revoke { token } => {
            let record = store.revoke_api_token(&token).await.map_err(failure)?;
            println!(
                "revoked token {} ({}, scope {}): its next request is refused",
                record.name, record.id, record.scope
            );
            Ok(exit::OK)
        }
    }
}

/// A token's name: what `reef token list` shows and `revoke` takes.
fn check_name(name: &str) -> anyhow::Result<()> {
    let fine = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if fine {
        Ok(())
    } else {
        Err(Exit::usage(format!(
            "NAME {name:?}: use 1 to 64 letters, digits, `-`, `_` or `.`"
        )))
    }
}

/// A token's limit in words: its own, else the daemon's default.
fn describe_rate(own: Option<u32>, default: Option<u32>) -> String {
    match own {
        Some(0) => "no rate limit".into(),
        Some(n) => format!("{n}/min"),
        None => match default {
            Some(n) => format!("{n}/min (default)"),
            None => "no rate limit (default)".into(),
        },
    }
}

fn token_json(t: &ApiTokenRecord) -> serde_json::Value {
    json!({
        "id": t.id,
        "name": t.name,
        "scope": t.scope.to_string(),
        "rate": t.rate,
        "created_at": t.created_at,
        "revoked_at": t.revoked_at,
    })
}

/// A name in use or an unknown token is the caller's to fix (exit 2); the rest are failures.
fn failure(err: StoreError) -> anyhow::Error {
    match err {
        StoreError::Conflict(_) | StoreError::NotFound(_) => Exit::usage(err.to_string()),
        other => Exit::runtime(other.to_string()),
    }
}
