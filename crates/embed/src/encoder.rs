//! The fused encoder: all-MiniLM-L6-v2's forward pass written out over plain f32 buffers.
//!
//! Texts are laid end to end with no padding. Every linear layer is one matrix product over
//! all the batch's tokens, with its bias folded into the product (query, key and value as a
//! single product). Attention reads each head in place from that product, and GELU, softmax
//! and layer norm are loops the compiler vectorises. In f32 it computes what `bert.rs`
//! computes (the reference), which a test checks; with int8 linear layers (`quant.rs`) it
//! approximates that, which a test bounds.

use crate::bert::BertConfig;
use crate::kernels::{
    FEW_ROWS, Matrix, MatrixMut, Threads, add_and_normalise, few_rows_product, gelu, product,
    softmax,
};
use crate::quant::{Kernel, QuantDense};
use safetensors::{Dtype, SafeTensors};

/// Scale and shift of a layer norm.
struct Norm {
    gamma: Vec<f32>,
    beta: Vec<f32>,
    eps: f32,
}

/// A linear layer stored as PyTorch stores it, `[outputs, inputs]` (each output's weights
/// contiguous), computing `x · Wᵀ + b`.
struct Dense {
    weight: Vec<f32>,
    bias: Vec<f32>,
    inputs: usize,
    outputs: usize,
}

impl Dense {
    /// `out[rows, outputs] = x[rows, inputs] · Wᵀ + b`.
    fn forward(&self, x: &[f32], rows: usize, out: &mut Vec<f32>, threads: Threads) {
        out.clear();
        out.reserve(rows * self.outputs);
        for _ in 0..rows {
            out.extend_from_slice(&self.bias);
        }
        if rows <= FEW_ROWS {
            few_rows_product(
                out,
                x,
                rows,
                &self.weight,
                self.inputs,
                self.outputs,
                threads,
            );
            return;
        }
        product(
            MatrixMut::rows(out, rows, self.outputs),
            Matrix::rows(x, rows, self.inputs),
            // Wᵀ: element (i, o) is weight[o · inputs + i].
            Matrix::strided(&self.weight, self.inputs, self.outputs, 1, self.inputs),
            1.0,
            true,
            threads,
        );
    }
}

/// A linear layer in the precision the encoder was loaded with.
enum Linear {
    F32(Dense),
    /// Quantised weights summed by `Kernel` (the f32 weights are dropped).
    Int8(QuantDense, Kernel),
}

impl Linear {
    fn new(dense: Dense, precision: Precision) -> Self {
        match precision {
            Precision::F32 => Self::F32(dense),
            Precision::Int8(kernel) => {
                match QuantDense::new(&dense.weight, &dense.bias, dense.inputs, dense.outputs) {
                    Some(quantised) => Self::Int8(quantised, kernel),
                    None => Self::F32(dense),
                }
            }
        }
    }

    fn forward(&self, x: &[f32], rows: usize, out: &mut Vec<f32>, threads: Threads) {
        match self {
            Self::F32(dense) => dense.forward(x, rows, out, threads),
            Self::Int8(dense, kernel) => dense.forward(x, rows, out, *kernel, threads),
        }
    }
}

/// The arithmetic of the linear layers (attention, norms and GELU are f32 either way).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Precision {
    /// f32 throughout: what the reference computes, to float rounding.
    F32,
    /// Weights quantised per output to i8, inputs per row to u8, sums exact in i32.
    Int8(Kernel),
}

struct Layer {
    qkv: Linear,
    attention_out: Linear,
    attention_norm: Norm,
    intermediate: Linear,
    output: Linear,
    output_norm: Norm,
}

/// The encoder with its weights in memory.
pub(crate) struct Encoder {
    words: Vec<f32>,
    vocab: usize,
    positions: Vec<f32>,
    max_positions: usize,
    /// Row 0 of the token type embeddings: every token reef embeds is of type 0.
    token_type: Vec<f32>,
    embeddings_norm: Norm,
    layers: Vec<Layer>,
    hidden: usize,
    heads: usize,
    head_dim: usize,
}

/// Reads the weights a config names from a safetensors file, checking every shape.
struct Weights<'a> {
    tensors: SafeTensors<'a>,
}

