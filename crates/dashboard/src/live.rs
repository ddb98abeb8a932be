//! The pages' live streams: SSE events whose data is HTML fragments, named for the part of
//! the page they replace or extend (`agents`, `pending`, `status`, `entry`, `delta`, …).
//! The overview gets whole fragments again when what they show changes; the agent page gets
//! its conversation entry by entry, from the event history after the seq the page was
//! rendered at (or the `Last-Event-ID` a reconnecting browser sends), so nothing falls
//! between page and stream.

use crate::Dash;
use crate::auth::Session;
use crate::costs::Range;
use crate::events::Search;
use crate::pages::{agent_head, agents_table, pending_list, status_line};
use crate::view::{Entry, Time, answer_entry, call_entry, escape, fragment, result_entry};
use axum::Extension;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::Stream;
use reef_core::AgentId;
use reef_runtime::{Activity, ActivityChange, RuntimeError};
use reef_store::{EventFilter, StoredEvent};
use serde::Deserialize;
use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use tokio::sync::broadcast::Receiver;
use tokio::sync::broadcast::error::{RecvError, TryRecvError};

/// Events read from the history per step when catching up.
const HISTORY_PAGE: usize = 200;

/// What changed, so the fragments showing it are sent again.
#[derive(Default)]
struct Dirty {
    agents: bool,
    pending: bool,
    status: bool,
    head: bool,
    costs: bool,
    /// Routines and jobs.
    health: bool,
}

impl Dirty {
    fn any(&self) -> bool {
        self.agents || self.pending || self.status || self.head || self.costs || self.health
    }

    fn note(&mut self, kind: &str) {
        let under = |p: &str| kind.starts_with(p);
        if under("agent.")
            || under("turn.")
            || under("tool.")
            || under("model.")
            || under("budget.")
        {
            self.agents = true;
            self.head = true;
        }
        if under("question.") || under("approval.") {
            self.pending = true;
        }
        if under("agent.") || under("channel.") || under("message.") || under("turn.") {
            self.status = true;
        }
        if kind == "model.usage" {
            self.costs = true;
        }
        // A job starts and ends with the turn that does its work.
        if under("routine.") || under("job.") || under("turn.") {
            self.health = true;
        }
    }
}

/// Which page a stream keeps live.
enum View {
    Overview,
    Agent(AgentId),
    Costs(Range),
    /// The events matching a search, and agents' names for their rows.
    Events(EventFilter, HashMap<AgentId, String>),
}

/// One live stream's state.
struct Feed {
    d: Dash,
    view: View,
    events: Receiver<StoredEvent>,
    activity: Receiver<Activity>,
    stopping: tokio::sync::watch::Receiver<bool>,
    /// The last event seq sent (or skipped).
    after: u64,
    out: VecDeque<Event>,
    dirty: Dirty,
    /// The session that opened the stream: it ends with it (logout, expiry).
    session: Session,
    /// What each fragment was last sent as (an unchanged one is not sent again, so a
    /// half-typed answer survives other agents' events).
    sent: HashMap<&'static str, String>,
}

/// `GET /live`: the overview's fragments, sent again when they change.
pub(crate) async fn overview(
    State(d): State<Dash>,
    Extension(session): Extension<Session>,
) -> Response {
    let after = match d.runtime.store().last_event_seq().await {
        Ok(seq) => seq,
        Err(err) => return crate::pages::failure(&err.into()),
    };
    // Everything once at the start: what changed between the page and this stream.
    let dirty = Dirty {
        agents: true,
        pending: true,
        status: true,
        health: true,
        ..Dirty::default()
    };
    stream(feed(d, session, View::Overview, after, dirty))
}

/// `GET /costs/live?days=N`: the costs view again after each model request.
pub(crate) async fn costs(
    State(d): State<Dash>,
    Extension(session): Extension<Session>,
    range: Range,
) -> Response {
    let after = match d.runtime.store().last_event_seq().await {
        Ok(seq) => seq,
        Err(err) => return crate::pages::failure(&err.into()),
    };
    let dirty = Dirty {
        costs: true,
        ..Dirty::default()
    };
    stream(feed(d, session, View::Costs(range), after, dirty))
}

/// `GET /events/live?after=SEQ&kind=…`: events matching a search as they happen.
pub(crate) async fn events(
    State(d): State<Dash>,
    Extension(session): Extension<Session>,
    Query(q): Query<After>,
    Query(search): Query<Search>,
    headers: HeaderMap,
) -> Response {
    let filter = match search.filter(&d).await {
        Ok(filter) => filter,
        Err(error) => return crate::events::refused(error),
    };
    let after = match start(&d, &headers, q.after).await {
        Ok(after) => after,
        Err(err) => return crate::pages::failure(&err),
    };
    let names = crate::events::names(&d).await;
    let view = View::Events(filter, names);
    stream(feed(d, session, view, after, Dirty::default()))
}

