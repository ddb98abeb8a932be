//! What the agent page shows of an agent's mind and desk: its long-term memory (list,
//! search, forget), its `MEMORY.md`, a read-only browser of its workspace, and its spend.
//! The workspace is the agent's to write and so is read as hostile: beneath its root only,
//! never through a link, and no more than a size limit of any file.

use crate::Dash;
use crate::chart::{Chart, Point};
use crate::view::{fragment, money};
use askama::Template;
use axum::extract::{Path, Query, State};
use axum::response::{Html, IntoResponse, Response};
use reef_runtime::RuntimeError;
use reef_store::{AgentRecord, SHARED_NAMESPACE, SearchRequest};
use reef_workspace::{Kind, RelPath, Workspace, WorkspaceError};
use serde::Deserialize;
use std::collections::BTreeMap;

/// Memories listed or found at once.
const MEMORY_SHOWN: usize = 50;
/// The largest file the browser shows, and the most entries of a folder it lists.
pub(crate) const FILE_SHOWN_BYTES: u64 = 256 * 1024;
const ENTRIES_SHOWN: usize = 500;
/// `MEMORY.md` larger than this is not shown.
const NOTES_SHOWN_BYTES: u64 = 64 * 1024;
/// Days the agent's spend chart covers.
const SPEND_DAYS: u64 = 30;

fn own_namespace(agent: &str) -> String {
    format!("agent:{agent}")
}

#[derive(Template)]
#[template(path = "memories.html")]
pub(crate) struct Memories {
    pub agent: String,
    pub query: String,
    pub items: Vec<MemoryRow>,
    pub note: Option<String>,
}

pub(crate) struct MemoryRow {
    pub id: i64,
    pub namespace: String,
    pub text: String,
    pub tags: String,
    pub at: crate::view::Time,
    /// Only the agent's own memories can be forgotten here (shared ones belong to all).
    pub forgettable: bool,
}

impl MemoryRow {
    fn new(
        own: &str,
        id: i64,
        namespace: String,
        text: String,
        tags: &[String],
        created_at: &str,
    ) -> MemoryRow {
        MemoryRow {
            forgettable: namespace == own,
            id,
            namespace,
            text,
            tags: tags.join(", "),
            at: crate::view::Time::parse(created_at),
        }
    }
}

#[derive(Deserialize)]
pub(crate) struct MemorySearch {
    #[serde(default)]
    q: String,
}

/// The agent's memories: the newest, or those matching `query`.
pub(crate) async fn memories(d: &Dash, agent: &str, query: &str) -> Result<String, RuntimeError> {
    let own = own_namespace(agent);
    let namespaces = vec![own.clone(), SHARED_NAMESPACE.to_owned()];
    let (items, note) = if query.trim().is_empty() {
        let items = d
            .runtime
            .store()
            .list_memory(namespaces, MEMORY_SHOWN)
            .await?;
        let rows = items
            .into_iter()
            .map(|m| MemoryRow::new(&own, m.id, m.namespace, m.text, &m.tags, &m.created_at))
            .collect();
        (rows, None)
    } else {
        let found = d
            .runtime
            .memory()
            .search(SearchRequest {
                namespaces,
                text: query.trim().to_owned(),
                tags: Vec::new(),
                since: None,
                limit: MEMORY_SHOWN,
                mode: reef_store::SearchMode::default(),
            })
            .await?;
        let rows = found
            .hits
            .into_iter()
            .map(|h| MemoryRow::new(&own, h.item_id, h.namespace, h.text, &h.tags, &h.created_at))
            .collect();
        (rows, found.note)
    };
    Ok(fragment(&Memories {
        agent: agent.to_owned(),
        query: query.trim().to_owned(),
        items,
        note,
    }))
}

fn answer(result: Result<String, RuntimeError>) -> Response {
    match result {
        Ok(html) => Html(html).into_response(),
        Err(err) => crate::pages::failure(&err),
    }
}

/// `GET /agents/{name}/memory?q=`.
pub(crate) async fn memory(
    State(d): State<Dash>,
    Path(name): Path<String>,
    Query(search): Query<MemorySearch>,
) -> Response {
    let found = async {
        let agent = d.runtime.get_agent(&name).await?;
        memories(&d, &agent.name, &search.q).await
    };
    answer(found.await)
}

/// `POST /agents/{name}/memory/{id}/forget`: forgets one of the agent's own memories;
/// answers with the list as it is now.
pub(crate) async fn forget(
    State(d): State<Dash>,
    Path((name, id)): Path<(String, i64)>,
) -> Response {
    let done = async {
        let agent = d.runtime.get_agent(&name).await?;
        let gone = d
            .runtime
            .store()
            .forget_memory(vec![own_namespace(&agent.name)], id)
            .await?;
        if !gone {
            return Err(RuntimeError::NotFound(format!(
                "{name} has no memory #{id} of its own (it may be forgotten already)"
            )));
        }
        memories(&d, &agent.name, "").await
    };
    answer(done.await)
}

