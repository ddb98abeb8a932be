//! The leak detector at the one place calls leave: before a call whose arguments go beyond
//! this machine runs (`Tool::egress`), its arguments are reviewed for known secret values and
//! credential patterns under `[safety.leaks]`. A blocked call sends nothing; a sanitized one
//! runs with each credential replaced; every finding that was not ignored is an audit record
//! (the kinds and secret names, never a value).

use crate::session::Session;
use reef_core::{Egress, Tool, ToolCall, ToolOutput};
use reef_security::leak::{LeakAction, Review};
use serde_json::{Value, json};

/// `args` as the call may send them, or the error result when it may not run.
pub(crate) async fn screen(
    session: &Session,
    call: &ToolCall,
    tool: &dyn Tool,
    args: Value,
) -> Result<Value, ToolOutput> {
    let hosts = match tool.egress(&args) {
        Egress::None => return Ok(args),
        Egress::Hosts(hosts) => Some(hosts),
        Egress::Anywhere => None,
    };
    let known = session.tools.secrets();
    let review = known.review_outgoing(&flatten(&args), hosts.as_deref());
    if review.findings.is_empty() {
        return Ok(args);
    }
    let to = match &hosts {
        Some(hosts) => hosts.join(", "),
        None => "wherever the tool sends it".to_owned(),
    };
    let kind = review.action.audit_kind("leak");
    let secrets: Vec<&str> = review
        .findings
        .iter()
        .filter_map(|f| f.secret.as_deref())
        .collect();
    let mut kinds: Vec<&str> = review.findings.iter().map(|f| f.kind).collect();
    kinds.dedup();
    let data = json!({
        "tool": call.name, "call_id": call.id.as_str(), "kinds": kinds,
        "secrets": secrets, "to": hosts,
    });
    if let Err(err) = session
        .store
        .append_audit(&kind, Some(&session.opts.agent), data)
        .await
    {
        return Err(ToolOutput::error(format!(
            "the call's outgoing data could not be recorded in the audit log ({err}); it did \
             not run"
        )));
    }
    let blocked = || {
        Err(ToolOutput::error(format!(
            "blocked: the call would send {} to {to}; nothing was sent. Secrets are used by \
             name, never written into a call.",
            review.describe()
        )))
    };
    match review.action {
        LeakAction::Block => blocked(),
        LeakAction::Sanitize => {
            let clean = sanitize(args, &review);
            // A credential the replacement did not reach (split across fields) is not sent.
            let again = known.review_outgoing(&flatten(&clean), hosts.as_deref());
            if again.action >= LeakAction::Sanitize {
                return blocked();
            }
            Ok(clean)
        }
        LeakAction::Warn | LeakAction::Ignore => Ok(args),
    }
}

/// The arguments as the text that would travel: every key, and every value as itself (not
/// JSON-escaped) after its key, one a line.
fn flatten(args: &Value) -> String {
    fn walk(value: &Value, key: Option<&str>, out: &mut String) {
        let mut leaf = |text: &str| {
            if let Some(key) = key {
                out.push_str(key);
                out.push_str(": ");
            }
            out.push_str(text);
            out.push('\n');
        };
        match value {
            Value::String(s) => leaf(s),
            Value::Number(n) => leaf(&n.to_string()),
            Value::Bool(_) | Value::Null => {}
            Value::Array(items) => items.iter().for_each(|v| walk(v, key, out)),
            Value::Object(map) => {
                for (k, v) in map {
                    out.push_str(k);
                    out.push('\n');
                    walk(v, Some(k), out);
                }
            }
        }
    }
    let mut out = String::new();
    walk(args, None, &mut out);
    out
}

/// `value` with each string in it sanitized.
fn sanitize(value: Value, review: &Review) -> Value {
    match value {
        Value::String(s) => Value::String(review.sanitize(&s)),
        Value::Array(items) => {
            Value::Array(items.into_iter().map(|v| sanitize(v, review)).collect())
        }
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(k, v)| (review.sanitize(&k), sanitize(v, review)))
                .collect(),
        ),
        other => other,
    }
}
