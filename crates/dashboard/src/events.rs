//! The events view: the daemon's history searched by kind, agent and time, newest first,
//! with the live tail added on top while the search is open-ended.

use crate::Dash;
use crate::auth::Session;
use crate::view::{Chrome, Time, fragment, page};
use askama::Template;
use axum::Extension;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use reef_core::AgentId;
use reef_store::{EventFilter, StoredEvent};
use serde::Deserialize;
use std::collections::HashMap;

/// Events per page.
const PAGE: usize = 100;
/// Characters of an event's data shown before it is folded, and kept when unfolded.
const SUMMARY_CHARS: usize = 160;
const FULL_CHARS: usize = 20_000;

/// The search form's fields, as the browser sends them (empty means any).
#[derive(Clone, Debug, Default, Deserialize)]
pub(crate) struct Search {
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub agent: String,
    #[serde(default)]
    pub from: String,
    #[serde(default)]
    pub to: String,
    pub before: Option<u64>,
}

impl Search {
    /// The store filter, or what is wrong with a field (named).
    pub async fn filter(&self, d: &Dash) -> Result<EventFilter, String> {
        let agent = match self.agent.trim() {
            "" => None,
            name => match d.runtime.store().agent_by_name(name).await {
                Ok(Some(agent)) => Some(agent.id),
                Ok(None) => return Err(format!("agent: there is no agent named `{name}`")),
                Err(err) => return Err(format!("agent: {err}")),
            },
        };
        Ok(EventFilter {
            kind: Some(self.kind.trim().to_owned()).filter(|k| !k.is_empty()),
            agent,
            from: stamp("from", &self.from)?,
            until: stamp("to", &self.to)?,
            before: self.before,
        })
    }

    /// Whether new events can match: no end in the past, not an older page.
    pub fn open_ended(&self) -> bool {
        self.to.trim().is_empty() && self.before.is_none()
    }

    /// The query string of this search without its page.
    pub fn query(&self) -> String {
        let pairs = [
            ("kind", &self.kind),
            ("agent", &self.agent),
            ("from", &self.from),
            ("to", &self.to),
        ];
        pairs
            .iter()
            .filter(|(_, v)| !v.trim().is_empty())
            .map(|(k, v)| format!("{k}={}", crate::view::encode(v.trim())))
            .collect::<Vec<_>>()
            .join("&")
    }
}

/// A time from the form (`YYYY-MM-DDTHH:MM[:SS]`, UTC, or RFC 3339) as the store writes it.
fn stamp(field: &str, given: &str) -> Result<Option<String>, String> {
    let given = given.trim();
    if given.is_empty() {
        return Ok(None);
    }
    let at = chrono::DateTime::parse_from_rfc3339(given)
        .map(|t| t.with_timezone(&chrono::Utc))
        .or_else(|_| {
            ["%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M"]
                .iter()
                .find_map(|f| chrono::NaiveDateTime::parse_from_str(given, f).ok())
                .map(|t| t.and_utc())
                .ok_or(())
        })
        .map_err(|()| format!("{field}: `{given}` is not a time (YYYY-MM-DDTHH:MM, UTC)"))?;
    Ok(Some(at.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()))
}

#[derive(Template)]
#[template(path = "events.html")]
pub(crate) struct EventsPage {
    pub chrome: Chrome,
    pub search: Search,
    pub error: Option<String>,
    pub rows: Vec<EventRow>,
    /// The seq to page back from, when there may be older events.
    pub older: Option<u64>,
    /// Where the live tail starts; `None` when the search cannot grow.
    pub live: Option<u64>,
    pub query: String,
}

/// Rows of the events table (also what the live tail sends).
#[derive(Template)]
#[template(path = "event_rows.html")]
pub(crate) struct EventRows {
    pub rows: Vec<EventRow>,
}

pub(crate) struct EventRow {
    pub seq: u64,
    pub at: Time,
    pub kind: String,
    pub agent: String,
    pub summary: String,
    /// The whole data, when the summary is cut.
    pub full: Option<String>,
}

/// Agents' names by id (a destroyed agent shows its id).
pub(crate) async fn names(d: &Dash) -> HashMap<AgentId, String> {
    match d.runtime.list_agents().await {
        Ok(agents) => agents.into_iter().map(|a| (a.id, a.name)).collect(),
        Err(_) => HashMap::new(),
    }
}

pub(crate) fn event_row(event: &StoredEvent, names: &HashMap<AgentId, String>) -> EventRow {
    let compact = event.data.to_string();
    let full = (compact.chars().count() > SUMMARY_CHARS).then(|| {
        serde_json::to_string_pretty(&event.data)
            .unwrap_or_default()
            .chars()
            .take(FULL_CHARS)
            .collect()
    });
    EventRow {
        seq: event.seq,
        at: Time::parse(&event.created_at),
        kind: event.kind.clone(),
        agent: event
            .agent_id
            .as_ref()
            .map(|id| names.get(id).cloned().unwrap_or_else(|| id.to_string()))
            .unwrap_or_default(),
        summary: compact.chars().take(SUMMARY_CHARS).collect(),
        full,
    }
}

