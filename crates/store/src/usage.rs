//! Per-model-request token usage: recording, listing and totalling per session.

use crate::error::StoreError;
use crate::records::{NewUsage, UsageRecord};
use crate::store::{Store, ensure_session, from_sql_int, to_sql_int};
use reef_core::{SessionId, Usage};
use rusqlite::params;

impl Store {
    /// Records the usage of one model request. `NotFound` if the session does not exist.
    pub async fn record_usage(
        &self,
        session: &SessionId,
        record: &NewUsage,
    ) -> Result<(), StoreError> {
        let session = session.clone();
        let record = record.clone();
        self.run(move |db| {
            let tx = db.conn.transaction()?;
            ensure_session(&tx, &session)?;
            let now = db.clock.now();
            tx.prepare_cached(
                "INSERT INTO model_usage
                   (session_id, round, provider, model, input_tokens, output_tokens,
                    cached_input_tokens, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            )?
            .execute(params![
                session.as_str(),
                record.round,
                record.provider,
                record.model,
                to_sql_int(record.usage.input_tokens),
                to_sql_int(record.usage.output_tokens),
                to_sql_int(record.usage.cached_input_tokens),
                now,
            ])?;
            tx.commit()?;
            Ok(())
        })
        .await
    }

    /// Every usage record of the session, oldest first.
    pub async fn usage(&self, session: &SessionId) -> Result<Vec<UsageRecord>, StoreError> {
        let session = session.clone();
        self.run(move |db| {
            let tx = db.conn.transaction()?;
            ensure_session(&tx, &session)?;
            let mut stmt = tx.prepare(
                "SELECT provider, model, input_tokens, output_tokens, cached_input_tokens, round,
                        created_at
                 FROM model_usage WHERE session_id = ?1 ORDER BY id",
            )?;
            let rows = stmt.query_map(params![session.as_str()], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    [
                        r.get::<_, i64>(2)?,
                        r.get::<_, i64>(3)?,
                        r.get::<_, i64>(4)?,
                    ],
                    r.get::<_, i64>(5)?,
                    r.get::<_, String>(6)?,
                ))
            })?;
            let mut out = Vec::new();
            for row in rows {
                let (provider, model, tokens, round, created_at) = row?;
                let what = format!("usage of session {session}");
                out.push(UsageRecord {
                    provider,
                    model,
                    usage: usage_from(tokens, &what)?,
                    round: u32::try_from(round).map_err(|_| {
                        StoreError::Corrupt(format!("{what}: round {round} out of range"))
                    })?,
                    created_at,
                });
            }
            Ok(out)
        })
        .await
    }

    /// The sum of every usage record of the session (zero if none).
    pub async fn usage_total(&self, session: &SessionId) -> Result<Usage, StoreError> {
        let session = session.clone();
        self.run(move |db| {
            let tx = db.conn.transaction()?;
            ensure_session(&tx, &session)?;
            let tokens = tx
                .prepare_cached(
                    "SELECT COALESCE(SUM(input_tokens), 0), COALESCE(SUM(output_tokens), 0),
                        COALESCE(SUM(cached_input_tokens), 0)
                 FROM model_usage WHERE session_id = ?1",
                )?
                .query_row(params![session.as_str()], |r| {
                    Ok([
                        r.get::<_, i64>(0)?,
                        r.get::<_, i64>(1)?,
                        r.get::<_, i64>(2)?,
                    ])
                })?;
            usage_from(tokens, &format!("usage total of session {session}"))
        })
        .await
    }
}

fn usage_from([input, output, cached]: [i64; 3], what: &str) -> Result<Usage, StoreError> {
    Ok(Usage {
        input_tokens: from_sql_int(input, &format!("{what}: input tokens"))?,
        output_tokens: from_sql_int(output, &format!("{what}: output tokens"))?,
        cached_input_tokens: from_sql_int(cached, &format!("{what}: cached input tokens"))?,
    })
}
