//! Daemon agents' capability tokens: minted when an agent is made (from the root key for an
//! agent the operator made, as its parent's token with a narrowing block for a child), widened
//! only by a fresh mint from the root key (`reef cap grant`), revoked by block id
//! (`reef cap revoke`). Each change is written with its audit record.

use crate::error::RuntimeError;
use reef_core::Capabilities;
use reef_security::cap::{CapError, Grant, OPERATOR, Token};
use reef_store::{AgentRecord, Store};
use serde_json::json;
use std::collections::HashSet;

/// The fewest leading characters of a revocation id `--id` accepts.
pub const MIN_ID_PREFIX: usize = 8;

/// A revocation id (128 hex digits, the block's signature) as shown to people: its first 16.
pub fn short_id(id: &str) -> &str {
    id.get(..16).unwrap_or(id)
}

/// An agent's token as `reef cap show` reports it.
#[derive(Debug)]
pub struct TokenReport {
    pub agent: AgentRecord,
    /// The verified token, or why it does not verify; `None` when none was minted yet.
    pub token: Option<Result<Token, CapError>>,
    /// The revocation ids of its blocks that are revoked.
    pub revoked: Vec<String>,
}

impl From<CapError> for RuntimeError {
    fn from(err: CapError) -> RuntimeError {
        RuntimeError::Setup(err.to_string())
    }
}

/// The agent's token, minted now if it has none: as its parent's token narrowed to the
/// agent's capabilities (the parent's minted first if it has none), from the root key for an
/// agent without a parent.
pub async fn ensure_token(store: &Store, agent: &AgentRecord) -> Result<Token, RuntimeError> {
    let root = store.capability_root();
    if let Some(state) = store.capability_state(&agent.name).await?
        && let Some(text) = state.token
    {
        return Ok(Token::parse(&text, root)?);
    }
    let parent = match &agent.parent {
        Some(id) => store.get_agent(id).await?,
        None => None,
    };
    let grant = |by: &str| Grant {
        agent: agent.name.clone(),
        by: by.to_owned(),
        capabilities: agent.capabilities.clone(),
        budget: agent.budget.clone(),
    };
    let token = match &parent {
        // A parent whose token does not verify cannot hand anything on: the error says so.
        Some(parent) => Box::pin(ensure_token(store, parent))
            .await?
            .attenuate(&grant(&parent.name))?,
        None => Token::mint(root, &grant(OPERATOR))?,
    };
    let data = json!({"by": token.grants().last().map(|g| g.by.clone()),
                      "blocks": token.grants().len(),
                      "revocation_ids": token.revocation_ids()});
    match store
        .init_agent_token(&agent.id, token.text(), data)
        .await?
    {
        None => Ok(token),
        // Another process minted one first: that one is the agent's.
        Some(text) => Ok(Token::parse(&text, root)?),
    }
}

/// Widens `name`'s capabilities by `rights` (see [`reef_core::RIGHT_FORMS`]) and mints it a
/// new token from the root key. With no rights, mints a new token for the capabilities it
/// has (after its token was damaged, or the root key replaced). The new token descends from
/// no other, so revoking its old parent no longer reaches it.
pub async fn grant(store: &Store, name: &str, rights: &[String]) -> Result<Token, RuntimeError> {
    let agent = agent(store, name).await?;
    let mut capabilities: Capabilities = agent.capabilities.clone();
    for right in rights {
        capabilities
            .grant(right)
            .map_err(|message| RuntimeError::invalid("RIGHT", message))?;
    }
    let token = Token::mint(
        store.capability_root(),
        &Grant {
            agent: agent.name.clone(),
            by: OPERATOR.to_owned(),
            capabilities: capabilities.clone(),
            budget: agent.budget.clone(),
        },
    )?;
    store
        .set_agent_token(
            &agent.id,
            token.text(),
            Some(&capabilities),
            "cap.granted",
            json!({"rights": rights, "revocation_ids": token.revocation_ids()}),
        )
        .await?;
    Ok(token)
}