/// `GET /events?kind=&agent=&from=&to=&before=`.
pub(crate) async fn events(
    State(d): State<Dash>,
    Extension(session): Extension<Session>,
    Query(search): Query<Search>,
) -> Response {
    let chrome = Chrome::new("Events · reef", &session.csrf, "events");
    let query = search.query();
    let filter = match search.filter(&d).await {
        Ok(filter) => filter,
        Err(error) => {
            let mut answer = page(&EventsPage {
                chrome,
                search,
                error: Some(error),
                rows: Vec::new(),
                older: None,
                live: None,
                query,
            });
            *answer.status_mut() = StatusCode::UNPROCESSABLE_ENTITY;
            return answer;
        }
    };
    let store = d.runtime.store();
    let found = async {
        let last = store.last_event_seq().await?;
        let events = store.search_events(filter, PAGE).await?;
        Ok::<_, reef_store::StoreError>((last, events))
    };
    let (last, events) = match found.await {
        Ok(found) => found,
        Err(err) => return crate::pages::failure(&err.into()),
    };
    // An event written between the two reads is in the results: the tail starts after it.
    let last = events.first().map_or(last, |newest| newest.seq.max(last));
    let names = names(&d).await;
    let older = (events.len() == PAGE)
        .then(|| events.last().map(|e| e.seq))
        .flatten();
    page(&EventsPage {
        chrome,
        live: search.open_ended().then_some(last),
        rows: events.iter().map(|e| event_row(e, &names)).collect(),
        search,
        error: None,
        older,
        query,
    })
}

/// The rows for `events` (newest first), as a fragment.
pub(crate) fn rows_html(events: &[StoredEvent], names: &HashMap<AgentId, String>) -> String {
    fragment(&EventRows {
        rows: events.iter().rev().map(|e| event_row(e, names)).collect(),
    })
}

/// Whether `event` matches `filter` (for the live tail; the store decides for the history).
pub(crate) fn matches(filter: &EventFilter, event: &StoredEvent) -> bool {
    let kind = match filter.kind.as_deref() {
        Some(k) if k.ends_with('.') => event.kind.starts_with(k),
        Some(k) => event.kind == k,
        None => true,
    };
    kind && filter
        .agent
        .as_ref()
        .is_none_or(|a| event.agent_id.as_ref() == Some(a))
        && filter.from.as_ref().is_none_or(|f| event.created_at >= *f)
        && filter.until.as_ref().is_none_or(|u| event.created_at < *u)
}

/// An error as the answer to a stream request.
pub(crate) fn refused(error: String) -> Response {
    (
        StatusCode::UNPROCESSABLE_ENTITY,
        Html(format!(
            r#"<p class="notice error" role="alert">{}</p>"#,
            crate::view::escape(&error)
        )),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn form_times_are_read_as_utc_and_bad_ones_name_their_field() {
        assert_eq!(
            stamp("from", "2026-11-24T10:05").unwrap().as_deref(),
            Some("2026-11-24T10:05:00.000Z")
        );
        assert_eq!(
            stamp("from", "2026-11-24T12:05:00+02:00")
                .unwrap()
                .as_deref(),
            Some("2026-11-24T10:05:00.000Z")
        );
        assert_eq!(stamp("to", " ").unwrap(), None);
        let err = stamp("to", "yesterday").unwrap_err();
        assert!(err.starts_with("to: `yesterday`"), "{err}");
    }

    #[test]
    fn the_live_tail_matches_like_the_store() {
        let event = StoredEvent {
            seq: 7,
            kind: "tool.call".into(),
            agent_id: None,
            data: serde_json::json!({}),
            created_at: "2026-11-24T10:00:00.000Z".into(),
        };
        let with = |kind: &str| EventFilter {
            kind: Some(kind.into()),
            ..Default::default()
        };
        assert!(matches(&with("tool."), &event));
        assert!(matches(&with("tool.call"), &event));
        assert!(!matches(&with("tool"), &event));
        assert!(!matches(&with("turn."), &event));
        let later = EventFilter {
            from: Some("2026-11-24T10:00:00.001Z".into()),
            ..Default::default()
        };
        assert!(!matches(&later, &event));
        let agent = EventFilter {
            agent: Some(AgentId::new()),
            ..Default::default()
        };
        assert!(!matches(&agent, &event));
    }

    #[test]
    fn the_query_string_keeps_what_was_searched() {
        let search = Search {
            kind: "tool.".into(),
            agent: "a b&c".into(),
            ..Default::default()
        };
        assert_eq!(search.query(), "kind=tool.&agent=a%20b%26c");
    }
}
