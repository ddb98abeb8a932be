//! The mock LLM HTTP server: routes, request recording, script consumption and shutdown.

use crate::recorded::RecordedRequest;
use crate::reply::{MockReply, RequestFacts, plan};
use crate::{anthropic, ollama, openai};
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use reef_core::WireApi;
use serde_json::{Value, json};
use std::collections::VecDeque;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use tokio::sync::oneshot;

/// The body of the HTTP 500 sent once the script is used up.
pub const EXHAUSTED_BODY: &str = "mock script exhausted";

/// Computes a reply from the request, for scripts that depend on who asks and what the
/// conversation holds (many agents sharing one mock).
pub type Responder = Arc<dyn Fn(&RecordedRequest) -> MockReply + Send + Sync>;

struct ScriptState {
    replies: VecDeque<MockReply>,
    responder: Option<Responder>,
    requests: Vec<RecordedRequest>,
    next_call_id: u64,
    /// Embedding requests of more than one text answered before the rest are held (see
    /// [`MockLlm::hold_embedding_batches_after`]).
    embeddings_open: Option<usize>,
}

impl std::fmt::Debug for ScriptState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptState")
            .field("replies", &self.replies.len())
            .field("responder", &self.responder.is_some())
            .field("requests", &self.requests.len())
            .finish()
    }
}

#[derive(Clone, Debug)]
struct Shared(Arc<Mutex<ScriptState>>);

impl Shared {
    fn new(script: Vec<MockReply>, responder: Option<Responder>) -> Self {
        Shared(Arc::new(Mutex::new(ScriptState {
            replies: script.into(),
            responder,
            requests: Vec::new(),
            next_call_id: 1,
            embeddings_open: None,
        })))
    }

    fn lock(&self) -> MutexGuard<'_, ScriptState> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A scripted LLM server on `127.0.0.1:<random port>`, serving OpenAI chat completions at
/// `POST {base_url}/chat/completions`, Anthropic Messages at `POST {base_url}/messages`, and a
/// static model list at `GET {base_url}/models` (which consumes no scripted reply).
/// The server stops when this value is dropped.
#[derive(Debug)]
pub struct MockLlm {
    addr: SocketAddr,
    state: Shared,
    shutdown: Option<oneshot::Sender<()>>,
}

impl MockLlm {
    /// Starts the server on the current tokio runtime.
    ///
    /// # Panics
    /// When no loopback port can be bound.
    pub async fn start(script: Vec<MockReply>) -> MockLlm {
        Self::start_with(script, None).await
    }

    /// Starts a server that answers every request with `responder(request)` (after any
    /// `script` replies are used up).
    pub async fn start_responder(responder: Responder) -> MockLlm {
        Self::start_with(Vec::new(), Some(responder)).await
    }

    /// [`MockLlm::start_responder`] on its own thread, like [`MockLlm::start_blocking`].
    pub fn start_responder_blocking(responder: Responder) -> MockLlm {
        Self::start_blocking_with(Vec::new(), Some(responder))
    }

    async fn start_with(script: Vec<MockReply>, responder: Option<Responder>) -> MockLlm {
        let listener = match tokio::net::TcpListener::bind("127.0.0.1:0").await {
            Ok(l) => l,
            Err(e) => panic!("mock LLM: cannot bind 127.0.0.1:0: {e}"),
        };
        let addr = match listener.local_addr() {
            Ok(a) => a,
            Err(e) => panic!("mock LLM: no local address: {e}"),
        };
        let state = Shared::new(script, responder);
        let (tx, rx) = oneshot::channel();
        tokio::spawn(serve(listener, state.clone(), rx));
        MockLlm {
            addr,
            state,
            shutdown: Some(tx),
        }
    }

    /// Starts the server on its own thread and runtime, for synchronous tests (e.g. ones
    /// that spawn the `reef` binary). The port is bound before this returns.
    ///
    /// # Panics
    /// When no loopback port can be bound or the server thread cannot start.
    pub fn start_blocking(script: Vec<MockReply>) -> MockLlm {
        Self::start_blocking_with(script, None)
    }

