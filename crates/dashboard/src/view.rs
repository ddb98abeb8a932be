//! The templates and the rows they show, built from the runtime's records. Every value is
//! escaped by the template engine; nothing from an agent, a tool or a name is ever trusted
//! as markup.

use crate::assets::url;
use askama::Template;
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use reef_core::Message;
use reef_runtime::Doing;
use reef_store::{AgentRecord, PendingItem, StoredMessage};

/// Characters of a transcript entry shown before it is folded.
const FOLD_CHARS: usize = 600;
/// Lines of a transcript entry shown before it is folded.
const FOLD_LINES: usize = 12;

/// Renders a template into a response (a failure is logged and answered with 500).
pub(crate) fn page(template: &impl Template) -> Response {
    match template.render() {
        Ok(html) => Html(html).into_response(),
        Err(err) => {
            tracing::error!(error = %err, "cannot render a dashboard page");
            (StatusCode::INTERNAL_SERVER_ERROR, "cannot render this page").into_response()
        }
    }
}

/// Renders a fragment to a string (empty after a logged failure).
pub(crate) fn fragment(template: &impl Template) -> String {
    template.render().unwrap_or_else(|err| {
        tracing::error!(error = %err, "cannot render a dashboard fragment");
        String::new()
    })
}

/// What every signed-in page carries: asset URLs, the CSRF token and the current view.
pub(crate) struct Chrome {
    pub title: String,
    pub csrf: String,
    pub nav: &'static str,
    pub version: &'static str,
}

impl Chrome {
    pub fn new(title: impl Into<String>, csrf: &str, nav: &'static str) -> Chrome {
        Chrome {
            title: title.into(),
            csrf: csrf.to_owned(),
            nav,
            version: env!("CARGO_PKG_VERSION"),
        }
    }

    pub fn asset(&self, name: &str) -> &'static str {
        url(name)
    }
}

#[derive(Template)]
#[template(path = "login.html")]
pub(crate) struct LoginPage {
    pub message: Option<String>,
    /// A one-time link's code: the page shows its button instead of the token form.
    pub link: Option<String>,
}

impl LoginPage {
    pub fn asset(&self, name: &str) -> &'static str {
        url(name)
    }
}

#[derive(Template)]
#[template(path = "overview.html")]
pub(crate) struct OverviewPage {
    pub chrome: Chrome,
    pub agents: String,
    pub pending: String,
    pub status: String,
    pub health: String,
}

use crate::inspect::Notes;

#[derive(Template)]
#[template(path = "agent.html")]
pub(crate) struct AgentPage {
    pub chrome: Chrome,
    pub name: String,
    pub head: String,
    pub transcript: String,
    pub pending: String,
    pub inbox: Vec<InboxRow>,
    pub persona: String,
    pub models: Vec<String>,
    /// The event seq the page was rendered at: the live stream continues from it.
    pub after: u64,
    /// The idempotency key of the send form (a double submit delivers once).
    pub key: String,
    pub spend: String,
    pub memories: String,
    pub notes: crate::inspect::Notes,
    pub files: String,
    pub file_cap: String,
    /// `[dashboard] terminal` is on: the page links to the terminal.
    pub terminal: bool,
}

#[derive(Template)]
#[template(path = "spawn.html")]
pub(crate) struct SpawnPage {
    pub chrome: Chrome,
    pub templates: Vec<(String, String)>,
    pub models: Vec<String>,
}

/// What the spawn form sends.
#[derive(Clone, Debug, Default, serde::Deserialize)]
pub(crate) struct SpawnValues {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub template: String,
    #[serde(default)]
    pub model: String,
    #[serde(default)]
    pub persona: String,
    #[serde(default)]
    pub task: String,
}

/// The agents table on the overview.
#[derive(Template)]
#[template(path = "agents.html")]
pub(crate) struct AgentsTable {
    pub rows: Vec<AgentRow>,
}

/// One agent on the overview.
pub(crate) struct AgentRow {
    pub name: String,
    pub template: String,
    pub model: String,
    pub state: &'static str,
    pub doing: String,
    pub busy: bool,
    pub budget: String,
    pub cost_today: String,
}

/// The agent page's head: state, what it does, model, budget.
#[derive(Template)]
#[template(path = "agent_head.html")]
pub(crate) struct AgentHead {
    pub row: AgentRow,
    pub cost_total: String,
}