/// Where a stream starts: the `Last-Event-ID` a reconnecting browser sends, the page's
/// `after`, or now.
async fn start(d: &Dash, headers: &HeaderMap, after: Option<u64>) -> Result<u64, RuntimeError> {
    let resume = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    match resume.or(after) {
        Some(after) => Ok(after),
        None => Ok(d.runtime.store().last_event_seq().await?),
    }
}

#[derive(Deserialize)]
pub(crate) struct After {
    after: Option<u64>,
}

/// `GET /agents/{name}/live?after=SEQ`: the agent's conversation as it happens.
pub(crate) async fn agent(
    State(d): State<Dash>,
    Extension(session): Extension<Session>,
    Path(name): Path<String>,
    Query(q): Query<After>,
    headers: HeaderMap,
) -> Response {
    let agent = match d.runtime.get_agent(&name).await {
        Ok(agent) => agent,
        Err(err) => return crate::pages::failure(&err),
    };
    let after = match start(&d, &headers, q.after).await {
        Ok(after) => after,
        Err(err) => return crate::pages::failure(&err),
    };
    let dirty = Dirty {
        head: true,
        pending: true,
        ..Dirty::default()
    };
    stream(feed(d, session, View::Agent(agent.id), after, dirty))
}

fn feed(d: Dash, session: Session, view: View, after: u64, dirty: Dirty) -> Feed {
    // Subscribe before reading the history, so nothing falls between the two.
    Feed {
        events: d.runtime.bus().subscribe(),
        activity: d.runtime.watch_activity(),
        stopping: d.runtime.stopping(),
        d,
        view,
        after,
        out: VecDeque::new(),
        dirty,
        session,
        sent: HashMap::new(),
    }
}

fn stream(feed: Feed) -> Response {
    let events = futures::stream::unfold(feed, |mut f| async move {
        loop {
            if let Some(event) = f.out.pop_front() {
                return Some((Ok::<_, Infallible>(event), f));
            }
            if f.dirty.any() {
                if let Err(err) = f.render().await {
                    tracing::warn!(error = %err, "a dashboard stream cannot render");
                    return None;
                }
                continue;
            }
            if !f.step().await {
                return None;
            }
        }
    });
    sse(events)
}

fn sse(events: impl Stream<Item = Result<Event, Infallible>> + Send + 'static) -> Response {
    Sse::new(events)
        .keep_alive(KeepAlive::default())
        .into_response()
}

impl Feed {
    /// Waits for something new; `false` when the stream should end.
    async fn step(&mut self) -> bool {
        // The history first (also after falling behind the live buffer).
        match self
            .d
            .runtime
            .store()
            .events_after(self.after, self.agent(), HISTORY_PAGE)
            .await
        {
            Ok(page) if !page.is_empty() => {
                for event in page {
                    self.take(&event);
                }
                return true;
            }
            Ok(_) => {}
            Err(err) => {
                tracing::warn!(error = %err, "a dashboard stream cannot read the history");
                return false;
            }
        }
        if *self.stopping.borrow() || self.d.logins.session(&self.session.id).is_none() {
            return false;
        }
        let expiry = tokio::time::Instant::from_std(self.session.expires);
        tokio::select! {
            received = self.events.recv() => match received {
                Ok(event) if event.seq > self.after && self.mine(event.agent_id.as_ref()) => {
                    self.take(&event);
                }
                Ok(_) | Err(RecvError::Lagged(_)) => {}
                Err(RecvError::Closed) => return false,
            },
            received = self.activity.recv() => match received {
                Ok(activity) => self.act(activity),
                Err(RecvError::Lagged(_)) => {}
                Err(RecvError::Closed) => return false,
            },
            _ = self.stopping.changed() => return false,
            // The session ended while nothing happened.
            () = tokio::time::sleep_until(expiry) => return false,
        }
        // Take whatever else is ready at once, so a burst renders once.
        loop {
            match self.activity.try_recv() {
                Ok(activity) => self.act(activity),
                Err(TryRecvError::Lagged(_)) => {}
                Err(_) => break,
            }
        }
        true
    }

    /// The agent page's agent.
    fn agent(&self) -> Option<&AgentId> {
        match &self.view {
            View::Agent(id) => Some(id),
            View::Overview | View::Costs(_) | View::Events(..) => None,
        }
    }

    fn mine(&self, agent: Option<&AgentId>) -> bool {
        self.agent().is_none_or(|mine| Some(mine) == agent)
    }