impl Weights<'_> {
    fn get(&self, name: &str, shape: &[usize]) -> Result<Vec<f32>, String> {
        let view = self
            .tensors
            .tensor(name)
            .map_err(|e| format!("tensor {name}: {e}"))?;
        if view.shape() != shape {
            return Err(format!(
                "tensor {name} has shape {:?}, the config says {shape:?}",
                view.shape()
            ));
        }
        let bytes = view.data();
        match view.dtype() {
            Dtype::F32 => Ok(bytes
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect()),
            Dtype::F16 => Ok(bytes
                .chunks_exact(2)
                .map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f32())
                .collect()),
            Dtype::BF16 => Ok(bytes
                .chunks_exact(2)
                .map(|b| half::bf16::from_le_bytes([b[0], b[1]]).to_f32())
                .collect()),
            other => Err(format!(
                "tensor {name} is {other:?}; expected F32, F16 or BF16"
            )),
        }
    }

    fn norm(&self, prefix: &str, width: usize, eps: f32) -> Result<Norm, String> {
        Ok(Norm {
            gamma: self.get(&format!("{prefix}.weight"), &[width])?,
            beta: self.get(&format!("{prefix}.bias"), &[width])?,
            eps,
        })
    }

    /// Linear layers stored as PyTorch does (`[outputs, inputs]`), concatenated along their
    /// outputs and transposed.
    fn dense(&self, prefixes: &[&str], inputs: usize, outputs: usize) -> Result<Dense, String> {
        let mut parts = Vec::with_capacity(prefixes.len());
        let mut bias = Vec::with_capacity(outputs * prefixes.len());
        for prefix in prefixes {
            parts.push(self.get(&format!("{prefix}.weight"), &[outputs, inputs])?);
            bias.extend(self.get(&format!("{prefix}.bias"), &[outputs])?);
        }
        let total = outputs * prefixes.len();
        let weight = parts.concat();
        Ok(Dense {
            weight,
            bias,
            inputs,
            outputs: total,
        })
    }
}

impl Encoder {
    /// Loads the weights of `config` from the bytes of a safetensors file.
    pub(crate) fn load(
        bytes: &[u8],
        config: &BertConfig,
        precision: Precision,
    ) -> Result<Self, String> {
        config.check()?;
        let w = Weights {
            tensors: SafeTensors::deserialize(bytes)
                .map_err(|e| format!("not a safetensors file: {e}"))?,
        };
        let h = config.hidden_size;
        // The config's eps is an f64; the computation is in f32 (1e-12 stays 1e-12).
        let eps = config.layer_norm_eps as f32;
        let mut layers = Vec::with_capacity(config.num_hidden_layers);
        for i in 0..config.num_hidden_layers {
            let l = format!("encoder.layer.{i}");
            let a = format!("{l}.attention");
            let linear = |prefixes: &[&str], inputs, outputs| {
                Ok::<_, String>(Linear::new(w.dense(prefixes, inputs, outputs)?, precision))
            };
            layers.push(Layer {
                qkv: linear(
                    &[
                        &format!("{a}.self.query"),
                        &format!("{a}.self.key"),
                        &format!("{a}.self.value"),
                    ],
                    h,
                    h,
                )?,
                attention_out: linear(&[&format!("{a}.output.dense")], h, h)?,
                attention_norm: w.norm(&format!("{a}.output.LayerNorm"), h, eps)?,
                intermediate: linear(
                    &[&format!("{l}.intermediate.dense")],
                    h,
                    config.intermediate_size,
                )?,
                output: linear(&[&format!("{l}.output.dense")], config.intermediate_size, h)?,
                output_norm: w.norm(&format!("{l}.output.LayerNorm"), h, eps)?,
            });
        }
        let types = w.get(
            "embeddings.token_type_embeddings.weight",
            &[config.type_vocab_size, h],
        )?;
        Ok(Self {
            words: w.get("embeddings.word_embeddings.weight", &[config.vocab_size, h])?,
            vocab: config.vocab_size,
            positions: w.get(
                "embeddings.position_embeddings.weight",
                &[config.max_position_embeddings, h],
            )?,
            max_positions: config.max_position_embeddings,
            token_type: types[..h].to_vec(),
            embeddings_norm: w.norm("embeddings.LayerNorm", h, eps)?,
            layers,
            hidden: h,
            heads: config.num_attention_heads,
            head_dim: h / config.num_attention_heads,
        })
    }

