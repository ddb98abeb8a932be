//! What the runtime writes to the audit log itself: the configuration each start loaded, and
//! rights an agent was refused. (Events the operator must account for reach the log with the
//! event; tool calls and secret uses are recorded by the turn engine and the tools.)

use crate::error::RuntimeError;
use crate::kernel::Runtime;
use reef_store::AgentRecord;

impl Runtime {
    /// Records in the audit log what this daemon was started with: the configuration files,
    /// the digest of the merged settings and of each template, so a change between two starts
    /// shows.
    pub(crate) async fn audit_configuration(&self) -> Result<(), RuntimeError> {
        let config = &self.inner.config;
        let templates: serde_json::Map<String, serde_json::Value> = self
            .inner
            .templates
            .iter()
            .map(|t| {
                let digest = reef_security::audit::sha256_hex(format!("{t:?}").as_bytes());
                (t.name.clone(), serde_json::Value::String(digest))
            })
            .collect();
        let data = serde_json::json!({
            "files": config.files,
            "config_sha256": config.digest,
            "templates": templates,
        });
        self.inner
            .store
            .append_audit("config.loaded", None, data)
            .await?;
        Ok(())
    }

    /// Records in the audit log that `agent` was refused a right (`cap.denied`). The refusal
    /// stands whether or not the record can be written; a failed write is logged.
    pub(crate) async fn audit_denial(&self, agent: &AgentRecord, data: serde_json::Value) {
        if let Err(err) = self
            .inner
            .store
            .append_audit("cap.denied", Some(agent.id.as_str()), data)
            .await
        {
            tracing::warn!(agent = %agent.name, error = %err, "cannot record a denial in the audit log");
        }
    }
}
