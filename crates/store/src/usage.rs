//! Per-model-request token usage: recording, listing and totalling per session.

use crate::error::StoreError;
use crate::records::{CostRow, DailyCost, NewUsage, UsageRecord};
use crate::sql::params;
use crate::store::{Store, ensure_session, from_sql_int, to_sql_int};
use reef_core::{SessionId, Usage};

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
                    cached_input_tokens, created_at, cost_micros)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
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
                record.cost_micros.map(to_sql_int),
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
                        created_at, cost_micros
                 FROM model_usage WHERE session_id = ?1 ORDER BY id",
            )?;
            let rows = stmt.query_map(params![session.as_str()], |r| {
                Ok((
                    r.get::<String>(0)?,
                    r.get::<String>(1)?,
                    [r.get::<i64>(2)?, r.get::<i64>(3)?, r.get::<i64>(4)?],
                    r.get::<i64>(5)?,
                    r.get::<String>(6)?,
                    r.get::<Option<i64>>(7)?,
                ))
            })?;
            let mut out = Vec::new();
            for row in rows {
                let (provider, model, tokens, round, created_at, cost) = row?;
                let what = format!("usage of session {session}");
                out.push(UsageRecord {
                    provider,
                    model,
                    usage: usage_from(tokens, &what)?,
                    round: u32::try_from(round).map_err(|_| {
                        StoreError::Corrupt(format!("{what}: round {round} out of range"))
                    })?,
                    cost_micros: cost.map(|c| from_sql_int(c, "cost")).transpose()?,
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
                    Ok([r.get::<i64>(0)?, r.get::<i64>(1)?, r.get::<i64>(2)?])
                })?;
            usage_from(tokens, &format!("usage total of session {session}"))
        })
        .await
    }
}

impl Store {
    /// Tokens and cost per agent, provider and model, for requests made at or after `since`
    /// (an RFC3339 timestamp) and, when given, only by agent `agent`'s session.
    pub async fn cost_report(
        &self,
        agent: Option<&str>,
        since: Option<&str>,
    ) -> Result<Vec<CostRow>, StoreError> {
        let rows = self.cost_rows(agent, since, false).await?;
        Ok(rows.into_iter().map(|day| day.row).collect())
    }

    /// The cost report split by UTC day (`YYYY-MM-DD`), oldest day first: what charts draw.
    pub async fn daily_cost(
        &self,
        agent: Option<&str>,
        since: Option<&str>,
    ) -> Result<Vec<DailyCost>, StoreError> {
        self.cost_rows(agent, since, true).await
    }

    async fn cost_rows(
        &self,
        agent: Option<&str>,
        since: Option<&str>,
        by_day: bool,
    ) -> Result<Vec<DailyCost>, StoreError> {
        let (agent, since) = (agent.map(str::to_owned), since.map(str::to_owned));
        self.run(move |db| {
            // The day is a constant when not split, so one statement serves both.
            let mut stmt = db.conn.prepare_cached(
                "SELECT a.name, u.provider, u.model, COUNT(*),
                        SUM(u.input_tokens), SUM(u.output_tokens), SUM(u.cached_input_tokens),
                        COALESCE(SUM(u.cost_micros), 0),
                        SUM(CASE WHEN u.cost_micros IS NULL THEN 1 ELSE 0 END),
                        CASE WHEN ?3 THEN substr(u.created_at, 1, 10) ELSE '' END AS day
                 FROM model_usage u LEFT JOIN agents a ON a.session_id = u.session_id
                 WHERE (CAST(?1 AS TEXT) IS NULL OR a.name = ?1) AND (CAST(?2 AS TEXT) IS NULL OR u.created_at >= ?2)
                 GROUP BY day, a.name, u.provider, u.model
                 ORDER BY day, a.name, u.provider, u.model",
            )?;
            let rows = stmt.query_map(params![agent, since, by_day], |r| {
                Ok((
                    r.get::<Option<String>>(0)?,
                    r.get::<String>(1)?,
                    r.get::<String>(2)?,
                    [
                        r.get::<i64>(3)?,
                        r.get::<i64>(7)?,
                        r.get::<i64>(8)?,
                    ],
                    [
                        r.get::<i64>(4)?,
                        r.get::<i64>(5)?,
                        r.get::<i64>(6)?,
                    ],
                    r.get::<String>(9)?,
                ))
            })?;
            let mut out = Vec::new();
            for row in rows {
                let (agent, provider, model, [requests, cost, unpriced], tokens, day) = row?;
                out.push(DailyCost {
                    day,
                    row: CostRow {
                        usage: usage_from(tokens, "cost report")?,
                        requests: from_sql_int(requests, "request count")?,
                        cost_micros: from_sql_int(cost, "cost")?,
                        unpriced_requests: from_sql_int(unpriced, "unpriced count")?,
                        agent,
                        provider,
                        model,
                    },
                });
            }
            Ok(out)
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
