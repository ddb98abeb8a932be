//! Agents' capability tokens and the revoked block ids, each change written with its audit
//! record in one transaction (`cap.minted`, `cap.granted`, `cap.revoked`).

use crate::audit::insert_audit;
use crate::error::StoreError;
use crate::sql::{OptionalExtension, TransactionBehavior, params};
use crate::store::Store;
use reef_core::{AgentId, Capabilities};
use serde_json::{Value, json};
use std::collections::HashSet;

/// What a check of an agent's rights reads: its token and every revoked id.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CapabilityState {
    /// `None` until one is minted.
    pub token: Option<String>,
    pub revoked: HashSet<String>,
}

impl Store {
    /// Keeps `token` as the agent's and writes the audit record `kind` (`cap.granted` when the
    /// operator widened its rights or minted it anew) with `data`. With `capabilities`, the
    /// agent's stored capabilities become those.
    pub async fn set_agent_token(
        &self,
        id: &AgentId,
        token: &str,
        capabilities: Option<&Capabilities>,
        kind: &str,
        data: Value,
    ) -> Result<(), StoreError> {
        let id = id.clone();
        let token = token.to_owned();
        let capabilities = capabilities
            .map(serde_json::to_string)
            .transpose()
            .map_err(|e| StoreError::Invalid {
                field: "capabilities",
                message: e.to_string(),
            })?;
        let kind = kind.to_owned();
        self.run(move |db| {
            let now = db.clock.now();
            let tx = db
                .conn
                .transaction_with_behavior(TransactionBehavior::Immediate)?;
            let name: Option<String> = tx
                .prepare_cached("SELECT name FROM agents WHERE id = ?1")?
                .query_row(params![id.as_str()], |r| r.get(0))
                .optional()?;
            let Some(name) = name else {
                return Err(StoreError::NotFound(format!("agent {id}")));
            };
            tx.prepare_cached(
                "UPDATE agents SET token = ?1,
                     capabilities = COALESCE(?2, capabilities), updated_at = ?3
                 WHERE id = ?4",
            )?
            .execute(params![token, capabilities, now, id.as_str()])?;
            insert_audit(&tx, &now, &kind, Some(&name), &data)?;
            tx.commit()?;
            Ok(())
        })
        .await
    }

    /// Keeps `token` as the agent's first token, with its `cap.minted` record, unless it
    /// already has one: then nothing is written and the token it has is returned (two
    /// processes minting at once agree on one).
    pub async fn init_agent_token(
        &self,
        id: &AgentId,
        token: &str,
        data: Value,
    ) -> Result<Option<String>, StoreError> {
        let id = id.clone();
        let token = token.to_owned();
        self.run(move |db| {
            let now = db.clock.now();
            let tx = db
                .conn
                .transaction_with_behavior(TransactionBehavior::Immediate)?;
            let row: Option<(String, Option<String>)> = tx
                .prepare_cached("SELECT name, token FROM agents WHERE id = ?1")?
                .query_row(params![id.as_str()], |r| Ok((r.get(0)?, r.get(1)?)))
                .optional()?;
            let (name, existing) =
                row.ok_or_else(|| StoreError::NotFound(format!("agent {id}")))?;
            if existing.is_some() {
                return Ok(existing);
            }
            tx.prepare_cached("UPDATE agents SET token = ?1, updated_at = ?2 WHERE id = ?3")?
                .execute(params![token, now, id.as_str()])?;
            insert_audit(&tx, &now, "cap.minted", Some(&name), &data)?;
            tx.commit()?;
            Ok(None)
        })
        .await
    }

    /// Whether any agent holds a token (a new root key would make them all fail).
    pub(crate) fn any_agent_token(&self) -> Result<bool, StoreError> {
        let db = self.lock();
        Ok(db
            .conn
            .prepare_cached("SELECT EXISTS (SELECT 1 FROM agents WHERE token IS NOT NULL)")?
            .query_row(params![], |r| r.get(0))?)
    }

    /// The agent's token and every revoked id, or `None` when no agent has that name.
    pub async fn capability_state(
        &self,
        name: &str,
    ) -> Result<Option<CapabilityState>, StoreError> {
        let name = name.to_owned();
        self.run(move |db| {
            let token: Option<Option<String>> = db
                .conn
                .prepare_cached("SELECT token FROM agents WHERE name = ?1")?
                .query_row(params![name], |r| r.get(0))
                .optional()?;
            let Some(token) = token else {
                return Ok(None);
            };
            let revoked = db
                .conn
                .prepare_cached("SELECT id FROM cap_revoked")?
                .query_map(params![], |r| r.get(0))?
                .collect::<crate::sql::Result<HashSet<String>>>()?;
            Ok(Some(CapabilityState { token, revoked }))
        })
        .await
    }

    /// Every revoked id.
    pub async fn revoked_ids(&self) -> Result<HashSet<String>, StoreError> {
        self.run(|db| {
            Ok(db
                .conn
                .prepare_cached("SELECT id FROM cap_revoked")?
                .query_map(params![], |r| r.get(0))?
                .collect::<crate::sql::Result<HashSet<String>>>()?)
        })
        .await
    }

    /// Revokes the block ids `ids` of `agent`'s token, with a `cap.revoked` record; returns how
    /// many were not revoked before.
    pub async fn revoke_tokens(
        &self,
        agent: &str,
        ids: &[String],
        reason: &str,
    ) -> Result<usize, StoreError> {
        let agent = agent.to_owned();
        let ids = ids.to_vec();
        let reason = reason.to_owned();
        self.run(move |db| {
            let now = db.clock.now();
            let tx = db
                .conn
                .transaction_with_behavior(TransactionBehavior::Immediate)?;
            let mut fresh = 0;
            for id in &ids {
                fresh += tx
                    .prepare_cached(
                        "INSERT INTO cap_revoked (id, agent, reason, at) VALUES (?1, ?2, ?3, ?4)
                         ON CONFLICT (id) DO NOTHING",
                    )?
                    .execute(params![id, agent, reason, now])?;
            }
            insert_audit(
                &tx,
                &now,
                "cap.revoked",
                Some(&agent),
                &json!({"ids": ids, "reason": reason}),
            )?;
            tx.commit()?;
            Ok(fresh)
        })
        .await
    }
}
