//! The safety layer on what reaches agents from outside the operator's control through the
//! daemon itself: channel messages from people who are not operators and webhook payloads.
//! The text is fenced and labelled with its source, checked, and sanitized or withheld per
//! `[safety.sources]`; a finding is a `safety.*` audit record (source, label, kinds).

use crate::kernel::Runtime;
use reef_core::ContentSource;
use reef_security::leak::LeakAction;
use serde_json::json;

impl Runtime {
    /// `text` from `source` (`label`: `irc:libera bob`, `hook:gh`) as an agent may read it.
    pub async fn fence_incoming(
        &self,
        source: ContentSource,
        label: &str,
        text: &str,
        agent: Option<&str>,
    ) -> String {
        let id = uuid::Uuid::now_v7().simple().to_string();
        let screened =
            self.config()
                .safety
                .sources
                .screen(source, label, text, &id[id.len() - 12..]);
        if screened.action == LeakAction::Ignore {
            return screened.text;
        }
        let kind = screened.action.audit_kind("safety");
        let issues: Vec<serde_json::Value> = screened
            .issues
            .iter()
            .map(|i| json!({"kind": i.kind, "count": i.count}))
            .collect();
        let data = json!({"source": source.as_str(), "label": label, "issues": issues});
        if let Err(err) = self.store().append_audit(&kind, agent, data).await {
            tracing::warn!(error = %err, label, "cannot record a safety finding");
        }
        screened.text
    }
}
