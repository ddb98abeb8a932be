//! Shared helpers: settings pointing at a mock, a delta recorder, sample tools and modes.

use reef_core::{
    Message, ModelClient, ModelError, ModelRequest, ModelResponse, StreamEvent, ToolSpec, WireApi,
};
use reef_llm::{ProviderSettings, build_client};
use reef_test_support::{MockLlm, MockReply};
use serde_json::json;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Every (wire API, streaming) combination.
pub const MODES: [(WireApi, bool); 6] = [
    (WireApi::OpenaiChat, false),
    (WireApi::OpenaiChat, true),
    (WireApi::Anthropic, false),
    (WireApi::Anthropic, true),
    (WireApi::Ollama, false),
    (WireApi::Ollama, true),
];

pub fn settings(mock: &MockLlm, wire_api: WireApi, stream: bool) -> ProviderSettings {
    ProviderSettings {
        name: "mocked".into(),
        wire_api,
        base_url: format!("{}/", mock.base_url()),
        model: "test-model".into(),
        api_key: Some("sk-test-key".into()),
        stream,
        max_retries: 1,
        retry_base: Duration::from_millis(1),
        request_timeout: Duration::from_secs(30),
        max_output_tokens: 1000,
        context_tokens: 16_384,
        local: None,
        sampling: reef_core::Sampling::default(),
    }
}

pub struct Harness {
    pub mock: MockLlm,
    pub client: Arc<dyn ModelClient>,
}

pub async fn harness(wire: WireApi, stream: bool, script: Vec<MockReply>) -> Harness {
    let mock = MockLlm::start(script).await;
    let client = build_client(settings(&mock, wire, stream)).unwrap();
    Harness { mock, client }
}

pub async fn harness_with(
    wire: WireApi,
    stream: bool,
    script: Vec<MockReply>,
    tweak: impl FnOnce(&mut ProviderSettings),
) -> Harness {
    let mock = MockLlm::start(script).await;
    let mut s = settings(&mock, wire, stream);
    tweak(&mut s);
    let client = build_client(s).unwrap();
    Harness { mock, client }
}

/// Runs one request, returning the result and the deltas passed to `on_delta`.
pub async fn run(
    client: &dyn ModelClient,
    request: &ModelRequest,
) -> (Result<ModelResponse, ModelError>, Vec<String>) {
    let deltas = Mutex::new(Vec::new());
    let result = client
        .complete(request, &|event| match event {
            StreamEvent::Text(d) => deltas.lock().unwrap().push(d.to_owned()),
            // A retry voids what the failed attempt streamed.
            StreamEvent::Retrying { .. } => deltas.lock().unwrap().clear(),
        })
        .await;
    (result, deltas.into_inner().unwrap())
}

pub fn user(text: &str) -> ModelRequest {
    ModelRequest {
        messages: vec![Message::system("You are terse."), Message::user(text)],
        tools: Vec::new(),
        max_output_tokens: None,
        ..Default::default()
    }
}

pub fn tools() -> Vec<ToolSpec> {
    vec![
        ToolSpec {
            name: "read_file".into(),
            description: "Read a file".into(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}},
                               "required": ["path"]}),
        },
        ToolSpec {
            name: "shell".into(),
            description: "Run a command".into(),
            parameters: json!({"type": "object", "properties": {"cmd": {"type": "string"}}}),
        },
    ]
}
