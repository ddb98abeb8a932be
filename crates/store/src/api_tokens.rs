//! The HTTP API's scoped tokens, kept by hash: made, listed, found by a request's token and
//! revoked, each change written with its audit record (`token.created`, `token.revoked`) in
//! one transaction.

use crate::audit::insert_audit;
use crate::error::StoreError;
use crate::sql::{OptionalExtension, Row, TransactionBehavior, params};
use crate::store::Store;
use reef_security::api_token::Scope;
use serde_json::json;

/// A token to keep: never its text, only its hash.
#[derive(Clone, Debug)]
pub struct NewApiToken {
    pub id: String,
    pub name: String,
    pub scope: Scope,
    pub hash: String,
    /// Requests per minute; `None` takes `daemon.rate_limit`.
    pub rate: Option<u32>,
}

/// A kept token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiTokenRecord {
    pub id: String,
    pub name: String,
    pub scope: Scope,
    pub rate: Option<u32>,
    pub created_at: String,
    pub revoked_at: Option<String>,
}

const COLUMNS: &str = "id, name, scope, rate, created_at, revoked_at";

fn record(row: &Row<'_>) -> crate::sql::Result<(ApiTokenRecord, String)> {
    let scope: String = row.get(2)?;
    let rate: Option<i64> = row.get(3)?;
    Ok((
        ApiTokenRecord {
            id: row.get(0)?,
            name: row.get(1)?,
            scope: Scope::Operator,
            rate: rate.map(|r| u32::try_from(r).unwrap_or(u32::MAX)),
            created_at: row.get(4)?,
            revoked_at: row.get(5)?,
        },
        scope,
    ))
}

/// The record with its stored scope read; a scope reef cannot read is damage, not a grant.
fn with_scope((mut token, scope): (ApiTokenRecord, String)) -> Result<ApiTokenRecord, StoreError> {
    token.scope = scope
        .parse()
        .map_err(|e| StoreError::Corrupt(format!("the scope of API token {} ({e})", token.name)))?;
    Ok(token)
}

impl Store {
    /// Keeps `token`, with its `token.created` record; a name in use is a conflict.
    pub async fn create_api_token(&self, token: NewApiToken) -> Result<ApiTokenRecord, StoreError> {
        self.run(move |db| {
            let now = db.clock.now();
            let tx = db
                .conn
                .transaction_with_behavior(TransactionBehavior::Immediate)?;
            let taken: bool = tx
                .prepare_cached("SELECT EXISTS (SELECT 1 FROM api_tokens WHERE name = ?1)")?
                .query_row(params![token.name], |r| r.get(0))?;
            if taken {
                return Err(StoreError::Conflict(format!(
                    "an API token named `{}` exists; pick another name or revoke it first",
                    token.name
                )));
            }
            tx.prepare_cached(
                "INSERT INTO api_tokens (id, name, scope, hash, rate, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )?
            .execute(params![
                token.id,
                token.name,
                token.scope.to_string(),
                token.hash,
                token.rate,
                now
            ])?;
            insert_audit(
                &tx,
                &now,
                "token.created",
                token.scope.agent(),
                &json!({
                    "id": token.id,
                    "name": token.name,
                    "scope": token.scope.to_string(),
                    "rate": token.rate,
                }),
            )?;
            tx.commit()?;
            Ok(ApiTokenRecord {
                id: token.id,
                name: token.name,
                scope: token.scope,
                rate: token.rate,
                created_at: now,
                revoked_at: None,
            })
        })
        .await
    }

    /// Every token, revoked ones too, oldest first.
    pub async fn api_tokens(&self) -> Result<Vec<ApiTokenRecord>, StoreError> {
        self.run(|db| {
            let rows = db
                .conn
                .prepare_cached(&format!(
                    "SELECT {COLUMNS} FROM api_tokens ORDER BY created_at, name"
                ))?
                .query_map(params![], record)?
                .collect::<crate::sql::Result<Vec<_>>>()?;
            rows.into_iter().map(with_scope).collect()
        })
        .await
    }

    /// The token whose hash is `hash`, revoked or not.
    pub async fn api_token_by_hash(
        &self,
        hash: &str,
    ) -> Result<Option<ApiTokenRecord>, StoreError> {
        let hash = hash.to_owned();
        self.run(move |db| {
            db.conn
                .prepare_cached(&format!("SELECT {COLUMNS} FROM api_tokens WHERE hash = ?1"))?
                .query_row(params![hash], record)
                .optional()?
                .map(with_scope)
                .transpose()
        })
        .await
    }

    /// Revokes the token named `which` (its name or id), with a `token.revoked` record: its
    /// next request is refused. Revoking a revoked token changes nothing and is no error.
    pub async fn revoke_api_token(&self, which: &str) -> Result<ApiTokenRecord, StoreError> {
        let which = which.to_owned();
        self.run(move |db| {
            let now = db.clock.now();
            let tx = db
                .conn
                .transaction_with_behavior(TransactionBehavior::Immediate)?;
            let found = tx
                .prepare_cached(&format!(
                    "SELECT {COLUMNS} FROM api_tokens WHERE name = ?1 OR id = ?1"
                ))?
                .query_row(params![which], record)
                .optional()?;
            let Some(found) = found else {
                return Err(StoreError::NotFound(format!(
                    "API token `{which}` (`reef token list` shows them)"
                )));
            };
            let mut token = with_scope(found)?;
            if token.revoked_at.is_none() {
                tx.prepare_cached("UPDATE api_tokens SET revoked_at = ?1 WHERE id = ?2")?
                    .execute(params![now, token.id])?;
                insert_audit(
                    &tx,
                    &now,
                    "token.revoked",
                    token.scope.agent(),
                    &json!({"id": token.id, "name": token.name}),
                )?;
                token.revoked_at = Some(now);
            }
            tx.commit()?;
            Ok(token)
        })
        .await
    }
}
