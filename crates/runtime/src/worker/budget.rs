//! What an agent may still spend over its life, read before every turn.

use crate::error::RuntimeError;
use crate::kernel::Runtime;
use reef_store::AgentRecord;

/// What the agent may still spend over its life: tokens and millionths of a US dollar;
/// `None` where its budget has no such limit.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Remaining {
    pub tokens: Option<u64>,
    pub cost_micros: Option<u64>,
    used_tokens: u64,
    used_micros: u64,
}

impl Remaining {
    /// Which budget is spent, with the reason to record.
    pub fn exhausted(&self, record: &AgentRecord) -> Option<(&'static str, String)> {
        if self.tokens == Some(0) {
            return Some((
                "tokens",
                format!(
                    "token budget exhausted ({} of {} tokens used)",
                    self.used_tokens,
                    record.budget.tokens.unwrap_or(0)
                ),
            ));
        }
        if self.cost_micros == Some(0) {
            return Some((
                "cost_micros",
                format!(
                    "cost budget exhausted (${:.6} of ${:.6} spent)",
                    self.used_micros as f64 / 1e6,
                    record.budget.cost_micros.unwrap_or(0) as f64 / 1e6
                ),
            ));
        }
        None
    }
}

/// Reads the agent's usage so far against its budget.
pub(super) async fn remaining(
    rt: &Runtime,
    record: &AgentRecord,
) -> Result<Remaining, RuntimeError> {
    if record.budget.tokens.is_none() && record.budget.cost_micros.is_none() {
        return Ok(Remaining::default());
    }
    let (used, used_micros) = rt.store().agent_usage(&record.id).await?;
    let used_tokens = used.input_tokens + used.output_tokens;
    Ok(Remaining {
        tokens: record.budget.tokens.map(|l| l.saturating_sub(used_tokens)),
        cost_micros: record
            .budget
            .cost_micros
            .map(|l| l.saturating_sub(used_micros)),
        used_tokens,
        used_micros,
    })
}