/// Questions and approvals waiting for the operator.
#[derive(Template)]
#[template(path = "pending.html")]
pub(crate) struct PendingList {
    pub items: Vec<PendingRow>,
}

pub(crate) struct PendingRow {
    pub id: String,
    pub approval: bool,
    pub agent: String,
    pub text: String,
    pub options: Vec<String>,
    pub command: String,
    pub asked: Time,
}

/// The daemon's status line.
#[derive(Template)]
#[template(path = "status.html")]
pub(crate) struct StatusLine {
    pub uptime: String,
    pub running_turns: usize,
    pub queued: usize,
    pub agents: usize,
    pub channels: Vec<(String, String)>,
    pub version: &'static str,
}

/// Transcript entries, oldest first, with a link to the page before them.
#[derive(Template)]
#[template(path = "entries.html")]
pub(crate) struct Entries {
    pub agent: String,
    pub entries: Vec<Entry>,
    /// The seq to page back from, when older messages exist.
    pub older: Option<u64>,
}

/// One transcript entry.
pub(crate) struct Entry {
    /// The same for an entry read from the transcript and one sent live for the same thing
    /// (the page drops the second).
    pub key: String,
    /// user, assistant, tool-call, tool-result, tool-error, system, note.
    pub kind: &'static str,
    pub title: String,
    pub text: String,
    pub folded: bool,
    pub at: Option<Time>,
}

impl Entry {
    pub fn new(
        key: String,
        kind: &'static str,
        title: impl Into<String>,
        text: &str,
        at: Option<Time>,
    ) -> Entry {
        let folded = text.chars().count() > FOLD_CHARS || text.lines().count() > FOLD_LINES;
        Entry {
            key,
            kind,
            title: title.into(),
            text: text.to_owned(),
            folded,
            at,
        }
    }

    /// The first line of a folded entry.
    pub fn summary(&self) -> String {
        let first = self.text.lines().next().unwrap_or_default();
        let short: String = first.chars().take(120).collect();
        format!("{short} … ({} characters)", self.text.chars().count())
    }
}

/// One inbox message on the agent page.
pub(crate) struct InboxRow {
    pub from: String,
    pub body: String,
    pub at: Time,
}

/// A moment, shown relative ("3 min ago") with the exact time on hover.
#[derive(Clone, Debug)]
pub(crate) struct Time {
    pub iso: String,
    pub exact: String,
    pub relative: String,
}

impl Time {
    /// From milliseconds since the Unix epoch.
    pub fn from_ms(ms: i64) -> Time {
        match chrono::DateTime::from_timestamp_millis(ms) {
            Some(at) => Time::parse(&at.to_rfc3339()),
            None => Time::parse(&ms.to_string()),
        }
    }

    /// From a stored RFC 3339 timestamp (shown as it is when it does not parse).
    pub fn parse(stamp: &str) -> Time {
        match chrono::DateTime::parse_from_rfc3339(stamp) {
            Ok(at) => {
                let at = at.with_timezone(&chrono::Utc);
                let ago = chrono::Utc::now().signed_duration_since(at).num_seconds();
                Time {
                    iso: at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                    exact: at.format("%Y-%m-%d %H:%M:%S UTC").to_string(),
                    relative: relative(ago),
                }
            }
            Err(_) => Time {
                iso: String::new(),
                exact: stamp.to_owned(),
                relative: stamp.to_owned(),
            },
        }
    }
}

/// "just now", "5 min ago", "3 h ago", "2 days ago"; "in 5 min" for a time to come.
pub(crate) fn relative(secs: i64) -> String {
    match secs {
        ..=-45 => format!("in {}", relative(-secs).trim_end_matches(" ago")),
        -44..45 => "just now".to_owned(),
        45..3600 => format!("{} min ago", (secs + 30) / 60),
        3600..86_400 => format!("{} h ago", (secs + 1800) / 3600),
        _ => format!("{} days ago", (secs + 43_200) / 86_400),
    }
}

/// Millionths of a dollar as money.
pub(crate) fn money(micros: u64) -> String {
    format!("${:.4}", micros as f64 / 1e6)
}

