//! Routines as stored: definitions put by the configuration, the operator or an agent,
//! replaced with their history kept, enabled and disabled, and the count of failed runs in a
//! row that disables one. Their fires are `fires.rs`.

use crate::error::StoreError;
use crate::events::insert_event;
use crate::sql::{Conn, OptionalExtension, Row, TransactionBehavior, params};
use crate::store::Store;
use reef_core::{AgentId, RoutineSpec};
use serde::Serialize;
use serde_json::json;

/// Who defined a routine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RoutineSource {
    /// `[routines.NAME]` in `reef.toml`, reconciled at every start.
    Config,
    /// A template's `schedule`.
    Template,
    /// The CLI or the HTTP API.
    Operator,
    /// An agent's `schedule_routine` tool; dies with the agent.
    Agent,
    /// `[heartbeat]` for one agent; dies with the agent.
    Heartbeat,
}

impl RoutineSource {
    pub fn as_str(self) -> &'static str {
        match self {
            RoutineSource::Config => "config",
            RoutineSource::Template => "template",
            RoutineSource::Operator => "operator",
            RoutineSource::Agent => "agent",
            RoutineSource::Heartbeat => "heartbeat",
        }
    }

    fn parse(s: &str) -> Option<RoutineSource> {
        [
            RoutineSource::Config,
            RoutineSource::Template,
            RoutineSource::Operator,
            RoutineSource::Agent,
            RoutineSource::Heartbeat,
        ]
        .into_iter()
        .find(|k| k.as_str() == s)
    }
}

/// A routine as stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RoutineRecord {
    pub id: String,
    pub name: String,
    pub spec: RoutineSpec,
    pub enabled: bool,
    pub source: RoutineSource,
    /// The agent that scheduled it (deleted with that agent).
    pub owner: Option<AgentId>,
    /// Failed runs in a row.
    pub failures: u32,
    pub disabled_reason: Option<String>,
    /// Intervals count from this instant (ms since the Unix epoch).
    pub anchor_ms: i64,
    /// Every timed fire at or before this instant is settled (ms since the Unix epoch).
    pub watermark_ms: i64,
    /// When the latest run was claimed (ms since the Unix epoch).
    pub last_run_ms: Option<i64>,
    pub created_at: String,
    pub updated_at: String,
}

/// A definition to store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewRoutine {
    pub name: String,
    pub spec: RoutineSpec,
    pub enabled: bool,
    pub source: RoutineSource,
    pub owner: Option<AgentId>,
}

/// What [`Store::put_routine`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PutOutcome {
    Created,
    /// The definition changed: the new one replaced it; its fire history is kept.
    Replaced,
    Unchanged,
}

const COLUMNS: &str = "id, name, spec, enabled, source, owner_id, failures, disabled_reason, \
                       anchor_ms, watermark_ms, last_run_ms, created_at, updated_at";

fn from_row(row: &Row<'_>) -> crate::sql::Result<RoutineRecord> {
    let spec: String = row.get(2)?;
    let source: String = row.get(4)?;
    let bad = |what: String| crate::sql::Error::Column {
        index: 0,
        message: what,
    };
    Ok(RoutineRecord {
        id: row.get(0)?,
        name: row.get(1)?,
        spec: serde_json::from_str(&spec).map_err(|e| bad(format!("routine spec: {e}")))?,
        enabled: row.get(3)?,
        source: RoutineSource::parse(&source)
            .ok_or_else(|| bad(format!("unknown routine source `{source}`")))?,
        owner: row
            .get::<Option<String>>(5)?
            .map(|id| AgentId::from(id.as_str())),
        failures: row.get(6)?,
        disabled_reason: row.get(7)?,
        anchor_ms: row.get(8)?,
        watermark_ms: row.get(9)?,
        last_run_ms: row.get(10)?,
        created_at: row.get(11)?,
        updated_at: row.get(12)?,
    })
}

fn by_name_in(conn: &Conn, name: &str) -> Result<Option<RoutineRecord>, StoreError> {
    Ok(conn
        .prepare_cached(&format!("SELECT {COLUMNS} FROM routines WHERE name = ?1"))?
        .query_row(params![name], from_row)
        .optional()?)
}

pub(crate) fn by_id_in(conn: &Conn, id: &str) -> Result<RoutineRecord, StoreError> {
    conn.prepare_cached(&format!("SELECT {COLUMNS} FROM routines WHERE id = ?1"))?
        .query_row(params![id], from_row)
        .optional()?
        .ok_or_else(|| StoreError::NotFound(format!("routine {id}")))
}

