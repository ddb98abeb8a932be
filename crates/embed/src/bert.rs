//! The reference BERT encoder of all-MiniLM-L6-v2, built from candle's layers over padded
//! batches: token, position and type embeddings, self-attention layers with GELU feed-forward
//! blocks, then the mean of the token states under the attention mask, scaled to unit length.
//! reef embeds with the fused encoder (`encoder.rs`); this one is what it is checked and
//! measured against.

use candle_core::{DType, Device, Module, Result, Tensor};
use candle_nn::{Embedding, LayerNorm, Linear, VarBuilder, embedding, layer_norm, linear};

/// The `config.json` fields the encoder needs.
#[derive(Clone, Debug, serde::Deserialize)]
pub(crate) struct BertConfig {
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub intermediate_size: usize,
    pub max_position_embeddings: usize,
    pub type_vocab_size: usize,
    #[serde(default = "default_eps")]
    pub layer_norm_eps: f64,
    #[serde(default = "default_act")]
    pub hidden_act: String,
}

fn default_eps() -> f64 {
    1e-12
}

fn default_act() -> String {
    "gelu".to_owned()
}

impl BertConfig {
    /// Whether both encoders can run this config.
    pub(crate) fn check(&self) -> std::result::Result<(), String> {
        if self.hidden_act != "gelu" {
            return Err(format!("hidden_act `{}` is not supported", self.hidden_act));
        }
        if self.num_attention_heads == 0
            || !self.hidden_size.is_multiple_of(self.num_attention_heads)
        {
            return Err("hidden_size is not a multiple of num_attention_heads".into());
        }
        let sizes = [
            ("vocab_size", self.vocab_size),
            ("hidden_size", self.hidden_size),
            ("intermediate_size", self.intermediate_size),
            ("max_position_embeddings", self.max_position_embeddings),
            ("type_vocab_size", self.type_vocab_size),
        ];
        if let Some((field, _)) = sizes.iter().find(|(_, size)| *size == 0) {
            return Err(format!("{field} is 0"));
        }
        Ok(())
    }
}

struct Layer {
    query: Linear,
    key: Linear,
    value: Linear,
    attention_out: Linear,
    attention_norm: LayerNorm,
    intermediate: Linear,
    output: Linear,
    output_norm: LayerNorm,
}

/// The encoder with its weights loaded.
pub(crate) struct Bert {
    words: Embedding,
    positions: Embedding,
    types: Embedding,
    embeddings_norm: LayerNorm,
    layers: Vec<Layer>,
    heads: usize,
    head_dim: usize,
}

impl Bert {
    pub(crate) fn load(vb: VarBuilder<'_>, config: &BertConfig) -> Result<Self> {
        if let Err(message) = config.check() {
            candle_core::bail!("{message}");
        }
        let h = config.hidden_size;
        let eps = config.layer_norm_eps;
        let emb = vb.pp("embeddings");
        let mut layers = Vec::with_capacity(config.num_hidden_layers);
        for i in 0..config.num_hidden_layers {
            let l = vb.pp(format!("encoder.layer.{i}"));
            let attention = l.pp("attention");
            layers.push(Layer {
                query: linear(h, h, attention.pp("self.query"))?,
                key: linear(h, h, attention.pp("self.key"))?,
                value: linear(h, h, attention.pp("self.value"))?,
                attention_out: linear(h, h, attention.pp("output.dense"))?,
                attention_norm: layer_norm(h, eps, attention.pp("output.LayerNorm"))?,
                intermediate: linear(h, config.intermediate_size, l.pp("intermediate.dense"))?,
                output: linear(config.intermediate_size, h, l.pp("output.dense"))?,
                output_norm: layer_norm(h, eps, l.pp("output.LayerNorm"))?,
            });
        }
        Ok(Self {
            words: embedding(config.vocab_size, h, emb.pp("word_embeddings"))?,
            positions: embedding(
                config.max_position_embeddings,
                h,
                emb.pp("position_embeddings"),
            )?,
            types: embedding(config.type_vocab_size, h, emb.pp("token_type_embeddings"))?,
            embeddings_norm: layer_norm(h, eps, emb.pp("LayerNorm"))?,
            layers,
            heads: config.num_attention_heads,
            head_dim: h / config.num_attention_heads,
        })
    }

