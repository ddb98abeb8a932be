//! `[skills]`: whether agents get skills, how much of the prompt lists them, and the default
//! timeout of a skill's own tool.

use crate::error::ConfigError;
use serde::Deserialize;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SkillsToml {
    pub enabled: Option<bool>,
    pub prompt_max_chars: Option<usize>,
    pub timeout_secs: Option<u64>,
}

/// The resolved `[skills]` section.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SkillsConfig {
    /// Offer skills to agents at all.
    pub enabled: bool,
    /// The prompt's list of skills (names and descriptions) stops before this many characters.
    pub prompt_max_chars: usize,
    /// Timeout of a skill's own tool when its `SKILL.md` gives none.
    pub timeout_secs: u64,
}

impl Default for SkillsConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            prompt_max_chars: 4000,
            timeout_secs: 60,
        }
    }
}

pub(crate) fn resolve_skills(
    raw: SkillsToml,
    origin_of: &dyn Fn(&str) -> String,
) -> Result<SkillsConfig, ConfigError> {
    let defaults = SkillsConfig::default();
    let timeout_secs = raw.timeout_secs.unwrap_or(defaults.timeout_secs);
    if !(1..=3600).contains(&timeout_secs) {
        return Err(ConfigError::Invalid {
            origin: origin_of("skills.timeout_secs"),
            key: "skills.timeout_secs".into(),
            message: format!("{timeout_secs} is not between 1 and 3600 seconds"),
        });
    }
    Ok(SkillsConfig {
        enabled: raw.enabled.unwrap_or(defaults.enabled),
        prompt_max_chars: raw.prompt_max_chars.unwrap_or(defaults.prompt_max_chars),
        timeout_secs,
    })
}