/// Revokes `id` (8 or more of the first characters of one of the revocation ids of `name`'s
/// token), or the newest block of its token and of each of its descendants' tokens: the agent
/// and every agent whose token holds one of those blocks fail their next check. Returns the
/// ids revoked.
pub async fn revoke(
    store: &Store,
    name: &str,
    id: Option<&str>,
) -> Result<Vec<String>, RuntimeError> {
    let report = show(store, name).await?;
    let token = match report.token {
        Some(Ok(token)) => token,
        Some(Err(err)) => return Err(err.into()),
        None => {
            return Err(RuntimeError::Conflict(format!(
                "`{name}` has no capability token to revoke"
            )));
        }
    };
    let ids = token.revocation_ids();
    let chosen = match id {
        Some(prefix) => {
            let prefix = prefix.to_ascii_lowercase();
            let matching: Vec<&String> = ids.iter().filter(|i| i.starts_with(&prefix)).collect();
            match matching[..] {
                [one] if prefix.len() >= MIN_ID_PREFIX => one.clone(),
                [_, _, ..] => {
                    return Err(RuntimeError::invalid(
                        "--id",
                        format!("`{prefix}` starts more than one revocation id; type more of it"),
                    ));
                }
                _ => {
                    let known: Vec<&str> = ids.iter().map(|i| short_id(i)).collect();
                    return Err(RuntimeError::invalid(
                        "--id",
                        format!(
                            "`{prefix}` is not a revocation id of `{name}`'s token (at least \
                             {MIN_ID_PREFIX} of its first characters); its ids start {}",
                            known.join(", ")
                        ),
                    ));
                }
            }
        }
        None => ids.last().cloned().unwrap_or_default(),
    };
    let mut revoked = vec![chosen];
    // The agent's descendants by spawning: a child minted from the root key (its parent had
    // none) or holding an older token of its parent (before a grant) does not hold the id
    // revoked above, so each one's own newest block is revoked too.
    if id.is_none() {
        for agent in descendants(store, &report.agent).await? {
            if let Some(Ok(token)) = show(store, &agent.name).await?.token
                && let Some(own) = token.revocation_ids().pop()
                && !revoked.contains(&own)
            {
                revoked.push(own);
            }
        }
    }
    store
        .revoke_tokens(&report.agent.name, &revoked, "revoked by the operator")
        .await?;
    Ok(revoked)
}

/// Every agent spawned by `agent`, by its children and theirs.
async fn descendants(store: &Store, agent: &AgentRecord) -> Result<Vec<AgentRecord>, RuntimeError> {
    let all = store.list_agents().await?;
    let mut out: Vec<AgentRecord> = Vec::new();
    let mut frontier = vec![agent.id.clone()];
    while let Some(parent) = frontier.pop() {
        for child in all.iter().filter(|a| a.parent.as_ref() == Some(&parent)) {
            if !out.iter().any(|o| o.id == child.id) {
                frontier.push(child.id.clone());
                out.push(child.clone());
            }
        }
    }
    Ok(out)
}

/// `name`'s token, verified, and which of its blocks are revoked.
pub async fn show(store: &Store, name: &str) -> Result<TokenReport, RuntimeError> {
    let agent = agent(store, name).await?;
    let state = store
        .capability_state(&agent.name)
        .await?
        .unwrap_or_default();
    let token = state
        .token
        .map(|text| Token::parse(&text, store.capability_root()));
    let revoked = match &token {
        Some(Ok(token)) => revoked_of(token, &state.revoked),
        _ => Vec::new(),
    };
    Ok(TokenReport {
        agent,
        token,
        revoked,
    })
}

fn revoked_of(token: &Token, revoked: &HashSet<String>) -> Vec<String> {
    token
        .revocation_ids()
        .into_iter()
        .filter(|id| revoked.contains(id))
        .collect()
}

async fn agent(store: &Store, name: &str) -> Result<AgentRecord, RuntimeError> {
    store
        .agent_by_name(name)
        .await?
        .ok_or_else(|| RuntimeError::NotFound(format!("no agent named `{name}`")))
}
