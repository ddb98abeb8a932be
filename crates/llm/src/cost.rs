//! Prices and cost: what a request cost, computed from the usage the provider reported and a
//! price per million tokens (input, output, cached input) for the model that served it.
//! Defaults cover common hosted models; `[prices."MODEL"]` in config adds or replaces one.
//! A model without a known price has no cost (`None`), never a guessed one.

use reef_core::Usage;
use std::collections::BTreeMap;

/// US dollars per million tokens.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Price {
    pub input: f64,
    pub output: f64,
    /// Input tokens served from the provider's cache; `None` bills them as input.
    pub cached_input: Option<f64>,
}

/// Built-in prices (USD per million tokens: input, output, cached input) as published by
/// the providers for these model families; check your provider's price list and override
/// in `[prices]` where it differs.
pub const DEFAULT_PRICES: &[(&str, f64, f64, Option<f64>)] = &[
    ("gpt-4o", 2.50, 10.00, Some(1.25)),
    ("gpt-4o-mini", 0.15, 0.60, Some(0.075)),
    ("gpt-4.1", 2.00, 8.00, Some(0.50)),
    ("gpt-4.1-mini", 0.40, 1.60, Some(0.10)),
    ("gpt-4.1-nano", 0.10, 0.40, Some(0.025)),
    ("o3-mini", 1.10, 4.40, Some(0.55)),
    ("o4-mini", 1.10, 4.40, Some(0.275)),
    ("claude-3-5-haiku", 0.80, 4.00, Some(0.08)),
    ("claude-3-5-sonnet", 3.00, 15.00, Some(0.30)),
    ("claude-3-7-sonnet", 3.00, 15.00, Some(0.30)),
    ("claude-sonnet-4", 3.00, 15.00, Some(0.30)),
    ("claude-opus-4", 15.00, 75.00, Some(1.50)),
];

/// Prices by model name. A request's model matches the longest price key that equals it or
/// is a prefix of it followed by `-` (so `gpt-4o-2024-08-06` is priced as `gpt-4o`, and
/// `gpt-4o-mini` as `gpt-4o-mini`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Prices {
    by_model: BTreeMap<String, Price>,
}

impl Prices {
    /// The built-in prices.
    pub fn defaults() -> Prices {
        let by_model = DEFAULT_PRICES
            .iter()
            .map(|(model, input, output, cached)| {
                (
                    (*model).to_owned(),
                    Price {
                        input: *input,
                        output: *output,
                        cached_input: *cached,
                    },
                )
            })
            .collect();
        Prices { by_model }
    }

    /// Adds or replaces the price of `model`.
    pub fn set(&mut self, model: &str, price: Price) {
        self.by_model.insert(model.to_owned(), price);
    }

    /// The price that applies to `model`, if any.
    pub fn get(&self, model: &str) -> Option<&Price> {
        self.by_model
            .iter()
            .filter(|(key, _)| {
                model == key.as_str()
                    || model
                        .strip_prefix(key.as_str())
                        .is_some_and(|rest| rest.starts_with('-') || rest.starts_with(':'))
            })
            .max_by_key(|(key, _)| key.len())
            .map(|(_, price)| price)
    }

    /// What `usage` cost on `model`, in millionths of a US dollar.
    pub fn cost_micros(&self, model: &str, usage: &Usage) -> Option<u64> {
        let price = self.get(model)?;
        let cached = usage.cached_input_tokens.min(usage.input_tokens);
        let uncached = usage.input_tokens - cached;
        // Tokens × dollars per million tokens = micro-dollars.
        let micros = uncached as f64 * price.input
            + cached as f64 * price.cached_input.unwrap_or(price.input)
            + usage.output_tokens as f64 * price.output;
        Some(micros.round().max(0.0) as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(input: u64, cached: u64, output: u64) -> Usage {
        Usage {
            input_tokens: input,
            output_tokens: output,
            cached_input_tokens: cached,
        }
    }

    #[test]
    fn the_longest_matching_model_family_prices_a_request() {
        let prices = Prices::defaults();
        assert_eq!(prices.get("gpt-4o-mini").unwrap().input, 0.15);
        assert_eq!(prices.get("gpt-4o-mini-2024-07-18").unwrap().input, 0.15);
        assert_eq!(prices.get("gpt-4o-2024-08-06").unwrap().input, 2.50);
        assert!(
            prices.get("gpt-4").is_none(),
            "a shorter name is not a match"
        );
        assert!(prices.get("gpt-4omega").is_none());
        assert!(prices.get("llama3.2").is_none());
    }

    #[test]
    fn cost_counts_cached_input_at_its_own_price() {
        let prices = Prices::defaults();
        // gpt-4o: 1M uncached input $2.50 + 1M cached $1.25 + 1M output $10.
        let cost = prices
            .cost_micros("gpt-4o", &usage(2_000_000, 1_000_000, 1_000_000))
            .unwrap();
        assert_eq!(cost, 13_750_000);
        assert_eq!(prices.cost_micros("unknown-model", &usage(10, 0, 10)), None);
        let mut custom = Prices::default();
        custom.set(
            "local",
            Price {
                input: 0.0,
                output: 0.0,
                cached_input: None,
            },
        );
        assert_eq!(custom.cost_micros("local", &usage(1000, 0, 1000)), Some(0));
    }
}
