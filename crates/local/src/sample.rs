//! Choosing the next token: greedy unless the provider's `Sampling` asks for more (a repeat
//! penalty, top-k, top-p, a temperature and a seeded draw). Under a grammar the unconstrained
//! choice is checked first, and the whole vocabulary is filtered only when the grammar refuses
//! it, which keeps free text nearly as fast as without one.

use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::LlamaToken;
use llama_cpp_2::token::data::LlamaTokenData;
use llama_cpp_2::token::data_array::LlamaTokenDataArray;
use reef_core::Sampling;

/// Tokens of recent output the repeat penalty looks back over.
const PENALTY_WINDOW: i32 = 64;

/// llama.cpp's "draw a random seed" value.
const RANDOM_SEED: u32 = u32::MAX;

/// Picks tokens for one reply.
pub(crate) struct Picker {
    /// None: plain greedy.
    chain: Option<LlamaSampler>,
}

impl Picker {
    /// A picker for `sampling` over a vocabulary of `n_vocab` tokens.
    pub(crate) fn new(sampling: &Sampling, n_vocab: i32) -> Picker {
        let temperature = sampling.temperature.filter(|t| *t > 0.0);
        if temperature.is_none() && sampling.repeat_penalty.is_none() {
            return Picker { chain: None };
        }
        let mut stages = Vec::new();
        if let Some(penalty) = sampling.repeat_penalty {
            stages.push(LlamaSampler::penalties(
                n_vocab,
                PENALTY_WINDOW,
                penalty,
                0.0,
                0.0,
            ));
        }
        match temperature {
            Some(t) => {
                if let Some(k) = sampling.top_k {
                    stages.push(LlamaSampler::top_k(i32::try_from(k).unwrap_or(i32::MAX)));
                }
                if let Some(p) = sampling.top_p {
                    stages.push(LlamaSampler::top_p(p, 1));
                }
                stages.push(LlamaSampler::temp(t));
                // The seed's low 32 bits (llama.cpp's seeds are 32-bit; all ones means random).
                let seed = sampling
                    .seed
                    .map_or(RANDOM_SEED, |s| (s % u64::from(RANDOM_SEED)) as u32);
                stages.push(LlamaSampler::dist(seed));
            }
            None => stages.push(LlamaSampler::greedy()),
        }
        Picker {
            chain: Some(LlamaSampler::chain_simple(stages)),
        }
    }

    /// The next token from the logits at batch `index`, one the grammar allows when there is
    /// a grammar.
    pub(crate) fn pick(
        &mut self,
        ctx: &LlamaContext<'_>,
        index: i32,
        mut grammar: Option<&mut LlamaSampler>,
    ) -> LlamaToken {
        let Some(chain) = self.chain.as_mut() else {
            return greedy(ctx, index, grammar);
        };
        let mut all = ctx.token_data_array_ith(index);
        all.apply_sampler(chain);
        let chosen = all.selected_token();
        if let Some(token) = chosen
            && grammar.as_deref_mut().is_none_or(|g| allows(g, token))
        {
            return token;
        }
        let mut all = ctx.token_data_array_ith(index);
        if let Some(g) = grammar {
            all.apply_sampler(g);
        }
        all.apply_sampler(chain);
        all.selected_token()
            .unwrap_or_else(|| greedy(ctx, index, None))
    }

    /// Records the token chosen, for the repeat penalty.
    pub(crate) fn accept(&mut self, token: LlamaToken) {
        if let Some(chain) = self.chain.as_mut() {
            chain.accept(token);
        }
    }
}

/// Whether `grammar` allows `token` next.
fn allows(grammar: &mut LlamaSampler, token: LlamaToken) -> bool {
    let mut single = LlamaTokenDataArray::new(vec![LlamaTokenData::new(token, 0.0, 0.0)], false);
    single.apply_sampler(grammar);
    single.data.first().is_some_and(|d| d.logit().is_finite())
}

/// The most likely next token; under a grammar, the most likely one the grammar allows.
fn greedy(ctx: &LlamaContext<'_>, index: i32, grammar: Option<&mut LlamaSampler>) -> LlamaToken {
    let logits = ctx.get_logits_ith(index);
    let best = argmax(logits.iter().copied().enumerate());
    let Some(grammar) = grammar else {
        return best;
    };
    if allows(grammar, best) {
        return best;
    }
    let mut all = ctx.token_data_array_ith(index);
    all.apply_sampler(grammar);
    let allowed = all
        .data
        .iter()
        .filter(|d| d.logit().is_finite())
        .map(|d| (d.id().0 as usize, d.logit()));
    argmax(allowed)
}

fn argmax(scores: impl Iterator<Item = (usize, f32)>) -> LlamaToken {
    let (index, _) = scores.fold((0usize, f32::NEG_INFINITY), |best, (i, s)| {
        if s > best.1 { (i, s) } else { best }
    });
    LlamaToken(index as i32)
}