/// What the notes section shows of `MEMORY.md`.
pub(crate) enum Notes {
    Text(String),
    Missing,
    /// Why it is not shown (a link, too large, not text, …).
    Refused(String),
}

/// Reads `MEMORY.md` from the agent's workspace, as the agent's prompt does: beneath the
/// root, a regular file, not through a link.
pub(crate) async fn notes(d: &Dash, agent: &AgentRecord) -> Notes {
    let root = std::path::PathBuf::from(&agent.workspace);
    let hidden = d.runtime.hidden_paths();
    let read = tokio::task::spawn_blocking(move || {
        let ws = Workspace::open(&root)?.with_hidden(&hidden);
        let rel = ws.resolve("MEMORY.md")?;
        ws.read(&rel, NOTES_SHOWN_BYTES)
    })
    .await;
    match read {
        Ok(Ok(bytes)) => match String::from_utf8(bytes) {
            Ok(text) => Notes::Text(text),
            Err(_) => Notes::Refused("it is not UTF-8 text".to_owned()),
        },
        Ok(Err(WorkspaceError::NotFound { .. })) => Notes::Missing,
        Ok(Err(err)) => Notes::Refused(refusal(&err)),
        Err(err) => Notes::Refused(err.to_string()),
    }
}

/// Why a workspace path is not shown, in a person's words.
fn refusal(err: &WorkspaceError) -> String {
    match err {
        WorkspaceError::Symlink { .. } => "it is a symbolic link, which is never followed".into(),
        WorkspaceError::TooLarge { size, .. } => format!("it is {size} bytes, too large to show"),
        WorkspaceError::NotRegular { .. } => "it is not a regular file".into(),
        other => other.to_string(),
    }
}

#[derive(Template)]
#[template(path = "files.html")]
pub(crate) struct Files {
    pub agent: String,
    /// The shown path and its parents, for the breadcrumb (`""` is the root).
    pub trail: Vec<(String, String)>,
    pub shown: Shown,
}

pub(crate) enum Shown {
    Dir {
        entries: Vec<FileRow>,
        more: usize,
    },
    Text {
        text: String,
        size: u64,
    },
    /// A file that is not shown, and why.
    Withheld(String),
}

pub(crate) struct FileRow {
    pub path: String,
    pub name: String,
    pub kind: &'static str,
    pub size: String,
}

#[derive(Deserialize)]
pub(crate) struct FilePath {
    #[serde(default)]
    path: String,
}

/// `GET /agents/{name}/files?path=REL`: a folder's entries or a file's text.
pub(crate) async fn files(
    State(d): State<Dash>,
    Path(name): Path<String>,
    Query(q): Query<FilePath>,
) -> Response {
    let found = async {
        let agent = d.runtime.get_agent(&name).await?;
        Ok(browse(&d, &agent, &q.path).await)
    };
    answer(found.await)
}

/// The browser's view of `path` in `agent`'s workspace.
pub(crate) async fn browse(d: &Dash, agent: &AgentRecord, path: &str) -> String {
    let root = std::path::PathBuf::from(&agent.workspace);
    let hidden = d.runtime.hidden_paths();
    let given = path.trim_matches('/').to_owned();
    let read = tokio::task::spawn_blocking(move || look(&root, &hidden, &given)).await;
    let (path, shown) = match read {
        Ok(Ok(found)) => found,
        Ok(Err(err)) => (path.to_owned(), Shown::Withheld(refusal(&err))),
        Err(err) => (path.to_owned(), Shown::Withheld(err.to_string())),
    };
    // A file's text leaves for the browser: looked at first.
    let shown = match shown {
        Shown::Text { text, size } => {
            match d
                .runtime
                .screen_outgoing(&text, "dashboard", Some(&agent.name))
                .await
            {
                reef_runtime::Outgoing::Send(text) => Shown::Text { text, size },
                reef_runtime::Outgoing::Withheld(why) => Shown::Withheld(why),
            }
        }
        other => other,
    };
    fragment(&Files {
        agent: agent.name.clone(),
        trail: trail(&path),
        shown,
    })
}