    /// An event from the history.
    fn take(&mut self, event: &StoredEvent) {
        self.after = self.after.max(event.seq);
        if !self.mine(event.agent_id.as_ref()) {
            return;
        }
        self.dirty.note(&event.kind);
        if let View::Events(filter, names) = &mut self.view {
            if let (Some(id), "agent.spawned", Some(name)) = (
                &event.agent_id,
                event.kind.as_str(),
                event.data["name"].as_str(),
            ) {
                names.insert(id.clone(), name.to_owned());
            }
            if crate::events::matches(filter, event) {
                let html = crate::events::rows_html(std::slice::from_ref(event), names);
                self.out
                    .push_back(html_event("event", &html).id(event.seq.to_string()));
            }
            return;
        }
        if self.agent().is_none() {
            return;
        }
        if event.kind == "agent.message" {
            self.out.push_back(reset());
        }
        if let Some(entry) = entry(event) {
            let html = fragment(&crate::view::Entries {
                agent: String::new(),
                entries: vec![entry],
                older: None,
            });
            self.out
                .push_back(html_event("entry", &html).id(event.seq.to_string()));
        }
    }

    /// A change of activity.
    fn act(&mut self, activity: Activity) {
        if !self.mine(Some(&activity.agent)) {
            return;
        }
        match activity.change {
            ActivityChange::Doing(_) => {
                self.dirty.agents = true;
                self.dirty.head = true;
            }
            ActivityChange::Text(text) if self.agent().is_some() => {
                self.out.push_back(html_event("delta", &escape(&text)));
            }
            ActivityChange::TextDiscarded if self.agent().is_some() => {
                self.out.push_back(reset());
            }
            ActivityChange::Text(_) | ActivityChange::TextDiscarded => {}
        }
    }

    /// Sends the changed fragments again.
    async fn render(&mut self) -> Result<(), RuntimeError> {
        let dirty = std::mem::take(&mut self.dirty);
        let d = self.d.clone();
        match &self.view {
            View::Overview => {
                if dirty.agents {
                    self.send("agents", agents_table(&d).await?);
                }
                if dirty.pending {
                    self.send("pending", pending_list(&d, None).await?);
                }
                if dirty.status {
                    self.send("status", status_line(&d).await?);
                }
                if dirty.health {
                    self.send("health", crate::health::health(&d).await?);
                }
            }
            View::Costs(range) => {
                if dirty.costs {
                    let range = *range;
                    self.send("costs", crate::costs::body(&d, range).await?);
                }
            }
            View::Events(..) => {}
            View::Agent(id) => {
                let id = id.clone();
                if dirty.head {
                    let html = match d.runtime.store().get_agent(&id).await? {
                        Some(agent) => agent_head(&d, &agent).await?,
                        None => {
                            "<p class=\"notice error\">This agent was destroyed.</p>".to_owned()
                        }
                    };
                    self.send("head", html);
                }
                if dirty.pending {
                    self.send("pending", pending_list(&d, Some(&id)).await?);
                }
                if dirty.costs
                    && let Some(agent) = d.runtime.store().get_agent(&id).await?
                {
                    self.send("spend", crate::inspect::spend(&d, &agent).await?);
                }
            }
        }
        Ok(())
    }

    /// Queues fragment `name` unless it is what was sent last.
    fn send(&mut self, name: &'static str, html: String) {
        if self.sent.get(name) == Some(&html) {
            return;
        }
        self.out.push_back(html_event(name, &html));
        self.sent.insert(name, html);
    }
}

/// An SSE event carrying HTML. A lone `\r` would start a new data line, so line ends are
/// made `\n` first: the page shows what a reload would.
fn html_event(name: &str, html: &str) -> Event {
    let html = html.replace("\r\n", "\n").replace('\r', "\n");
    Event::default().event(name).data(html)
}

/// Empties the streamed text. An event without data is never delivered, so it carries a
/// comment (the element still counts as empty).
fn reset() -> Event {
    html_event("stream-reset", "<!---->")
}

/// The conversation entry an agent's event adds, if any.
fn entry(event: &StoredEvent) -> Option<Entry> {
    let at = Some(Time::parse(&event.created_at));
    let text = |name: &str| event.data[name].as_str().unwrap_or_default().to_owned();
    let seq_key = format!("event-{}", event.seq);
    Some(match event.kind.as_str() {
        "message.delivered" => Entry::new(
            crate::view::inbox_key(event.data["inbox_id"].as_u64().unwrap_or_default()),
            "user",
            format!("message from {}", text("from")),
            &text("body"),
            at,
        ),
        "agent.message" if !text("text").trim().is_empty() => answer_entry(&text("text"), at),
        "tool.call" => call_entry(&text("call_id"), &text("name"), &text("arguments"), at),
        "tool.result" => result_entry(
            &text("call_id"),
            &text("name"),
            &text("output"),
            event.data["is_error"].as_bool().unwrap_or(false),
            at,
        ),
        "agent.error" => Entry::new(seq_key, "note", "error", &text("message"), at),
        "agent.warning" => Entry::new(seq_key, "note", "warning", &text("message"), at),
        "turn.ended" => {
            let outcome = &event.data["outcome"];
            match outcome["status"].as_str() {
                Some("completed") | None => return None,
                Some(status) => Entry::new(
                    seq_key,
                    "note",
                    "turn ended",
                    &format!("the turn ended: {}", status.replace('_', " ")),
                    at,
                ),
            }
        }
        _ => return None,
    })
}
