//! How full the context is: exact where the model can count its own tokens (the embedded
//! model), otherwise an estimate from characters recalibrated on every reported usage.

use reef_core::{Message, ModelClient, ModelRequest};

/// Characters per token assumed before any usage was reported (English text and JSON are
/// close to 4 with the common BPE vocabularies).
const CHARS_PER_TOKEN: f64 = 4.0;

/// Framing every message costs on top of its text (role markers, separators).
const MESSAGE_OVERHEAD: usize = 16;

/// The calibration ratio is kept within this factor of the initial guess, so that one odd
/// report (a provider counting cached tokens apart, a proxy) cannot make the estimate absurd.
const RATIO_BOUNDS: (f64, f64) = (0.25, 4.0);

/// The raw size of a request in characters: what the estimate scales.
pub(crate) fn request_chars(request: &ModelRequest) -> usize {
    let messages: usize = request.messages.iter().map(message_chars).sum();
    let tools: usize = request
        .tools
        .iter()
        .map(|t| t.name.len() + t.description.len() + t.parameters.to_string().len() + 32)
        .sum();
    messages + tools
}

/// The raw size of one message in characters.
pub(crate) fn message_chars(message: &Message) -> usize {
    let calls = match message {
        Message::Assistant { tool_calls, .. } => tool_calls
            .iter()
            .map(|c| c.name.len() + c.arguments.len() + c.id.as_str().len() + MESSAGE_OVERHEAD)
            .sum(),
        Message::Tool { call_id, name, .. } => call_id.as_str().len() + name.len(),
        _ => 0,
    };
    message.content().len() + calls + MESSAGE_OVERHEAD
}

/// Tracks the size of the context in tokens for one session.
#[derive(Clone, Debug)]
pub(crate) struct ContextMeter {
    /// Tokens per character, learnt from reported usage.
    ratio: f64,
    /// The last reported prompt size and the raw size of the request it was reported for:
    /// what was added since is estimated on top of it.
    anchor: Option<(usize, u64)>,
}

impl Default for ContextMeter {
    fn default() -> Self {
        Self {
            ratio: 1.0 / CHARS_PER_TOKEN,
            anchor: None,
        }
    }
}

/// A measured request size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Measure {
    pub tokens: u64,
    /// Counted by the model's tokenizer rather than estimated.
    pub exact: bool,
}

impl ContextMeter {
    /// The size `request` will have as a prompt.
    pub async fn measure(&self, model: &dyn ModelClient, request: &ModelRequest) -> Measure {
        if let Some(tokens) = model.count_tokens(request).await {
            return Measure {
                tokens,
                exact: true,
            };
        }
        Measure {
            tokens: self.estimate(request_chars(request)),
            exact: false,
        }
    }

    /// The estimated tokens of a request of `chars` raw characters.
    pub fn estimate(&self, chars: usize) -> u64 {
        match self.anchor {
            Some((anchor_chars, reported)) if chars >= anchor_chars => {
                reported + self.tokens_of(chars - anchor_chars)
            }
            _ => self.tokens_of(chars),
        }
    }

    /// The estimated tokens of `chars` raw characters, without the anchor.
    pub fn tokens_of(&self, chars: usize) -> u64 {
        (chars as f64 * self.ratio).ceil() as u64
    }

    /// The provider reported `input_tokens` for a request of `chars` raw characters.
    pub fn calibrate(&mut self, chars: usize, input_tokens: u64) {
        if chars == 0 || input_tokens == 0 {
            return;
        }
        let guess = 1.0 / CHARS_PER_TOKEN;
        self.ratio = (input_tokens as f64 / chars as f64)
            .clamp(guess * RATIO_BOUNDS.0, guess * RATIO_BOUNDS.1);
        self.anchor = Some((chars, input_tokens));
    }

    /// The history was rewritten (compaction, a new session): the anchor no longer describes
    /// a prefix of what is sent. The learnt ratio stays.
    pub fn forget_anchor(&mut self) {
        self.anchor = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_estimate_is_recalibrated_from_reported_usage() {
        let mut meter = ContextMeter::default();
        assert_eq!(meter.estimate(4000), 1000);
        // The provider counts 2 characters per token: later growth is scaled the same way,
        // on top of the reported figure.
        meter.calibrate(4000, 2000);
        assert_eq!(meter.estimate(4000), 2000);
        assert_eq!(meter.estimate(5000), 2500);
        meter.forget_anchor();
        assert_eq!(meter.estimate(1000), 500);
    }

    #[test]
    fn an_absurd_report_is_bounded() {
        let mut meter = ContextMeter::default();
        meter.calibrate(1000, 1_000_000);
        meter.forget_anchor();
        assert_eq!(meter.estimate(1000), 1000);
    }
}