fn spec_json(spec: &RoutineSpec) -> Result<String, StoreError> {
    serde_json::to_string(spec)
        .map_err(|e| StoreError::Corrupt(format!("routine spec cannot be written: {e}")))
}

/// Adds one to the routine's failures in a row and disables it when they reach its
/// `max_failures` (recording `routine.disabled`).
pub(crate) fn count_failure_in(
    tx: &Conn,
    now: &str,
    routine_id: &str,
    reason: Option<&str>,
) -> Result<(), StoreError> {
    tx.prepare_cached("UPDATE routines SET failures = failures + 1 WHERE id = ?1")?
        .execute(params![routine_id])?;
    let (name, failures, max, enabled): (String, u32, u32, bool) = tx
        .prepare_cached("SELECT name, failures, max_failures, enabled FROM routines WHERE id = ?1")?
        .query_row(params![routine_id], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
        })?;
    if enabled && max > 0 && failures >= max {
        let why = format!(
            "disabled after {failures} failed runs in a row (last: {})",
            reason.unwrap_or("no reason given")
        );
        tx.prepare_cached(
            "UPDATE routines SET enabled = FALSE, disabled_reason = ?1, updated_at = ?2 WHERE id = ?3",
        )?
        .execute(params![why, now, routine_id])?;
        insert_event(
            tx,
            now,
            "routine.disabled",
            None,
            &json!({"routine": name, "failures": failures, "reason": why}),
        )?;
    }
    Ok(())
}

impl Store {
    /// Creates a routine; a taken name is a `Conflict`.
    pub async fn create_routine(
        &self,
        new: NewRoutine,
        now_ms: i64,
    ) -> Result<RoutineRecord, StoreError> {
        self.run(move |db| {
            let tx = db
                .conn
                .transaction_with_behavior(TransactionBehavior::Immediate)?;
            let now = db.clock.now();
            if by_name_in(&tx, &new.name)?.is_some() {
                return Err(StoreError::Conflict(format!(
                    "a routine named `{}` already exists",
                    new.name
                )));
            }
            let record = insert_in(&tx, &now, now_ms, &new)?;
            tx.commit()?;
            Ok(record)
        })
        .await
    }

    /// Creates or replaces a routine by name. An unchanged definition keeps its state; a
    /// changed one replaces it (its fires so far stay in its history, and a changed trigger
    /// starts counting from now).
    pub async fn put_routine(
        &self,
        new: NewRoutine,
        now_ms: i64,
    ) -> Result<(RoutineRecord, PutOutcome), StoreError> {
        self.run(move |db| {
            let tx = db
                .conn
                .transaction_with_behavior(TransactionBehavior::Immediate)?;
            let now = db.clock.now();
            let out = match by_name_in(&tx, &new.name)? {
                None => (insert_in(&tx, &now, now_ms, &new)?, PutOutcome::Created),
                Some(old) if old.spec == new.spec && old.source == new.source => {
                    (old, PutOutcome::Unchanged)
                }
                Some(old) => {
                    let trigger_changed = old.spec.trigger != new.spec.trigger;
                    tx.prepare_cached(
                        "UPDATE routines SET spec = ?1, enabled = ?2, source = ?3, owner_id = ?4,
                                max_failures = ?5, failures = 0, disabled_reason = NULL,
                                anchor_ms = CASE WHEN ?6 THEN ?7 ELSE anchor_ms END,
                                watermark_ms = CASE WHEN ?6 THEN ?7 ELSE watermark_ms END,
                                updated_at = ?8
                         WHERE id = ?9",
                    )?
                    .execute(params![
                        spec_json(&new.spec)?,
                        new.enabled,
                        new.source.as_str(),
                        new.owner.as_ref().map(AgentId::as_str),
                        new.spec.guardrails.max_failures,
                        trigger_changed,
                        now_ms,
                        now,
                        old.id
                    ])?;
                    insert_event(
                        &tx,
                        &now,
                        "routine.updated",
                        None,
                        &json!({"routine": new.name}),
                    )?;
                    (by_id_in(&tx, &old.id)?, PutOutcome::Replaced)
                }
            };
            tx.commit()?;
            Ok(out)
        })
        .await
    }

