//! The inference thread: owns one loaded GGUF model and its context, renders prompts with the
//! model's chat template, decodes only what the KV cache does not already hold, and samples a
//! reply (greedy or sampled per the provider, under the tool grammar when tools are offered), streaming text as it comes.
//! It also counts a request's prompt tokens exactly, with the same template and tokenizer.

use crate::error::LocalError;
use crate::sample::Picker;
use crate::template::ChatTemplate;
use crate::{grammar, protocol};
use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::LlamaToken;
use reef_core::{ModelRequest, Sampling, StopReason};
use std::num::NonZeroU32;
use std::path::PathBuf;
use std::sync::OnceLock;
use std::sync::mpsc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc::UnboundedSender;
use tokio::sync::oneshot;

/// Tokens decoded per `llama_decode` call while reading a prompt.
const BATCH: usize = 512;

/// How an engine is loaded.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct EngineSettings {
    pub model_path: PathBuf,
    /// Threads for prompt reading and generation.
    pub threads: u32,
    /// The context window in tokens (prompt plus reply).
    pub context_tokens: u32,
}

/// What one request produced.
#[derive(Clone, Debug)]
pub struct Generation {
    pub text: String,
    pub stop: StopReason,
    /// Tokens of the rendered prompt.
    pub prompt_tokens: u64,
    /// Of those, tokens already in the KV cache from the previous request (not decoded again).
    pub cached_tokens: u64,
    pub output_tokens: u64,
    /// Time spent decoding the uncached part of the prompt.
    pub prompt_time: Duration,
    /// Time spent generating the reply.
    pub generation_time: Duration,
}

/// Messages from the inference thread while a request runs.
#[derive(Debug)]
pub enum EngineEvent {
    Text(String),
    Done(Result<Generation, LocalError>),
}

/// Work for the inference thread, done one job at a time in arrival order.
enum Job {
    /// Generate a reply.
    Generate(GenerateJob),
    /// Count the prompt tokens of a request (render and tokenize; nothing is decoded).
    Count {
        request: ModelRequest,
        reply: oneshot::Sender<Result<u64, LocalError>>,
    },
}

struct GenerateJob {
    request: ModelRequest,
    max_output_tokens: u32,
    sampling: Sampling,
    events: UnboundedSender<EngineEvent>,
}

/// A running inference thread; dropping the last handle ends it.
#[derive(Debug)]
pub struct Engine {
    jobs: mpsc::Sender<Job>,
    pub settings: EngineSettings,
}

impl Engine {
    /// Loads the model on a new thread and waits until it is ready (seconds for large models:
    /// call from a blocking context).
    pub fn start(settings: EngineSettings) -> Result<Engine, LocalError> {
        let (jobs, job_rx) = mpsc::channel::<Job>();
        let (ready_tx, ready_rx) = mpsc::channel::<Result<(), LocalError>>();
        let thread_settings = settings.clone();
        std::thread::Builder::new()
            .name("reef-local-model".into())
            .spawn(move || run(thread_settings, job_rx, ready_tx))
            .map_err(|e| LocalError::Load {
                path: settings.model_path.clone(),
                message: format!("cannot start the inference thread: {e}"),
            })?;
        match ready_rx.recv() {
            Ok(Ok(())) => Ok(Engine { jobs, settings }),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(LocalError::Load {
                path: settings.model_path.clone(),
                message: "the inference thread ended while loading".into(),
            }),
        }
    }

    /// Queues a request; its events arrive on `events`. Requests run one at a time.
    pub fn submit(
        &self,
        request: ModelRequest,
        max_output_tokens: u32,
        sampling: Sampling,
        events: UnboundedSender<EngineEvent>,
    ) -> Result<(), LocalError> {
        self.jobs
            .send(Job::Generate(GenerateJob {
                request,
                max_output_tokens,
                sampling,
                events,
            }))
            .map_err(|_| LocalError::Stopped)
    }

    /// Queues a count of `request`'s prompt tokens (after any generation queued before it);
    /// the result arrives on the returned receiver.
    pub fn count(
        &self,
        request: ModelRequest,
    ) -> Result<oneshot::Receiver<Result<u64, LocalError>>, LocalError> {
        let (reply, receiver) = oneshot::channel();
        self.jobs
            .send(Job::Count { request, reply })
            .map_err(|_| LocalError::Stopped)?;
        Ok(receiver)
    }
}

/// llama.cpp's backend is process-wide state in C (initialised once per process); this mirrors
/// it rather than pretending it can be owned.
fn backend() -> Result<&'static LlamaBackend, LocalError> {
    static BACKEND: OnceLock<Result<LlamaBackend, String>> = OnceLock::new();
    BACKEND
        .get_or_init(|| {
            llama_cpp_2::send_logs_to_tracing(llama_cpp_2::LogOptions::default());
            LlamaBackend::init().map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| LocalError::Backend(e.clone()))
}

