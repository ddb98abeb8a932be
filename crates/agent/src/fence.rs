//! The safety layer on tool results from outside the operator's control (`Tool::
//! content_source`: fetched pages, files, MCP and skill results): each reaches the model
//! inside an `<untrusted …>` fence labelled with its source, checked and sanitized or withheld
//! per `[safety.sources]`; a finding is a `safety.*` audit record (the source, the label and
//! the kinds found, not the content).

use crate::session::Session;
use reef_core::{ContentSource, ToolCall};
use reef_security::leak::LeakAction;
use serde_json::{Value, json};

/// What the fence names besides the source: the call's URL or path, else the tool.
pub(crate) fn label(tool: &str, args: &Value) -> String {
    ["url", "path", "uri"]
        .iter()
        .find_map(|k| args.get(*k).and_then(Value::as_str))
        .map_or_else(|| tool.to_owned(), |v| format!("{tool} {v}"))
}

/// `content` as the model may read it.
pub(crate) async fn screen(
    session: &Session,
    call: &ToolCall,
    source: ContentSource,
    label: &str,
    content: String,
) -> String {
    // A fresh id per fence: the content cannot know it, so it cannot close its fence.
    let id = uuid::Uuid::now_v7().simple().to_string();
    let screened = session
        .opts
        .safety
        .screen(source, label, &content, &id[id.len() - 12..]);
    if screened.action == LeakAction::Ignore {
        return screened.text;
    }
    let kind = screened.action.audit_kind("safety");
    let issues: Vec<Value> = screened
        .issues
        .iter()
        .map(|i| json!({"kind": i.kind, "count": i.count}))
        .collect();
    let data = json!({
        "tool": call.name, "call_id": call.id.as_str(), "source": source.as_str(),
        "label": label, "issues": issues,
    });
    if let Err(err) = session
        .store
        .append_audit(&kind, Some(&session.opts.agent), data)
        .await
    {
        tracing::warn!(error = %err, "cannot record a safety finding");
    }
    screened.text
}
