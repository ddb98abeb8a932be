//! The costs view: tokens and money per day, agent and provider as charts, and the table
//! `reef cost --json` prints, from the same store query so the numbers are the same.

use crate::Dash;
use crate::auth::Session;
use crate::chart::{Chart, Point};
use crate::view::{Chrome, fragment, money, page};
use askama::Template;
use axum::Extension;
use axum::extract::FromRequestParts;
use axum::extract::{Query, State};
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use reef_store::{CostRow, DailyCost, StoreError};
use serde::Deserialize;
use std::collections::BTreeMap;

/// Days the per-day charts show at most.
const CHART_DAYS: i64 = 60;

/// The longest range offered, in days.
const MAX_DAYS: u32 = 3650;

/// `?days=N`: only the last N days (all time when absent or empty, as `reef cost` does).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Range {
    pub days: Option<u32>,
}

/// The query as sent (the form sends `days=` for all time).
#[derive(Debug, Default, Deserialize)]
struct RangeQuery {
    #[serde(default)]
    days: String,
}

impl RangeQuery {
    /// The range, or what is wrong with `days`.
    fn range(&self) -> Result<Range, String> {
        let days = self.days.trim();
        if days.is_empty() {
            return Ok(Range { days: None });
        }
        match days.parse::<u32>() {
            Ok(d) if (1..=MAX_DAYS).contains(&d) => Ok(Range { days: Some(d) }),
            _ => Err(format!(
                "days: `{days}` is not a number of days from 1 to {MAX_DAYS}"
            )),
        }
    }
}

/// `Range` as a handler's argument: a bad `days` is a 422 that names it.
impl<S: Send + Sync> FromRequestParts<S> for Range {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let Query(query) = Query::<RangeQuery>::from_request_parts(parts, state)
            .await
            .map_err(IntoResponse::into_response)?;
        query.range().map_err(crate::events::refused)
    }
}

impl Range {
    fn since(self) -> Option<String> {
        self.days.map(|d| {
            reef_store::timestamp_ago(std::time::Duration::from_secs(u64::from(d) * 86_400))
        })
    }
}

#[derive(Template)]
#[template(path = "costs.html")]
pub(crate) struct CostsPage {
    pub chrome: Chrome,
    pub days: Option<u32>,
    pub body: String,
}

impl CostsPage {
    fn choices(&self) -> Vec<(String, &'static str, bool)> {
        [
            (None, "All time"),
            (Some(1), "Last day"),
            (Some(7), "Last 7 days"),
            (Some(30), "Last 30 days"),
        ]
        .into_iter()
        .map(|(d, label)| {
            (
                d.map(|d: u32| d.to_string()).unwrap_or_default(),
                label,
                d == self.days,
            )
        })
        .collect()
    }
}

#[derive(Template)]
#[template(path = "costs_body.html")]
pub(crate) struct CostsBody {
    pub total_micros: u64,
    pub total: String,
    pub requests: u64,
    pub input: u64,
    pub cached: u64,
    pub output: u64,
    pub unpriced: u64,
    pub charts: Vec<(&'static str, String)>,
    pub rows: Vec<CostRow>,
}

impl CostsBody {
    fn agent(row: &CostRow) -> &str {
        row.agent.as_deref().unwrap_or("(cli)")
    }