    /// Deletes a routine and its fire history (its jobs stay); `false` if there was none.
    pub async fn delete_routine(&self, name: &str) -> Result<bool, StoreError> {
        let name = name.to_owned();
        self.run(move |db| {
            let tx = db
                .conn
                .transaction_with_behavior(TransactionBehavior::Immediate)?;
            let now = db.clock.now();
            let n = tx
                .prepare_cached("DELETE FROM routines WHERE name = ?1")?
                .execute(params![name])?;
            if n > 0 {
                insert_event(
                    &tx,
                    &now,
                    "routine.deleted",
                    None,
                    &json!({"routine": name}),
                )?;
            }
            tx.commit()?;
            Ok(n > 0)
        })
        .await
    }

    /// Enables or disables a routine. Enabling clears its failures and starts its clock at
    /// `now_ms`: fires missed while it was off are not caught up.
    pub async fn set_routine_enabled(
        &self,
        name: &str,
        enabled: bool,
        reason: Option<String>,
        now_ms: i64,
    ) -> Result<RoutineRecord, StoreError> {
        let name = name.to_owned();
        self.run(move |db| {
            let tx = db
                .conn
                .transaction_with_behavior(TransactionBehavior::Immediate)?;
            let now = db.clock.now();
            let old = by_name_in(&tx, &name)?
                .ok_or_else(|| StoreError::NotFound(format!("routine {name}")))?;
            if enabled {
                tx.prepare_cached(
                    "UPDATE routines SET enabled = TRUE, failures = 0, disabled_reason = NULL,
                            watermark_ms = CASE WHEN watermark_ms > ?1 THEN watermark_ms ELSE ?1 END,
                            updated_at = ?2 WHERE id = ?3",
                )?
                .execute(params![now_ms, now, old.id])?;
            } else {
                tx.prepare_cached(
                    "UPDATE routines SET enabled = FALSE, disabled_reason = ?1, updated_at = ?2
                     WHERE id = ?3",
                )?
                .execute(params![reason, now, old.id])?;
            }
            let kind = if enabled {
                "routine.enabled"
            } else {
                "routine.disabled"
            };
            insert_event(
                &tx,
                &now,
                kind,
                None,
                &json!({"routine": name, "reason": reason}),
            )?;
            let record = by_id_in(&tx, &old.id)?;
            tx.commit()?;
            Ok(record)
        })
        .await
    }

    /// Every routine, by name.
    pub async fn list_routines(&self) -> Result<Vec<RoutineRecord>, StoreError> {
        self.run(|db| {
            let mut stmt = db
                .conn
                .prepare_cached(&format!("SELECT {COLUMNS} FROM routines ORDER BY name"))?;
            let rows = stmt.query_map(params![], from_row)?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })
        .await
    }

    /// The names of the routines `agent` owns (deleted with it).
    pub async fn routines_owned_by(&self, agent: &AgentId) -> Result<Vec<String>, StoreError> {
        let agent = agent.clone();
        self.run(move |db| {
            let mut stmt = db
                .conn
                .prepare_cached("SELECT name FROM routines WHERE owner_id = ?1 ORDER BY name")?;
            let rows = stmt.query_map(params![agent.as_str()], |r| r.get::<String>(0))?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })
        .await
    }

    pub async fn routine_by_id(&self, id: &str) -> Result<Option<RoutineRecord>, StoreError> {
        let id = id.to_owned();
        self.run(move |db| match by_id_in(&db.conn, &id) {
            Ok(record) => Ok(Some(record)),
            Err(StoreError::NotFound(_)) => Ok(None),
            Err(err) => Err(err),
        })
        .await
    }

    pub async fn routine_by_name(&self, name: &str) -> Result<Option<RoutineRecord>, StoreError> {
        let name = name.to_owned();
        self.run(move |db| by_name_in(&db.conn, &name)).await
    }
}

fn insert_in(
    tx: &Conn,
    now: &str,
    now_ms: i64,
    new: &NewRoutine,
) -> Result<RoutineRecord, StoreError> {
    let id = format!("rtn_{}", uuid::Uuid::now_v7().simple());
    tx.prepare_cached(
        "INSERT INTO routines (id, name, spec, enabled, source, owner_id, max_failures,
                               anchor_ms, watermark_ms, created_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8, ?9, ?9)",
    )?
    .execute(params![
        id,
        new.name,
        spec_json(&new.spec)?,
        new.enabled,
        new.source.as_str(),
        new.owner.as_ref().map(AgentId::as_str),
        new.spec.guardrails.max_failures,
        now_ms,
        now
    ])?;
    insert_event(
        tx,
        now,
        "routine.created",
        None,
        &json!({"routine": new.name, "source": new.source}),
    )?;
    by_id_in(tx, &id)
}
