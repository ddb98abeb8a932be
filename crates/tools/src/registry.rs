//! The tool registry: tools by their public name.

use crate::secrets::Secrets;
use reef_core::{Tool, ToolSpec};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Tools an agent may call, keyed by `spec().name`, and the secrets their calls may use.
#[derive(Clone, Default)]
pub struct ToolRegistry {
    tools: BTreeMap<String, Arc<dyn Tool>>,
    secrets: Arc<Secrets>,
}

impl ToolRegistry {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a tool under its spec name, replacing any tool already registered under it.
    pub fn register(&mut self, tool: Arc<dyn Tool>) {
        let name = tool.spec().name;
        if self.tools.insert(name.clone(), tool).is_some() {
            tracing::debug!(tool = %name, "replaced a registered tool");
        }
    }

    /// Uses `secrets` for redaction (the tools that inject them hold the same `Arc`).
    pub fn set_secrets(&mut self, secrets: Arc<Secrets>) {
        self.secrets = secrets;
    }

    /// The secrets the registry's tools use, for tools added beside it (skills) that put
    /// secrets into what they do: values they read are then redacted and remembered the same way.
    pub fn secrets(&self) -> Arc<Secrets> {
        self.secrets.clone()
    }

    /// A tool output with every secret value any call has used replaced by `[secret NAME]`.
    /// The agent applies this to every tool result before the model or the store sees it.
    pub fn redact(&self, output: &str) -> String {
        self.secrets.redact(output)
    }

    /// Keeps the fingerprints of secret values `agent`'s calls use in `store`, and redacts the
    /// values behind those its earlier sessions left there.
    pub async fn attach_secrets(
        &self,
        store: reef_store::Store,
        agent: &str,
    ) -> Result<(), reef_store::StoreError> {
        self.secrets.attach(store, agent).await
    }

    /// Keeps only the tools whose name `keep` accepts (an agent's capabilities).
    pub fn retain(&mut self, keep: impl Fn(&str) -> bool) {
        self.tools.retain(|name, _| keep(name));
    }

    pub fn get(&self, name: &str) -> Option<Arc<dyn Tool>> {
        self.tools.get(name).cloned()
    }

    /// Every tool's spec, sorted by name.
    pub fn specs(&self) -> Vec<ToolSpec> {
        self.tools.values().map(|t| t.spec()).collect()
    }

    /// Every tool name, sorted.
    pub fn names(&self) -> Vec<String> {
        self.tools.keys().cloned().collect()
    }

    pub fn len(&self) -> usize {
        self.tools.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }
}

impl std::fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolRegistry")
            .field("tools", &self.names())
            .finish()
    }
}