    /// Sentence vectors for a padded batch: `ids` and `mask` are `[batch, tokens]` (u32, with
    /// mask 1 for real tokens and 0 for padding). Returns `[batch, hidden]`, unit length rows.
    pub(crate) fn embed(&self, ids: &Tensor, mask: &Tensor) -> Result<Tensor> {
        let (batch, tokens) = ids.dims2()?;
        let device = ids.device();
        let position_ids = Tensor::arange(0u32, tokens as u32, device)?
            .unsqueeze(0)?
            .broadcast_as((batch, tokens))?;
        let type_ids = ids.zeros_like()?;
        let mut hidden = self
            .words
            .forward(ids)?
            .add(&self.positions.forward(&position_ids)?)?
            .add(&self.types.forward(&type_ids)?)?;
        hidden = self.embeddings_norm.forward(&hidden)?;
        let mask = mask.to_dtype(DType::F32)?;
        // 0 where attending is allowed, a large negative number on padding.
        let bias = mask.affine(1e4, -1e4)?.reshape((batch, 1, 1, tokens))?;
        for layer in &self.layers {
            hidden = self.layer(layer, &hidden, &bias)?;
        }
        let weights = mask.unsqueeze(2)?;
        let summed = hidden.broadcast_mul(&weights)?.sum(1)?;
        let counts = weights.sum(1)?.clamp(1e-9, f64::MAX)?;
        let mean = summed.broadcast_div(&counts)?;
        let norms = mean.sqr()?.sum_keepdim(1)?.sqrt()?.clamp(1e-12, f64::MAX)?;
        mean.broadcast_div(&norms)
    }

    /// Sentence vectors of texts given as token ids: one batch padded to its longest text
    /// (id 0, masked out).
    pub(crate) fn embed_texts(&self, texts: &[&[u32]]) -> Result<Vec<Vec<f32>>> {
        let longest = texts.iter().map(|t| t.len()).max().unwrap_or(0);
        let mut ids = Vec::with_capacity(texts.len() * longest);
        let mut mask = Vec::with_capacity(texts.len() * longest);
        for text in texts {
            let padding = longest - text.len();
            ids.extend_from_slice(text);
            ids.extend(std::iter::repeat_n(0u32, padding));
            mask.extend(std::iter::repeat_n(1u32, text.len()));
            mask.extend(std::iter::repeat_n(0u32, padding));
        }
        let dev = device();
        let ids = Tensor::from_vec(ids, (texts.len(), longest), &dev)?;
        let mask = Tensor::from_vec(mask, (texts.len(), longest), &dev)?;
        self.embed(&ids, &mask)?.to_vec2::<f32>()
    }

    fn layer(&self, layer: &Layer, hidden: &Tensor, bias: &Tensor) -> Result<Tensor> {
        let (batch, tokens, width) = hidden.dims3()?;
        let split = |t: Tensor| -> Result<Tensor> {
            t.reshape((batch, tokens, self.heads, self.head_dim))?
                .transpose(1, 2)?
                .contiguous()
        };
        let q = split(flat(&layer.query, hidden)?)?;
        let k = split(flat(&layer.key, hidden)?)?;
        let v = split(flat(&layer.value, hidden)?)?;
        let scale = 1.0 / (self.head_dim as f64).sqrt();
        let scores = (q.matmul(&k.t()?.contiguous()?)? * scale)?.broadcast_add(bias)?;
        let probs = candle_nn::ops::softmax_last_dim(&scores)?;
        let context = probs
            .matmul(&v)?
            .transpose(1, 2)?
            .contiguous()?
            .reshape((batch, tokens, width))?;
        let attended = layer
            .attention_norm
            .forward(&flat(&layer.attention_out, &context)?.add(hidden)?)?;
        let inner = flat(&layer.intermediate, &attended)?.gelu_erf()?;
        layer
            .output_norm
            .forward(&flat(&layer.output, &inner)?.add(&attended)?)
    }
}

/// A linear layer over `[batch, tokens, width]` as one `[batch × tokens, width]` matrix
/// product (one large GEMM instead of one per text).
fn flat(linear: &Linear, x: &Tensor) -> Result<Tensor> {
    let (batch, tokens, width) = x.dims3()?;
    let out = linear.forward(&x.reshape((batch * tokens, width))?)?;
    let features = out.dim(1)?;
    out.reshape((batch, tokens, features))
}

/// The CPU device candle runs on.
pub(crate) fn device() -> Device {
    Device::Cpu
}