    fn start_blocking_with(script: Vec<MockReply>, responder: Option<Responder>) -> MockLlm {
        let listener = match std::net::TcpListener::bind("127.0.0.1:0") {
            Ok(l) => l,
            Err(e) => panic!("mock LLM: cannot bind 127.0.0.1:0: {e}"),
        };
        let addr = match listener.local_addr() {
            Ok(a) => a,
            Err(e) => panic!("mock LLM: no local address: {e}"),
        };
        if let Err(e) = listener.set_nonblocking(true) {
            panic!("mock LLM: cannot make the listener non-blocking: {e}");
        }
        let state = Shared::new(script, responder);
        let (tx, rx) = oneshot::channel();
        let thread_state = state.clone();
        let spawned = std::thread::Builder::new()
            .name("mock-llm".into())
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => panic!("mock LLM: cannot build a runtime: {e}"),
                };
                runtime.block_on(async move {
                    match tokio::net::TcpListener::from_std(listener) {
                        Ok(listener) => serve(listener, thread_state, rx).await,
                        Err(e) => panic!("mock LLM: cannot adopt the listener: {e}"),
                    }
                });
            });
        if let Err(e) = spawned {
            panic!("mock LLM: cannot spawn the server thread: {e}");
        }
        MockLlm {
            addr,
            state,
            shutdown: Some(tx),
        }
    }

    /// `http://127.0.0.1:PORT/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The socket address the server listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Every request received so far, in order, including failed and unscripted ones.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.state.lock().requests.clone()
    }

    /// Answers `n` more `/embeddings` requests of more than one text (batches, as memory
    /// imports send; a search's single query is always answered), then holds the next ones
    /// unanswered until this is called again (`None`: answer all). A held request is answered
    /// 503 after two minutes.
    pub fn hold_embedding_batches_after(&self, n: Option<usize>) {
        let mut state = self.state.lock();
        let answered = state.requests.iter().filter(|r| is_batch(r)).count();
        state.embeddings_open = n.map(|n| answered + n);
    }

    /// Scripted replies not consumed yet.
    pub fn remaining(&self) -> usize {
        self.state.lock().replies.len()
    }
}

impl Drop for MockLlm {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            // The server may already be gone; nothing to do then.
            let _ = tx.send(());
        }
    }
}

async fn serve(listener: tokio::net::TcpListener, state: Shared, stop: oneshot::Receiver<()>) {
    let app = Router::new().fallback(handle).with_state(state);
    let _ = axum::serve(listener, app)
        .with_graceful_shutdown(async {
            let _ = stop.await;
        })
        .await;
}

