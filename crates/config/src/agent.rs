//! `[agent]`: budgets and behaviour of the turn engine, including when and how a session
//! compacts its history to stay inside the model's context window.

use crate::error::ConfigError;
use crate::raw::AgentToml;
use crate::resolve::ProviderConfig;
use reef_core::{AgentProfile, CompactionStrategy};
use std::collections::BTreeMap;

/// The fewest context tokens one kept turn is assumed to need: `keep_recent_turns` turns must
/// fit every configured provider's window at this size.
pub(crate) const TOKENS_PER_KEPT_TURN: u64 = 64;

/// Budgets and behaviour of the turn engine.
#[derive(Clone, Debug)]
pub struct AgentConfig {
    pub max_rounds: u32,
    pub max_wall_secs: u64,
    /// Tool outputs longer than this are saved to the workspace and previewed.
    pub inline_output_chars: usize,
    /// The same tool call (name and arguments) this many times in one turn stops the turn;
    /// 0 turns loop detection off.
    pub loop_limit: u32,
    pub system_prompt: Option<String>,
    /// `agent.compact_at`: the history is compacted before a request that would fill more than
    /// this fraction of the model's context window (in (0, 1], default 0.75).
    pub compact_at: f64,
    /// `agent.compaction`: how the history is compacted (default summarize).
    pub compaction: CompactionStrategy,
    /// `agent.keep_recent_turns`: the most recent turns kept verbatim by a compaction
    /// (at least 1, default 4).
    pub keep_recent_turns: u32,
    /// `agent.profile`: how the turn engine drives the model (default auto: `small` for a
    /// model run in-process).
    pub profile: AgentProfile,
}

pub(crate) fn resolve(
    raw: AgentToml,
    providers: &BTreeMap<String, ProviderConfig>,
    origin_of: &dyn Fn(&str) -> String,
) -> Result<AgentConfig, ConfigError> {
    let invalid = |field: &str, message: String| ConfigError::Invalid {
        origin: origin_of(&format!("agent.{field}")),
        key: format!("agent.{field}"),
        message,
    };
    let max_rounds = raw.max_rounds.unwrap_or(25);
    if max_rounds == 0 {
        return Err(invalid("max_rounds", "must be at least 1".into()));
    }
    let compact_at = raw.compact_at.unwrap_or(0.75);
    if !(compact_at > 0.0 && compact_at <= 1.0) {
        return Err(invalid(
            "compact_at",
            format!("{compact_at} is not a fraction of the context window (> 0 and <= 1)"),
        ));
    }
    let compaction = match raw.compaction.as_deref() {
        None => CompactionStrategy::Summarize,
        Some(name) => CompactionStrategy::parse(name).ok_or_else(|| {
            invalid(
                "compaction",
                format!(
                    "unknown strategy `{name}` (expected one of: {})",
                    CompactionStrategy::ALL
                        .map(CompactionStrategy::as_str)
                        .join(", ")
                ),
            )
        })?,
    };
    let profile = match raw.profile.as_deref() {
        None => AgentProfile::Auto,
        Some(name) => AgentProfile::parse(name).ok_or_else(|| {
            invalid(
                "profile",
                format!(
                    "unknown profile `{name}` (expected one of: {})",
                    AgentProfile::ALL.map(AgentProfile::as_str).join(", ")
                ),
            )
        })?,
    };
    let keep_recent_turns = raw.keep_recent_turns.unwrap_or(4);
    if keep_recent_turns == 0 {
        return Err(invalid("keep_recent_turns", "must be at least 1".into()));
    }
    // The provider with the smallest window decides; ties go to the first name.
    let smallest = providers
        .values()
        .min_by_key(|p| (p.context_tokens, p.name.as_str()));
    if let Some(p) = smallest
        && u64::from(keep_recent_turns) * TOKENS_PER_KEPT_TURN > u64::from(p.context_tokens)
    {
        return Err(invalid(
            "keep_recent_turns",
            format!(
                "{keep_recent_turns} turns cannot fit the {}-token window of provider `{}` \
                 (at most {})",
                p.context_tokens,
                p.name,
                u64::from(p.context_tokens) / TOKENS_PER_KEPT_TURN
            ),
        ));
    }
    Ok(AgentConfig {
        max_rounds,
        max_wall_secs: raw.max_wall_secs.unwrap_or(1800),
        inline_output_chars: raw.inline_output_chars.unwrap_or(2000),
        loop_limit: raw.loop_limit.unwrap_or(3),
        system_prompt: raw.system_prompt,
        compact_at,
        compaction,
        keep_recent_turns,
        profile,
    })
}