fn run(
    settings: EngineSettings,
    jobs: mpsc::Receiver<Job>,
    ready: mpsc::Sender<Result<(), LocalError>>,
) {
    let load_error = |message: String| LocalError::Load {
        path: settings.model_path.clone(),
        message,
    };
    let loaded = backend().and_then(|backend| {
        let model =
            LlamaModel::load_from_file(backend, &settings.model_path, &LlamaModelParams::default())
                .map_err(|e| load_error(format!("not a loadable GGUF model ({e})")))?;
        Ok((backend, model))
    });
    let (backend, model) = match loaded {
        Ok(v) => v,
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    let vocab = model.vocab();
    let piece_text = |t: LlamaToken| {
        vocab
            .text(t)
            .map(|c| c.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    let template = match ChatTemplate::new(
        model
            .chat_template(None)
            .ok()
            .and_then(|t| t.to_string().ok())
            .as_deref(),
        &piece_text(vocab.bos()),
        &piece_text(vocab.eos()),
    ) {
        Ok(t) => t,
        Err(e) => {
            let _ = ready.send(Err(load_error(format!(
                "its chat template does not compile: {e}"
            ))));
            return;
        }
    };
    let threads = i32::try_from(settings.threads.max(1)).unwrap_or(1);
    let params = LlamaContextParams::default()
        .with_n_ctx(NonZeroU32::new(settings.context_tokens.max(256)))
        .with_n_batch(BATCH as u32)
        .with_n_threads(threads)
        .with_n_threads_batch(threads);
    let mut ctx = match model.new_context(backend, params) {
        Ok(ctx) => ctx,
        Err(e) => {
            let _ = ready.send(Err(load_error(format!("cannot create a context ({e})"))));
            return;
        }
    };
    let _ = ready.send(Ok(()));
    let mut session = Session {
        model: &model,
        template,
        cached: Vec::new(),
        batch: LlamaBatch::new(BATCH, 1),
    };
    while let Ok(job) = jobs.recv() {
        match job {
            Job::Generate(job) => {
                if job.events.is_closed() {
                    // Cancelled while it waited for its turn.
                    continue;
                }
                let result = session.generate(&mut ctx, &job);
                if result.is_err() {
                    // A failed decode may leave the cache in any state: start clean next time.
                    session.cached.clear();
                    ctx.clear_kv_cache();
                }
                let _ = job.events.send(EngineEvent::Done(result));
            }
            Job::Count { request, reply } => {
                if reply.is_closed() {
                    continue;
                }
                let count = session.prompt_tokens(&request).map(|t| t.len() as u64);
                let _ = reply.send(count);
            }
        }
    }
}

/// The model, its template, and what the context's KV cache holds (sequence 0).
struct Session<'m> {
    model: &'m LlamaModel,
    template: ChatTemplate,
    cached: Vec<LlamaToken>,
    batch: LlamaBatch<'static>,
}

impl Session<'_> {
    /// The prompt tokens of `request`: rendered with the chat template and its tools, then
    /// tokenized (special tokens parsed, no BOS added: the template writes its own). Exactly
    /// what `generate` feeds the model.
    fn prompt_tokens(&self, request: &ModelRequest) -> Result<Vec<LlamaToken>, LocalError> {
        let prompt = self
            .template
            .render(&request.messages, &request.tools)
            .map_err(|e| LocalError::Template(e.to_string()))?;
        tracing::trace!(%prompt, "rendered prompt");
        let tokens = self.model.vocab().tokenize(prompt.as_bytes(), false, true);
        if tokens.is_empty() {
            return Err(LocalError::Template(
                "the chat template rendered an empty prompt".into(),
            ));
        }
        Ok(tokens)
    }

    fn generate(
        &mut self,
        ctx: &mut LlamaContext<'_>,
        job: &GenerateJob,
    ) -> Result<Generation, LocalError> {
        let tokens = self.prompt_tokens(&job.request)?;
        let n_ctx = ctx.n_ctx() as usize;
        if tokens.len() >= n_ctx {
            return Err(LocalError::ContextLength {
                prompt_tokens: tokens.len(),
                context_tokens: n_ctx,
            });
        }
        let started = Instant::now();
        let (reused, last_index) = self.read_prompt(ctx, &tokens)?;
        let prompt_time = started.elapsed();
        let started = Instant::now();
        let (text, stop, output_tokens) = self.sample_reply(ctx, job, last_index)?;
        Ok(Generation {
            text,
            stop,
            prompt_tokens: tokens.len() as u64,
            cached_tokens: reused as u64,
            output_tokens,
            prompt_time,
            generation_time: started.elapsed(),
        })
    }

    /// Puts `tokens` in the KV cache, keeping the prefix it already holds (at least the last
    /// token is decoded, for its logits). Returns the reused count and the batch index of the
    /// last token's logits.
    fn read_prompt(
        &mut self,
        ctx: &mut LlamaContext<'_>,
        tokens: &[LlamaToken],
    ) -> Result<(usize, i32), LocalError> {
        let mut reuse = self
            .cached
            .iter()
            .zip(tokens)
            .take_while(|(a, b)| a == b)
            .count();
        if reuse == tokens.len() {
            reuse -= 1;
        }
        let _ = ctx.clear_kv_cache_seq(Some(0), Some(reuse as u32), None);
        self.cached.truncate(reuse);
        let mut last_index = 0;
        for (chunk_start, chunk) in tokens[reuse..]
            .chunks(BATCH)
            .enumerate()
            .map(|(i, c)| (reuse + i * BATCH, c))
        {
            self.batch.clear();
            for (offset, token) in chunk.iter().enumerate() {
                let pos = chunk_start + offset;
                let last = pos + 1 == tokens.len();
                self.batch
                    .add(*token, pos as i32, &[0], last)
                    .map_err(|e| LocalError::Decode(e.to_string()))?;
            }
            ctx.decode(&mut self.batch)
                .map_err(|e| LocalError::Decode(e.to_string()))?;
            self.cached.extend_from_slice(chunk);
            last_index = self.batch.n_tokens() - 1;
        }
        Ok((reuse, last_index))
    }

    /// Generates the reply after the prompt (under the tool grammar when tools are offered),
    /// streaming its text; returns the text, why it stopped and the tokens generated.
    fn sample_reply(
        &mut self,
        ctx: &mut LlamaContext<'_>,
        job: &GenerateJob,
        mut last_index: i32,
    ) -> Result<(String, StopReason, u64), LocalError> {
        let n_ctx = ctx.n_ctx() as usize;
        let mut grammar =
            match grammar::for_tools(
                &job.request.tools,
                job.request.tool_choice,
                job.request.one_call,
            ) {
                Some(g) => Some(LlamaSampler::grammar(self.model, &g, "root").map_err(|e| {
                    LocalError::Template(format!("the tool grammar was refused: {e}"))
                })?),
                None => None,
            };
        let mut picker = Picker::new(&job.sampling, self.model.n_vocab());
        let mut text = String::new();
        let mut pending_bytes: Vec<u8> = Vec::new();
        let mut output_tokens = 0u64;
        let mut streaming = None::<bool>;
        let stop = loop {
            if output_tokens >= u64::from(job.max_output_tokens) || self.cached.len() >= n_ctx {
                break StopReason::MaxTokens;
            }
            let token = picker.pick(ctx, last_index, grammar.as_mut());
            if self.model.vocab().is_eog(token) {
                break StopReason::EndTurn;
            }
            if let Some(g) = grammar.as_mut() {
                g.accept(token);
            }
            picker.accept(token);
            output_tokens += 1;
            pending_bytes.extend(self.model.vocab().token_to_piece(token, true, None));
            let piece = take_utf8(&mut pending_bytes);
            if !piece.is_empty() {
                text.push_str(&piece);
                // A reply that opens with a call is not shown as text while it is generated.
                let stream = *streaming.get_or_insert_with(|| !text.trim_start().starts_with('<'));
                if stream && job.events.send(EngineEvent::Text(piece)).is_err() {
                    return Err(LocalError::Cancelled);
                }
            }
            if job.events.is_closed() {
                return Err(LocalError::Cancelled);
            }
            self.batch.clear();
            self.batch
                .add(token, self.cached.len() as i32, &[0], true)
                .map_err(|e| LocalError::Decode(e.to_string()))?;
            ctx.decode(&mut self.batch)
                .map_err(|e| LocalError::Decode(e.to_string()))?;
            self.cached.push(token);
            last_index = 0;
        };
        text.push_str(&String::from_utf8_lossy(&pending_bytes));
        let stop = match stop {
            StopReason::EndTurn if text.contains(protocol::CALL_OPEN) => StopReason::ToolUse,
            other => other,
        };
        Ok((text, stop, output_tokens))
    }
}

/// The longest valid UTF-8 prefix of `bytes` (removed from it); an incomplete character at the
/// end stays for the next token, invalid bytes become U+FFFD.
fn take_utf8(bytes: &mut Vec<u8>) -> String {
    match std::str::from_utf8(bytes) {
        Ok(s) => {
            let s = s.to_owned();
            bytes.clear();
            s
        }
        Err(e) if e.error_len().is_none() => {
            let valid = e.valid_up_to();
            let rest = bytes.split_off(valid);
            let s = String::from_utf8_lossy(bytes).into_owned();
            *bytes = rest;
            s
        }
        Err(_) => {
            let s = String::from_utf8_lossy(bytes).into_owned();
            bytes.clear();
            s
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utf8_split_across_tokens_is_held_back() {
        let euro = "€".as_bytes();
        let mut buf = vec![b'a', euro[0], euro[1]];
        assert_eq!(take_utf8(&mut buf), "a");
        buf.push(euro[2]);
        assert_eq!(take_utf8(&mut buf), "€");
        assert!(buf.is_empty());
        let mut bad = vec![0xff, b'b'];
        assert_eq!(take_utf8(&mut bad), "\u{fffd}b");
    }
}