async fn handle(State(state): State<Shared>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let bytes = axum::body::to_bytes(body, usize::MAX)
        .await
        .unwrap_or_default();
    let body = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()))
    };
    let headers = parts
        .headers
        .iter()
        .map(|(k, v)| {
            (
                k.as_str().to_ascii_lowercase(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect();
    let recorded = RecordedRequest {
        path: parts.uri.path().to_owned(),
        headers,
        body,
    };
    let path = recorded.path.clone();
    let wire = if parts.method == Method::POST && path.ends_with("/chat/completions") {
        WireApi::OpenaiChat
    } else if parts.method == Method::POST && path.ends_with("/messages") {
        WireApi::Anthropic
    } else if parts.method == Method::POST && path.ends_with("/api/chat") {
        WireApi::Ollama
    } else {
        state.lock().requests.push(recorded);
        return if parts.method == Method::GET && path.ends_with("/api/tags") {
            json_response(json!({"models": [{"name": "mock-model"}]}).to_string())
        } else if parts.method == Method::POST && path.ends_with("/embeddings") {
            let nth = state.lock().requests.iter().filter(|r| is_batch(r)).count();
            let body = state.lock().requests.last().cloned();
            let batch = body.as_ref().is_some_and(is_batch);
            for _ in 0..6000 {
                let open = state.lock().embeddings_open;
                if !batch || open.is_none_or(|open| nth <= open) {
                    return embeddings(body.as_slice());
                }
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
            (StatusCode::SERVICE_UNAVAILABLE, "held").into_response()
        } else if parts.method == Method::GET && path.ends_with("/models") {
            json_response(
                json!({"object": "list", "data": [{"id": "mock-model", "object": "model"}]})
                    .to_string(),
            )
        } else {
            (StatusCode::NOT_FOUND, "no such mock route").into_response()
        };
    };

    let model = recorded
        .body
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or("mock-model")
        .to_owned();
    let stream = recorded.is_stream();
    let include_usage = recorded
        .body
        .pointer("/stream_options/include_usage")
        .and_then(Value::as_bool)
        == Some(true);
    let input_tokens = recorded.prompt_tokens();
    let reply = {
        let mut st = state.lock();
        let reply = match st.replies.pop_front() {
            Some(reply) => Some(reply),
            None => st.responder.clone().map(|f| f(&recorded)),
        };
        st.requests.push(recorded);
        reply
    };
    let Some(mut reply) = reply else {
        return exhausted();
    };
    while let MockReply::Delayed(delay, inner) = reply {
        tokio::time::sleep(delay).await;
        reply = *inner;
    }
    let first_id = {
        let mut st = state.lock();
        let first_id = st.next_call_id;
        st.next_call_id += reply.call_count() as u64;
        first_id
    };
    let facts = RequestFacts {
        model,
        input_tokens,
        id_prefix: match wire {
            // The local wire never reaches an HTTP server; it is grouped with OpenAI's.
            WireApi::OpenaiChat | WireApi::Local => "call_",
            WireApi::Anthropic => "toolu_",
            WireApi::Ollama => "ollama_",
        },
        first_id,
    };
    let action = plan(reply, &facts);
    match wire {
        WireApi::OpenaiChat | WireApi::Local => openai::render(
            action,
            openai::Mode {
                stream,
                include_usage,
            },
        ),
        WireApi::Anthropic => anthropic::render(action, stream),
        WireApi::Ollama => ollama::render(action, stream),
    }
}

/// Whether `request` asks for the embeddings of more than one text.
fn is_batch(request: &RecordedRequest) -> bool {
    request.path.ends_with("/embeddings")
        && request.body["input"]
            .as_array()
            .is_some_and(|a| a.len() > 1)
}

/// An OpenAI-compatible `/embeddings` reply for the last recorded request: each input becomes
/// a bag of its lowercase words hashed into 16 dimensions (unnormalised, in reverse order with
/// explicit indexes, so clients must sort by index).
fn embeddings(requests: &[RecordedRequest]) -> Response {
    let Some(request) = requests.last() else {
        return exhausted();
    };
    let inputs: Vec<String> = match request.body.get("input") {
        Some(Value::String(one)) => vec![one.clone()],
        Some(Value::Array(many)) => many
            .iter()
            .map(|v| v.as_str().unwrap_or_default().to_owned())
            .collect(),
        _ => {
            return (
                StatusCode::BAD_REQUEST,
                "input must be a string or an array",
            )
                .into_response();
        }
    };
    let data: Vec<Value> = inputs
        .iter()
        .enumerate()
        .rev()
        .map(|(index, text)| json!({"object": "embedding", "index": index, "embedding": bag_of_words(text)}))
        .collect();
    json_response(
        json!({"object": "list", "data": data, "model": request.body.get("model"), "usage": {"prompt_tokens": 1, "total_tokens": 1}})
            .to_string(),
    )
}

/// Counts of the text's lowercase words, hashed (FNV-1a) into 16 buckets.
pub fn bag_of_words(text: &str) -> Vec<f32> {
    let mut v = vec![0f32; 16];
    for word in text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in word.to_lowercase().bytes() {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
        v[(h % 16) as usize] += 1.0;
    }
    v
}

/// HTTP 500 "mock script exhausted".
pub(crate) fn exhausted() -> Response {
    (StatusCode::INTERNAL_SERVER_ERROR, EXHAUSTED_BODY).into_response()
}

/// Status 200 with a JSON content type and this exact body.
pub(crate) fn json_response(body: String) -> Response {
    let mut headers = HeaderMap::new();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    (StatusCode::OK, headers, body).into_response()
}

/// Status 200 `text/event-stream`; each string is sent as its own body chunk.
pub(crate) fn sse_response(events: Vec<String>) -> Response {
    let mut headers = HeaderMap::new();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    let chunks = events
        .into_iter()
        .map(|e| Ok::<_, Infallible>(Bytes::from(e)));
    let body = Body::from_stream(futures::stream::iter(chunks));
    (StatusCode::OK, headers, body).into_response()
}

/// An HTTP error with the scripted status, body and optional `Retry-After`.
pub(crate) fn status_response(code: u16, body: String, retry_after: Option<u64>) -> Response {
    let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut headers = HeaderMap::new();
    let content_type = if serde_json::from_str::<Value>(&body).is_ok() {
        "application/json"
    } else {
        "text/plain; charset=utf-8"
    };
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    if let Some(secs) = retry_after {
        headers.insert(header::RETRY_AFTER, HeaderValue::from(secs));
    }
    (status, headers, body).into_response()
}
