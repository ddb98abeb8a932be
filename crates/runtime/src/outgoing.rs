//! The leak detector on what the daemon sends out of its own accord: replies on channels,
//! answers of the OpenAI-compatible endpoint, workspace files the dashboard shows. Every
//! configured secret readable now and the credential patterns are looked for under
//! `[safety.leaks]`; a finding that is not ignored is an audit record (kinds and secret names,
//! never a value).

use crate::kernel::Runtime;
use reef_security::leak::LeakAction;
use serde_json::json;

/// What may go out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outgoing {
    /// This text (the original, or with credentials replaced by `[redacted KIND]`).
    Send(String),
    /// Nothing: why, in words that name no value.
    Withheld(String),
}

impl Runtime {
    /// The leak detector's verdict on `text`, about to leave through `place` (`irc:libera`,
    /// `openai`, `dashboard`) on behalf of `agent`.
    pub async fn screen_outgoing(&self, text: &str, place: &str, agent: Option<&str>) -> Outgoing {
        let config = self.config();
        let secrets = reef_agent::Secrets::new(config.secrets.clone())
            .with_vault(config.vault.clone())
            .with_leak_policy(config.safety.leaks.clone());
        let review = secrets.review_outgoing(text, None);
        if review.findings.is_empty() {
            return Outgoing::Send(text.to_owned());
        }
        let kind = review.action.audit_kind("leak");
        let mut kinds: Vec<&str> = review.findings.iter().map(|f| f.kind).collect();
        kinds.dedup();
        let names: Vec<&str> = review
            .findings
            .iter()
            .filter_map(|f| f.secret.as_deref())
            .collect();
        let data = json!({"place": place, "kinds": kinds, "secrets": names});
        if let Err(err) = self.store().append_audit(&kind, agent, data).await {
            tracing::error!(error = %err, place, "cannot record a leak finding; withholding");
            return Outgoing::Withheld("it could not be checked and recorded".into());
        }
        match review.action {
            LeakAction::Block => Outgoing::Withheld(format!(
                "it held {} (see `reef audit query --kind leak.`)",
                review.describe()
            )),
            LeakAction::Sanitize => Outgoing::Send(review.sanitize(text)),
            LeakAction::Warn | LeakAction::Ignore => Outgoing::Send(text.to_owned()),
        }
    }
}