    fn cost(row: &CostRow) -> String {
        money(row.cost_micros)
    }
}

/// `GET /costs`.
pub(crate) async fn costs(
    State(d): State<Dash>,
    Extension(session): Extension<Session>,
    range: Range,
) -> Response {
    match body(&d, range).await {
        Ok(body) => page(&CostsPage {
            chrome: Chrome::new("Costs · reef", &session.csrf, "costs"),
            days: range.days,
            body,
        }),
        Err(err) => crate::pages::failure(&err.into()),
    }
}

/// The costs view's content for `range`, sent again live when a request is recorded.
pub(crate) async fn body(d: &Dash, range: Range) -> Result<String, StoreError> {
    let since = range.since();
    let store = d.runtime.store();
    let rows = store.cost_report(None, since.as_deref()).await?;
    let daily = store.daily_cost(None, since.as_deref()).await?;
    let sum = |f: fn(&CostRow) -> u64| rows.iter().map(f).sum::<u64>();
    let total_micros = sum(|r| r.cost_micros);
    Ok(fragment(&CostsBody {
        total_micros,
        total: money(total_micros),
        requests: sum(|r| r.requests),
        input: sum(|r| r.usage.input_tokens),
        cached: sum(|r| r.usage.cached_input_tokens),
        output: sum(|r| r.usage.output_tokens),
        unpriced: sum(|r| r.unpriced_requests),
        charts: charts(&rows, &daily, range),
        rows,
    }))
}

fn tokens(row: &CostRow) -> u64 {
    row.usage.input_tokens + row.usage.output_tokens
}

/// Money and tokens per day, agent and provider.
fn charts(rows: &[CostRow], daily: &[DailyCost], range: Range) -> Vec<(&'static str, String)> {
    let by = |key: fn(&CostRow) -> String, value: fn(&CostRow) -> u64, show: fn(u64) -> String| {
        let mut sums: BTreeMap<String, u64> = BTreeMap::new();
        for row in rows {
            *sums.entry(key(row)).or_default() += value(row);
        }
        sums.into_iter()
            .map(|(label, value)| Point {
                shown: show(value),
                label,
                value,
            })
            .collect::<Vec<_>>()
    };
    let agent = |r: &CostRow| r.agent.clone().unwrap_or_else(|| "(cli)".to_owned());
    let provider = |r: &CostRow| r.provider.clone();
    let count = |v: u64| format!("{v} tokens");
    let days = day_span(daily, range);
    let per_day = |caption: &str, value: fn(&CostRow) -> u64, show: fn(u64) -> String| {
        let mut sums: BTreeMap<&str, u64> = days.iter().map(|d| (d.as_str(), 0)).collect();
        for day in daily {
            if let Some(sum) = sums.get_mut(day.day.as_str()) {
                *sum += value(&day.row);
            }
        }
        let points: Vec<Point> = sums
            .into_iter()
            .map(|(day, value)| Point {
                label: day.to_owned(),
                value,
                shown: show(value),
            })
            .collect();
        let every = points.len().div_ceil(4).max(1);
        fragment(&Chart::columns(caption, &points, every))
    };
    let cost = |r: &CostRow| r.cost_micros;
    vec![
        ("Cost per day (UTC)", per_day("Cost per day", cost, money)),
        (
            "Tokens per day (UTC)",
            per_day("Tokens per day", tokens, count),
        ),
        (
            "Cost per agent",
            fragment(&Chart::rows("Cost per agent", by(agent, cost, money))),
        ),
        (
            "Tokens per agent",
            fragment(&Chart::rows("Tokens per agent", by(agent, tokens, count))),
        ),
        (
            "Cost per provider",
            fragment(&Chart::rows("Cost per provider", by(provider, cost, money))),
        ),
        (
            "Tokens per provider",
            fragment(&Chart::rows(
                "Tokens per provider",
                by(provider, tokens, count),
            )),
        ),
    ]
}

/// Every UTC day the per-day charts cover: from the range's start (or the first day with
/// a request) to today, at most [`CHART_DAYS`]; empty when nothing was recorded.
fn day_span(daily: &[DailyCost], range: Range) -> Vec<String> {
    let today = chrono::Utc::now().date_naive();
    let first = match range.days {
        Some(d) => today - chrono::Days::new(u64::from(d)),
        None => match daily
            .first()
            .and_then(|d| d.day.parse::<chrono::NaiveDate>().ok())
        {
            Some(first) => first,
            None => return Vec::new(),
        },
    };
    let first = first.max(today - chrono::Days::new(CHART_DAYS as u64 - 1));
    first
        .iter_days()
        .take_while(|d| *d <= today)
        .map(|d| d.format("%Y-%m-%d").to_string())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(days: &str) -> Result<Option<u32>, String> {
        RangeQuery {
            days: days.to_owned(),
        }
        .range()
        .map(|r| r.days)
    }

    #[test]
    fn an_empty_range_is_all_time_and_a_bad_one_names_days() {
        assert_eq!(range(""), Ok(None), "the form's `All time` sends days=");
        assert_eq!(range("7"), Ok(Some(7)));
        for bad in ["0", "4000000000", "x", "-1"] {
            let err = range(bad).unwrap_err();
            assert!(err.starts_with("days: "), "{err}");
        }
    }
}
