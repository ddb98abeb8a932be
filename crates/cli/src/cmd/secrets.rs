//! `reef secrets set|list|rm|rotate`: the encrypted vault in `$REEF_HOME/vault`, beside the
//! `[secrets.NAME]` entries of reef.toml. Values are typed on the terminal or piped on stdin;
//! each change is an audit record (names, never values).

use crate::exit::{self, Exit};
use crate::home;
use crate::passphrase;
use crate::secrets_args::SecretsCommand;
use reef_config::Config;
use reef_core::{SecretPolicy, SecretSource};
use serde_json::json;
use std::io::{IsTerminal as _, Read as _};
use zeroize::Zeroizing;

/// Values shorter than this could not be told apart in outputs, so they are refused.
const MIN_LEN: usize = reef_tools::MIN_SECRET_LEN;

/// The largest value read from stdin.
const MAX_VALUE: u64 = 64 * 1024;

pub async fn secrets(overrides: &[String], command: SecretsCommand) -> anyhow::Result<u8> {
    let config = home::load_config(overrides)?;
    match command {
        SecretsCommand::Set {
            name,
            policy,
            only_for,
            description,
        } => {
            reef_config::check_secret_name(&name).map_err(Exit::usage)?;
            refuse_configured(&config, &name)?;
            let given = (policy.is_some() || !only_for.is_empty())
                .then(|| policy_of(policy.as_deref(), &only_for))
                .transpose()?;
            passphrase::unlock(&config.vault)?;
            let value = read_value(&name)?;
            let now = now();
            // A value set again keeps its policy and description unless new ones are given.
            let shown = config.vault.update(|file, key| {
                let old = file.secrets.get(&name);
                let description = description.or_else(|| old.and_then(|e| e.description.clone()));
                let policy = given
                    .or_else(|| old.map(|e| e.policy.clone()))
                    .unwrap_or_default();
                let shown = policy.describe();
                file.put(key, &name, &value, policy, description, &now)?;
                Ok(shown)
            })?;
            audit(
                &config,
                "secret.set",
                json!({"name": name, "policy": shown}),
            )
            .await?;
            println!("{name}: stored in the vault ({shown})");
            Ok(exit::OK)
        }
        SecretsCommand::List { json } => list(&config, json).await,
        SecretsCommand::Rm { name } => {
            passphrase::unlock(&config.vault)?;
            let removed = config.vault.update(|file, _| Ok(file.remove(&name)))?;
            if !removed {
                return Err(Exit::usage(format!("no secret `{name}` in the vault")));
            }
            audit(&config, "secret.removed", json!({"name": name})).await?;
            println!("{name}: removed from the vault");
            Ok(exit::OK)
        }
        SecretsCommand::Rotate {
            name: Some(name),
            passphrase: false,
        } => {
            passphrase::unlock(&config.vault)?;
            let Some(entry) = config
                .vault
                .load()?
                .and_then(|f| f.secrets.get(&name).cloned())
            else {
                return Err(Exit::usage(format!("no secret `{name}` in the vault")));
            };
            let value = read_value(&name)?;
            let now = now();
            config.vault.update(|file, key| {
                file.put(key, &name, &value, entry.policy, entry.description, &now)
            })?;
            audit(&config, "secret.rotated", json!({"name": name})).await?;
            println!("{name}: new value stored; agents get it at their next use");
            Ok(exit::OK)
        }
        SecretsCommand::Rotate { .. } => {
            passphrase::unlock(&config.vault)?;
            let Some(pass) = passphrase::read_hidden("new vault passphrase: ")? else {
                return Err(Exit::usage(
                    "changing the passphrase asks for the new one on a terminal",
                ));
            };
            let Some(again) = passphrase::read_hidden("the same passphrase again: ")? else {
                return Err(Exit::usage("no terminal"));
            };
            if *again != *pass {
                return Err(Exit::usage("the two passphrases differ; nothing changed"));
            }
            let count = config.vault.rekey(&pass)?;
            audit(&config, "vault.rekeyed", json!({"secrets": count})).await?;
            println!(
                "the vault's {count} secrets are sealed under the new passphrase (update \
                 REEF_VAULT_PASSPHRASE or [vault] key_file where you use them)"
            );
            Ok(exit::OK)
        }
    }
}

/// A name `[secrets.NAME]` already gives an env or file source would be shadowed.
fn refuse_configured(config: &Config, name: &str) -> anyhow::Result<()> {
    match config
        .secrets
        .iter()
        .find(|s| s.name == name)
        .map(|s| &s.source)
    {
        Some(SecretSource::Env(_) | SecretSource::File(_)) => Err(Exit::usage(format!(
            "`{name}` is configured in reef.toml ([secrets.{name}]), which takes precedence; \
                 remove it there first"
        ))),
        _ => Ok(()),
    }
}