    /// Unit-length sentence vectors (the mean of the last layer's token states) of texts given
    /// as token ids, computed on `threads` threads of the caller's pool.
    pub(crate) fn embed(
        &self,
        texts: &[&[u32]],
        threads: Threads,
    ) -> Result<Vec<Vec<f32>>, String> {
        let h = self.hidden;
        let lens: Vec<usize> = texts.iter().map(|t| t.len()).collect();
        let rows: usize = lens.iter().sum();
        let mut hidden = Vec::with_capacity(rows * h);
        for ids in texts {
            if ids.len() > self.max_positions {
                return Err(format!(
                    "{} tokens, more than the model's {} positions",
                    ids.len(),
                    self.max_positions
                ));
            }
            for (position, &id) in ids.iter().enumerate() {
                let id = id as usize;
                if id >= self.vocab {
                    return Err(format!(
                        "token id {id} is outside the model's vocabulary of {}",
                        self.vocab
                    ));
                }
                let word = &self.words[id * h..(id + 1) * h];
                let place = &self.positions[position * h..(position + 1) * h];
                hidden.extend(
                    word.iter()
                        .zip(place)
                        .zip(&self.token_type)
                        .map(|((w, p), t)| w + p + t),
                );
            }
        }
        for row in hidden.chunks_exact_mut(h) {
            add_and_normalise(
                row,
                None,
                &self.embeddings_norm.gamma,
                &self.embeddings_norm.beta,
                self.embeddings_norm.eps,
            );
        }
        let mut qkv = Vec::new();
        let mut context = vec![0.0; rows * h];
        let mut attended = Vec::new();
        let mut inner = Vec::new();
        for layer in &self.layers {
            layer.qkv.forward(&hidden, rows, &mut qkv, threads);
            self.attention(&qkv, &lens, &mut context, threads);
            layer
                .attention_out
                .forward(&context, rows, &mut attended, threads);
            normalise_rows(&mut attended, &hidden, &layer.attention_norm, h);
            layer
                .intermediate
                .forward(&attended, rows, &mut inner, threads);
            gelu(&mut inner);
            layer.output.forward(&inner, rows, &mut hidden, threads);
            normalise_rows(&mut hidden, &attended, &layer.output_norm, h);
        }
        let mut vectors = Vec::with_capacity(texts.len());
        let mut start = 0;
        for &len in &lens {
            let mut mean = vec![0.0f32; h];
            for row in hidden[start * h..(start + len) * h].chunks_exact(h) {
                for (m, x) in mean.iter_mut().zip(row) {
                    *m += x;
                }
            }
            start += len;
            let count = len.max(1) as f32;
            mean.iter_mut().for_each(|m| *m /= count);
            let norm = mean.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
            mean.iter_mut().for_each(|m| *m /= norm);
            vectors.push(mean);
        }
        Ok(vectors)
    }

    /// Self-attention of every text on its own tokens; `context` gets `[rows, hidden]`.
    fn attention(&self, qkv: &[f32], lens: &[usize], context: &mut [f32], threads: Threads) {
        let h = self.hidden;
        let mut parts = Vec::with_capacity(lens.len());
        let mut rest = context;
        let mut start = 0;
        for &len in lens {
            let (part, tail) = rest.split_at_mut(len * h);
            parts.push((&qkv[start * 3 * h..(start + len) * 3 * h], len, part));
            rest = tail;
            start += len;
        }
        let attend = |(qkv, len, part): (&[f32], usize, &mut [f32])| self.attend(qkv, len, part);
        threads.for_each(parts, attend);
    }

    /// Attention of one text of `len` tokens; `qkv` is its `[len, 3 · hidden]` rows.
    fn attend(&self, qkv: &[f32], len: usize, context: &mut [f32]) {
        if len == 0 {
            return;
        }
        let (h, d) = (self.hidden, self.head_dim);
        let stride = 3 * h;
        let scale = 1.0 / (d as f32).sqrt();
        let mut scores = vec![0.0; len * len];
        for head in 0..self.heads {
            let query = Matrix::strided(&qkv[head * d..], len, d, stride, 1);
            // Keys transposed: column j of the product's right side is token j's key.
            let keys = Matrix::strided(&qkv[h + head * d..], d, len, 1, stride);
            product(
                MatrixMut::rows(&mut scores, len, len),
                query,
                keys,
                scale,
                false,
                Threads::One,
            );
            for row in scores.chunks_exact_mut(len) {
                softmax(row);
            }
            let values = Matrix::strided(&qkv[2 * h + head * d..], len, d, stride, 1);
            product(
                MatrixMut::strided(&mut context[head * d..], len, d, h, 1),
                Matrix::rows(&scores, len, len),
                values,
                1.0,
                false,
                Threads::One,
            );
        }
    }
}