/// "2 h 5 min", "3 days 4 h".
pub(crate) fn duration(secs: u64) -> String {
    match secs {
        ..60 => format!("{secs} s"),
        60..3600 => format!("{} min", secs / 60),
        3600..86_400 => format!("{} h {} min", secs / 3600, secs % 3600 / 60),
        _ => format!("{} days {} h", secs / 86_400, secs % 86_400 / 3600),
    }
}

/// An agent's overview row.
pub(crate) fn agent_row(
    agent: &AgentRecord,
    doing: &Doing,
    tokens: u64,
    cost_today: u64,
) -> AgentRow {
    AgentRow {
        name: agent.name.clone(),
        template: agent.template.clone(),
        model: agent.model.clone().unwrap_or_else(|| "default".to_owned()),
        state: agent.state.as_str(),
        doing: doing.describe(),
        busy: *doing != Doing::Idle,
        budget: agent.budget.tokens.map_or_else(
            || "no limit".to_owned(),
            |limit| format!("{tokens} of {limit}"),
        ),
        cost_today: money(cost_today),
    }
}

/// A pending item as a row (questions and approvals; other kinds are not the operator's).
pub(crate) fn pending_row(item: &PendingItem) -> PendingRow {
    let field = |name: &str| {
        item.payload
            .get(name)
            .and_then(|v| v.as_str())
            .unwrap_or_default()
            .to_owned()
    };
    let options = item
        .payload
        .get("options")
        .and_then(|o| o.as_array())
        .map(|o| {
            o.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    PendingRow {
        id: item.id.clone(),
        approval: item.kind == reef_store::PendingKind::Approval,
        agent: field("agent"),
        text: field("question"),
        options,
        command: field("command"),
        asked: Time::parse(&item.created_at),
    }
}

/// The entries of stored transcript messages.
pub(crate) fn entries(messages: &[StoredMessage]) -> Vec<Entry> {
    let mut out = Vec::with_capacity(messages.len());
    for m in messages {
        let at = Some(Time::parse(&m.created_at));
        match &m.message {
            Message::System { .. } => {}
            Message::User { content } => {
                let key = inbox_id(content).map_or_else(|| format!("seq-{}", m.seq), inbox_key);
                out.push(Entry::new(key, "user", "message", content, at));
            }
            Message::Assistant {
                content,
                tool_calls,
            } => {
                if !content.trim().is_empty() {
                    out.push(answer_entry(content, at.clone()));
                }
                for call in tool_calls {
                    out.push(call_entry(
                        call.id.as_str(),
                        &call.name,
                        &call.arguments,
                        at.clone(),
                    ));
                }
            }
            Message::Tool {
                call_id,
                name,
                content,
                is_error,
            } => out.push(result_entry(call_id.as_str(), name, content, *is_error, at)),
        }
    }
    out
}

pub(crate) fn call_entry(call_id: &str, name: &str, arguments: &str, at: Option<Time>) -> Entry {
    Entry::new(format!("call-{call_id}"), "tool-call", name, arguments, at)
}

pub(crate) fn result_entry(
    call_id: &str,
    name: &str,
    output: &str,
    is_error: bool,
    at: Option<Time>,
) -> Entry {
    let (kind, title) = if is_error {
        ("tool-error", format!("{name} failed"))
    } else {
        ("tool-result", format!("{name} result"))
    };
    Entry::new(format!("result-{call_id}"), kind, title, output, at)
}

/// The model's text; keyed by its content (an event and the stored message carry no
/// common id).
pub(crate) fn answer_entry(text: &str, at: Option<Time>) -> Entry {
    let hash = text.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    Entry::new(
        format!("answer-{hash:016x}"),
        "assistant",
        "answer",
        text,
        at,
    )
}

pub(crate) fn inbox_key(id: u64) -> String {
    format!("inbox-{id}")
}

/// The inbox id in a stored user message (`[message #12 from …]`).
fn inbox_id(content: &str) -> Option<u64> {
    let rest = content.strip_prefix("[message #")?;
    let end = rest.find(|c: char| !c.is_ascii_digit())?;
    rest[..end].parse().ok()
}

/// `text` with the characters HTML gives meaning to replaced (for fragments written by
/// hand rather than by a template).
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// `text` for a URL query value.
pub(crate) fn encode(text: &str) -> String {
    let mut out = String::new();
    for b in text.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b':' => {
                out.push(char::from(b));
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}
