//! `providers.NAME.{temperature, top_p, top_k, repeat_penalty, seed}`: how a provider samples
//! tokens, range-checked, and refused where the wire API has no such setting.

use crate::error::ConfigError;
use crate::raw::ProviderToml;
use reef_core::{Sampling, WireApi};

pub(crate) fn resolve(
    name: &str,
    wire_api: WireApi,
    p: &ProviderToml,
    origin_of: &dyn Fn(&str) -> String,
) -> Result<Sampling, ConfigError> {
    let invalid = |field: &str, message: String| ConfigError::Invalid {
        origin: origin_of(&format!("providers.{name}.{field}")),
        key: format!("providers.{name}.{field}"),
        message,
    };
    let in_range =
        |field: &str, value: Option<f32>, low: f32, high: f32, low_open: bool| match value {
            Some(v) if !v.is_finite() || v > high || v < low || (low_open && v <= low) => {
                Err(invalid(
                    field,
                    format!(
                        "{v} is out of range (expected {} {low} and at most {high})",
                        if low_open { "above" } else { "at least" }
                    ),
                ))
            }
            _ => Ok(()),
        };
    in_range("temperature", p.temperature, 0.0, 2.0, false)?;
    in_range("top_p", p.top_p, 0.0, 1.0, true)?;
    in_range("repeat_penalty", p.repeat_penalty, 0.0, 10.0, true)?;
    if p.top_k == Some(0) {
        return Err(invalid("top_k", "must be at least 1".into()));
    }
    if wire_api == WireApi::Anthropic {
        // The Messages API has neither; sending them is refused by the server.
        for (field, given) in [
            ("seed", p.seed.is_some()),
            ("repeat_penalty", p.repeat_penalty.is_some()),
        ] {
            if given {
                return Err(invalid(
                    field,
                    "is not supported by wire_api = \"anthropic\"".into(),
                ));
            }
        }
    }
    Ok(Sampling {
        temperature: p.temperature,
        top_p: p.top_p,
        top_k: p.top_k,
        repeat_penalty: p.repeat_penalty,
        seed: p.seed,
    })
}