/// What the browser shows of `given`; paths the agent's own tools cannot see stay hidden.
fn look(
    root: &std::path::Path,
    hidden: &[std::path::PathBuf],
    given: &str,
) -> Result<(String, Shown), WorkspaceError> {
    let ws = Workspace::open(root)?.with_hidden(hidden);
    let rel = if given.is_empty() {
        RelPath::root()
    } else {
        ws.resolve(given)?
    };
    let meta = ws.metadata(&rel)?;
    let path = rel.display();
    let shown = match meta.kind {
        Kind::Dir => {
            let (first, more) = ws.list_first(&rel, ENTRIES_SHOWN)?;
            let entries = first
                .into_iter()
                .map(|e| FileRow {
                    path: e.path.display(),
                    name: e.name().to_string_lossy().into_owned(),
                    kind: match e.kind {
                        Kind::File => "file",
                        Kind::Dir => "folder",
                        Kind::Symlink => "link",
                        Kind::Other => "special",
                    },
                    size: if e.kind == Kind::File {
                        size(e.len)
                    } else {
                        String::new()
                    },
                })
                .collect();
            Shown::Dir { entries, more }
        }
        Kind::File if meta.len > FILE_SHOWN_BYTES => Shown::Withheld(format!(
            "it is {}, larger than the {} shown here",
            size(meta.len),
            size(FILE_SHOWN_BYTES)
        )),
        Kind::File => {
            let bytes = ws.read(&rel, FILE_SHOWN_BYTES)?;
            match String::from_utf8(bytes) {
                Ok(text) if !text.contains('\0') => Shown::Text {
                    text,
                    size: meta.len,
                },
                _ => Shown::Withheld(format!("it is a binary file of {}", size(meta.len))),
            }
        }
        Kind::Symlink => Shown::Withheld("it is a symbolic link, which is never followed".into()),
        Kind::Other => Shown::Withheld("it is not a regular file".into()),
    };
    Ok((path, shown))
}

/// `a/b/c` as `[("", "workspace"), ("a", "a"), ("a/b", "b"), ("a/b/c", "c")]`.
fn trail(path: &str) -> Vec<(String, String)> {
    let mut out = vec![(String::new(), "workspace".to_owned())];
    let mut at = String::new();
    for part in path.split('/').filter(|p| !p.is_empty() && *p != ".") {
        if !at.is_empty() {
            at.push('/');
        }
        at.push_str(part);
        out.push((at.clone(), part.to_owned()));
    }
    out
}

/// "812 B", "4.2 KiB", "3.1 MiB".
pub(crate) fn size(bytes: u64) -> String {
    match bytes {
        ..1024 => format!("{bytes} B"),
        1024..1_048_576 => format!("{:.1} KiB", bytes as f64 / 1024.0),
        _ => format!("{:.1} MiB", bytes as f64 / 1_048_576.0),
    }
}

#[derive(Template)]
#[template(path = "spend.html")]
pub(crate) struct Spend {
    pub tokens: u64,
    pub token_limit: Option<u64>,
    pub cost: String,
    pub cost_limit: Option<String>,
    pub chart: String,
}

/// The agent's budget use and its cost per day over the last [`SPEND_DAYS`].
pub(crate) async fn spend(d: &Dash, agent: &AgentRecord) -> Result<String, RuntimeError> {
    let store = d.runtime.store();
    let (usage, cost) = store.agent_usage(&agent.id).await?;
    let since = reef_store::timestamp_ago(std::time::Duration::from_secs(SPEND_DAYS * 86_400));
    let daily = store.daily_cost(Some(&agent.name), Some(&since)).await?;
    let today = chrono::Utc::now().date_naive();
    let mut days: BTreeMap<String, u64> = (today - chrono::Days::new(SPEND_DAYS - 1))
        .iter_days()
        .take_while(|d| *d <= today)
        .map(|d| (d.format("%Y-%m-%d").to_string(), 0))
        .collect();
    for day in &daily {
        if let Some(sum) = days.get_mut(&day.day) {
            *sum += day.row.cost_micros;
        }
    }
    let points: Vec<Point> = days
        .into_iter()
        .map(|(label, value)| Point {
            label,
            value,
            shown: money(value),
        })
        .collect();
    let chart = if daily.is_empty() {
        String::new()
    } else {
        fragment(&Chart::columns(
            format!("{}'s cost per day, last {SPEND_DAYS} days", agent.name),
            &points,
            7,
        ))
    };
    Ok(fragment(&Spend {
        tokens: usage.input_tokens + usage.output_tokens,
        token_limit: agent.budget.tokens,
        cost: money(cost),
        cost_limit: agent.budget.cost_micros.map(money),
        chart,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_breadcrumb_names_each_parent() {
        assert_eq!(
            trail("a/b"),
            [
                (String::new(), "workspace".to_owned()),
                ("a".to_owned(), "a".to_owned()),
                ("a/b".to_owned(), "b".to_owned())
            ]
        );
        assert_eq!(trail("").len(), 1);
        assert_eq!(size(2048), "2.0 KiB");
    }
}
