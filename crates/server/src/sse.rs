//! The live event stream (SSE): history after `?after=` (or the `Last-Event-ID` a
//! reconnecting client sends) first, then live events, each with its `seq` as the SSE id, so
//! a client that reconnects misses nothing. A client too slow for the live buffer is caught
//! up from the history instead of losing events.

use crate::AppState;
use crate::auth::Grant;
use crate::dto::EventView;
use crate::error::ApiError;
use crate::extract::Params;
use crate::handlers::EventsQuery;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures::Stream;
use reef_runtime::EventFilter;
use reef_store::StoredEvent;
use std::collections::VecDeque;
use std::convert::Infallible;
use tokio::sync::broadcast::error::RecvError;

/// The filter for `?agent=NAME&kind=a.,b.`.
pub(crate) async fn filter(
    s: &AppState,
    agent: Option<&str>,
    kind: Option<&str>,
) -> Result<EventFilter, ApiError> {
    let agent = match agent {
        Some(name) => Some(s.runtime.get_agent(name).await?.id),
        None => None,
    };
    let kinds = kind
        .map(|k| {
            k.split(',')
                .map(str::trim)
                .filter(|k| !k.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    Ok(EventFilter { agent, kinds })
}

struct Cursor {
    s: AppState,
    filter: EventFilter,
    live: tokio::sync::broadcast::Receiver<StoredEvent>,
    stopping: tokio::sync::watch::Receiver<bool>,
    after: u64,
    queue: VecDeque<StoredEvent>,
}

pub async fn stream(
    State(s): State<AppState>,
    grant: Grant,
    headers: HeaderMap,
    Params(q): Params<EventsQuery>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let agent = grant.narrow_agent(q.agent.as_deref())?;
    let filter = filter(&s, agent.as_deref(), q.kind.as_deref()).await?;
    let resume = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    // Subscribe before reading the history, so nothing falls between the two.
    let live = s.runtime.bus().subscribe();
    let after = match resume.or(q.after) {
        Some(after) => after,
        None => s.runtime.store().last_event_seq().await?,
    };
    let stopping = s.runtime.stopping();
    let cursor = Cursor {
        s,
        filter,
        live,
        stopping,
        after,
        queue: VecDeque::new(),
    };
    let stream = futures::stream::unfold(cursor, |mut c| async move {
        loop {
            if let Some(event) = c.queue.pop_front() {
                c.after = event.seq;
                if !c.filter.matches(&event) {
                    continue;
                }
                let view = EventView::from(event);
                let sse = Event::default()
                    .id(view.seq.to_string())
                    .event(view.kind.clone())
                    .json_data(&view)
                    .unwrap_or_else(|_| Event::default().comment("unencodable event"));
                return Some((Ok(sse), c));
            }
            // Catch up from the history first (also after falling behind the live buffer).
            match c.s.runtime.store().events_after(c.after, None, 500).await {
                Ok(page) if !page.is_empty() => {
                    c.queue.extend(page);
                    continue;
                }
                Ok(_) => {}
                Err(err) => {
                    tracing::warn!(error = %err, "event stream cannot read the history");
                    return None;
                }
            }
            if *c.stopping.borrow() {
                return None;
            }
            let received = tokio::select! {
                received = c.live.recv() => received,
                // The daemon is shutting down: end the stream so the server can stop.
                _ = c.stopping.changed() => return None,
            };
            match received {
                Ok(event) if event.seq > c.after => c.queue.push_back(event),
                Ok(_) | Err(RecvError::Lagged(_)) => {}
                Err(RecvError::Closed) => return None,
            }
        }
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}