/// `x ← norm(x + residual)`, row by row.
fn normalise_rows(x: &mut [f32], residual: &[f32], norm: &Norm, width: usize) {
    for (row, res) in x.chunks_exact_mut(width).zip(residual.chunks_exact(width)) {
        add_and_normalise(row, Some(res), &norm.gamma, &norm.beta, norm.eps);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bert::Bert;
    use crate::kernels::Threads;
    use std::collections::BTreeMap;

    fn config() -> BertConfig {
        serde_json::from_value(serde_json::json!({
            "vocab_size": 50,
            "hidden_size": 32,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "intermediate_size": 64,
            "max_position_embeddings": 40,
            "type_vocab_size": 2,
            "layer_norm_eps": 1e-12,
        }))
        .unwrap_or_else(|e| panic!("config: {e}"))
    }

    /// A safetensors file of random weights in the layout all-MiniLM-L6-v2 ships.
    fn random_weights(config: &BertConfig) -> Vec<u8> {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 40) as f32 / (1u64 << 24) as f32 - 0.5
        };
        let (h, i) = (config.hidden_size, config.intermediate_size);
        let mut shapes: Vec<(String, Vec<usize>)> = vec![
            (
                "embeddings.word_embeddings.weight".into(),
                vec![config.vocab_size, h],
            ),
            (
                "embeddings.position_embeddings.weight".into(),
                vec![config.max_position_embeddings, h],
            ),
            (
                "embeddings.token_type_embeddings.weight".into(),
                vec![config.type_vocab_size, h],
            ),
            ("embeddings.LayerNorm.weight".into(), vec![h]),
            ("embeddings.LayerNorm.bias".into(), vec![h]),
        ];
        for l in 0..config.num_hidden_layers {
            let p = format!("encoder.layer.{l}");
            for (name, out, inp) in [
                ("attention.self.query", h, h),
                ("attention.self.key", h, h),
                ("attention.self.value", h, h),
                ("attention.output.dense", h, h),
                ("intermediate.dense", i, h),
                ("output.dense", h, i),
            ] {
                shapes.push((format!("{p}.{name}.weight"), vec![out, inp]));
                shapes.push((format!("{p}.{name}.bias"), vec![out]));
            }
            for norm in ["attention.output.LayerNorm", "output.LayerNorm"] {
                shapes.push((format!("{p}.{norm}.weight"), vec![h]));
                shapes.push((format!("{p}.{norm}.bias"), vec![h]));
            }
        }
        let data: BTreeMap<String, (Vec<usize>, Vec<u8>)> = shapes
            .into_iter()
            .map(|(name, shape)| {
                let gain = if name.contains("LayerNorm.weight") {
                    1.0
                } else {
                    0.0
                };
                let bytes = (0..shape.iter().product::<usize>())
                    .flat_map(|_| (gain + next()).to_le_bytes())
                    .collect();
                (name, (shape, bytes))
            })
            .collect();
        let views: Vec<(String, safetensors::tensor::TensorView<'_>)> = data
            .iter()
            .map(|(name, (shape, bytes))| {
                let view = safetensors::tensor::TensorView::new(Dtype::F32, shape.clone(), bytes)
                    .unwrap_or_else(|e| panic!("{name}: {e}"));
                (name.clone(), view)
            })
            .collect();
        safetensors::serialize(views, None).unwrap_or_else(|e| panic!("serialize: {e}"))
    }

    fn reference(bytes: Vec<u8>, config: &BertConfig, texts: &[&[u32]]) -> Vec<Vec<f32>> {
        let vb = candle_nn::VarBuilder::from_buffered_safetensors(
            bytes,
            candle_core::DType::F32,
            &candle_core::Device::Cpu,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let bert = Bert::load(vb, config).unwrap_or_else(|e| panic!("{e}"));
        bert.embed_texts(texts).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn the_fused_encoder_computes_what_the_reference_computes() {
        let config = config();
        let bytes = random_weights(&config);
        let encoder =
            Encoder::load(&bytes, &config, Precision::F32).unwrap_or_else(|e| panic!("{e}"));
        let texts: Vec<Vec<u32>> = [1usize, 7, 33, 40]
            .iter()
            .map(|&len| (0..len).map(|i| ((i * 7 + len) % 50) as u32).collect())
            .collect();
        let texts: Vec<&[u32]> = texts.iter().map(Vec::as_slice).collect();
        let want = reference(bytes, &config, &texts);
        // All four at once (more rows than FEW_ROWS: gemm), and short ones alone (the
        // few-rows product), on one thread and on two.
        let batches: [&[usize]; 3] = [&[0, 1, 2, 3], &[1], &[0, 1]];
        assert!(texts[0].len() + texts[1].len() <= crate::kernels::FEW_ROWS);
        for threads in [Threads::One, Threads::Many(2)] {
            for batch in batches {
                let input: Vec<&[u32]> = batch.iter().map(|&i| texts[i]).collect();
                let got = encoder
                    .embed(&input, threads)
                    .unwrap_or_else(|e| panic!("{e}"));
                assert_eq!(got.len(), batch.len());
                for (g, &i) in got.iter().zip(batch) {
                    let worst = g
                        .iter()
                        .zip(&want[i])
                        .map(|(a, b)| (a - b).abs())
                        .fold(0.0f32, f32::max);
                    assert!(
                        worst < 2e-5,
                        "{threads:?} {batch:?}: text {i} differs by {worst}"
                    );
                    let norm: f32 = g.iter().map(|x| x * x).sum::<f32>().sqrt();
                    assert!((norm - 1.0).abs() < 1e-5, "unit length: {norm}");
                }
            }
        }
    }

    #[test]
    fn the_int8_encoder_stays_close_to_the_f32_one() {
        let config = config();
        let bytes = random_weights(&config);
        let exact =
            Encoder::load(&bytes, &config, Precision::F32).unwrap_or_else(|e| panic!("{e}"));
        let texts: Vec<Vec<u32>> = [3usize, 12, 40]
            .iter()
            .map(|&len| (0..len).map(|i| ((i * 11 + len) % 50) as u32).collect())
            .collect();
        let texts: Vec<&[u32]> = texts.iter().map(Vec::as_slice).collect();
        let want = exact
            .embed(&texts, Threads::One)
            .unwrap_or_else(|e| panic!("{e}"));
        let mut kernels = vec![Kernel::Portable];
        kernels.extend(Kernel::detect());
        let mut runs = Vec::new();
        for kernel in kernels {
            let int8 = Encoder::load(&bytes, &config, Precision::Int8(kernel))
                .unwrap_or_else(|e| panic!("{e}"));
            assert!(
                int8.layers
                    .iter()
                    .all(|l| matches!(l.qkv, Linear::Int8(..))
                        && matches!(l.output, Linear::Int8(..))),
                "every linear layer of this shape is quantised"
            );
            for threads in [Threads::One, Threads::Many(2)] {
                let got = int8
                    .embed(&texts, threads)
                    .unwrap_or_else(|e| panic!("{e}"));
                for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                    let cosine: f32 = g.iter().zip(w).map(|(a, b)| a * b).sum();
                    assert!(
                        cosine > 0.999,
                        "{kernel:?} {threads:?} text {i}: cosine {cosine}"
                    );
                }
                runs.push(got);
            }
        }
        // The sums are exact integers: kernels and thread counts agree to the bit.
        assert!(runs.windows(2).all(|p| p[0] == p[1]));
    }

    #[test]
    fn out_of_range_input_is_an_error_not_a_panic() {
        let config = config();
        let encoder = Encoder::load(&random_weights(&config), &config, Precision::F32)
            .unwrap_or_else(|e| panic!("{e}"));
        let err = encoder
            .embed(&[&[3, 50]], Threads::One)
            .err()
            .unwrap_or_default();
        assert!(err.contains("token id 50"), "{err}");
        let long = vec![1u32; 41];
        let err = encoder
            .embed(&[&long], Threads::One)
            .err()
            .unwrap_or_default();
        assert!(err.contains("41 tokens"), "{err}");
        let mut wrong = config.clone();
        wrong.intermediate_size = 65;
        let err = Encoder::load(&random_weights(&config), &wrong, Precision::F32)
            .err()
            .unwrap_or_default();
        assert!(
            err.contains("intermediate.dense.weight") && err.contains("[65, 32]"),
            "{err}"
        );
        assert_eq!(
            encoder.embed(&[&[]], Threads::One).map(|v| v[0].len()),
            Ok(32)
        );
    }
}