fn policy_of(policy: Option<&str>, only_for: &[String]) -> anyhow::Result<SecretPolicy> {
    if !only_for.is_empty() {
        let scopes = only_for
            .iter()
            .map(|s| s.parse())
            .collect::<Result<Vec<_>, String>>()
            .map_err(|e| Exit::usage(format!("--only-for {e}")))?;
        return Ok(SecretPolicy::OnlyFor(scopes));
    }
    match policy {
        None | Some("always") => Ok(SecretPolicy::Always),
        Some("with-approval") => Ok(SecretPolicy::WithApproval),
        Some("only-for") => Err(Exit::usage("--policy only-for: name who with --only-for")),
        Some(other) => Err(Exit::usage(format!(
            "--policy {other:?}: use always or with-approval (or --only-for SCOPE)"
        ))),
    }
}

/// The value: typed on the terminal (not echoed), or all of stdin without its final newline.
fn read_value(name: &str) -> anyhow::Result<Zeroizing<String>> {
    let value = if std::io::stdin().is_terminal() {
        passphrase::read_hidden(&format!("value of {name}: "))?
            .ok_or_else(|| Exit::usage("no terminal to read the value from"))?
    } else {
        let mut bytes = Zeroizing::new(Vec::new());
        std::io::stdin()
            .take(MAX_VALUE + 1)
            .read_to_end(&mut bytes)?;
        if bytes.len() as u64 > MAX_VALUE {
            return Err(Exit::usage(format!(
                "the value on stdin is over {MAX_VALUE} bytes"
            )));
        }
        let text = std::str::from_utf8(&bytes)
            .map_err(|_| Exit::usage("the value on stdin is not UTF-8"))?;
        Zeroizing::new(text.trim_end_matches(['\n', '\r']).to_owned())
    };
    if value.chars().count() < MIN_LEN {
        return Err(Exit::usage(format!(
            "the value of {name} is shorter than {MIN_LEN} characters, too short to be redacted \
             from outputs reliably"
        )));
    }
    Ok(value)
}

async fn list(config: &Config, json: bool) -> anyhow::Result<u8> {
    let store = home::open_store(config)?;
    let uses = store.last_secret_uses().await?;
    let rows: Vec<serde_json::Value> = config
        .secrets
        .iter()
        .map(|s| {
            let source = match &s.source {
                SecretSource::Env(var) => format!("env {var}"),
                SecretSource::File(path) => format!("file {}", path.display()),
                SecretSource::Vault => "vault".to_owned(),
            };
            let last = uses.get(&s.name);
            json!({
                "name": s.name,
                "source": source,
                "policy": s.policy.describe(),
                "description": s.description,
                "last_used": last.map(|u| u.at.clone()),
                "last_used_by": last.map(|u| format!("{} ({})",
                    u.agent.as_deref().unwrap_or("-"), u.tool)),
            })
        })
        .collect();
    if json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(exit::OK);
    }
    if rows.is_empty() {
        println!("no secrets: add one with `reef secrets set NAME`");
        return Ok(exit::OK);
    }
    let table: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let field = |k: &str| r[k].as_str().unwrap_or("-").to_owned();
            let last = match (r["last_used"].as_str(), r["last_used_by"].as_str()) {
                (Some(at), Some(by)) => format!("{at} by {by}"),
                _ => "never".to_owned(),
            };
            vec![field("name"), field("source"), field("policy"), last]
        })
        .collect();
    let width = |i: usize, head: &str| {
        table
            .iter()
            .map(|r| r[i].chars().count())
            .chain([head.len()])
            .max()
            .unwrap_or(0)
    };
    let (w0, w1, w2) = (width(0, "NAME"), width(1, "SOURCE"), width(2, "POLICY"));
    println!(
        "{:<w0$}  {:<w1$}  {:<w2$}  LAST USE",
        "NAME", "SOURCE", "POLICY"
    );
    for r in &table {
        println!("{:<w0$}  {:<w1$}  {:<w2$}  {}", r[0], r[1], r[2], r[3]);
    }
    Ok(exit::OK)
}

async fn audit(config: &Config, kind: &str, data: serde_json::Value) -> anyhow::Result<()> {
    let store = home::open_store(config)?;
    let mut data = data;
    data["by"] = json!("cli");
    store.append_audit(kind, None, data).await?;
    Ok(())
}

fn now() -> String {
    time::OffsetDateTime::now_utc()
        .replace_nanosecond(0)
        .unwrap_or_else(|_| time::OffsetDateTime::now_utc())
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}
