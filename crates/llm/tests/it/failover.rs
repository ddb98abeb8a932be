//! Failover chains against two mock providers: retryable failures move on (and cool the
//! provider down), non-retryable ones do not, and the response names who served it.

use crate::common::{run, settings, user};
use reef_core::{ModelClient, ModelErrorKind, WireApi};
use reef_llm::{FailoverClient, ProviderSettings, build_client};
use reef_test_support::{MockLlm, MockReply};
use std::sync::Arc;
use std::time::Duration;

fn member(
    mock: &MockLlm,
    name: &str,
    stream: bool,
    tweak: impl FnOnce(&mut ProviderSettings),
) -> Arc<dyn ModelClient> {
    let mut s = settings(mock, WireApi::OpenaiChat, stream);
    s.name = name.into();
    s.max_retries = 0;
    tweak(&mut s);
    build_client(s).unwrap()
}

async fn chain(
    main: Vec<MockReply>,
    backup: Vec<MockReply>,
    stream: bool,
    tweak: impl FnOnce(&mut ProviderSettings),
) -> (MockLlm, MockLlm, FailoverClient) {
    let (m, b) = (MockLlm::start(main).await, MockLlm::start(backup).await);
    let client = FailoverClient::new(
        vec![
            member(&m, "main", stream, tweak),
            member(&b, "backup", stream, |_| {}),
        ],
        Duration::from_secs(60),
    );
    (m, b, client)
}

#[tokio::test]
async fn the_window_is_the_smallest_members() {
    let (_main, _backup, client) = chain(Vec::new(), Vec::new(), false, |s| {
        s.context_tokens = 4096;
    })
    .await;
    assert_eq!(client.context_tokens(), Some(4096));
    let empty = FailoverClient::new(Vec::new(), Duration::from_secs(1));
    assert_eq!(empty.context_tokens(), None);
}

#[tokio::test]
async fn a_429_moves_to_the_backup_which_is_named_as_the_server() {
    let (main, backup, client) = chain(
        vec![MockReply::status(429, "slow down")],
        vec![MockReply::text("from backup")],
        false,
        |_| {},
    )
    .await;
    assert_eq!(client.provider(), "main>backup");
    let (result, _) = run(&client, &user("hi")).await;
    let response = result.unwrap();
    assert_eq!(response.content, "from backup");
    assert_eq!(response.served_by.as_deref(), Some("backup"));
    assert_eq!((main.requests().len(), backup.requests().len()), (1, 1));
}

#[tokio::test]
async fn a_5xx_storm_is_retried_on_the_provider_then_failed_over() {
    let (main, backup, client) = chain(
        vec![
            MockReply::status(500, "a"),
            MockReply::status(502, "b"),
            MockReply::status(503, "c"),
        ],
        vec![MockReply::text("steady")],
        false,
        |s| {
            s.max_retries = 2;
            s.retry_base = Duration::from_millis(1);
        },
    )
    .await;
    let (result, _) = run(&client, &user("hi")).await;
    assert_eq!(result.unwrap().content, "steady");
    assert_eq!(
        main.requests().len(),
        3,
        "the provider's own retries come first"
    );
    assert_eq!(backup.requests().len(), 1);
}

#[tokio::test]
async fn a_timeout_fails_over() {
    let (_main, backup, client) = chain(
        vec![MockReply::Delayed(
            Duration::from_secs(5),
            Box::new(MockReply::text("too late")),
        )],
        vec![MockReply::text("in time")],
        false,
        |s| s.request_timeout = Duration::from_millis(200),
    )
    .await;
    let (result, _) = run(&client, &user("hi")).await;
    let response = result.unwrap();
    assert_eq!(
        (response.content.as_str(), response.served_by.as_deref()),
        ("in time", Some("backup"))
    );
    assert_eq!(backup.requests().len(), 1);
}

#[tokio::test]
async fn a_401_is_not_failed_over() {
    let (_main, backup, client) = chain(
        vec![MockReply::status(401, "bad key")],
        vec![MockReply::text("never")],
        false,
        |_| {},
    )
    .await;
    let (result, _) = run(&client, &user("hi")).await;
    let err = result.unwrap_err();
    assert_eq!(err.kind, ModelErrorKind::Auth);
    assert_eq!(err.provider, "main");
    assert!(
        backup.requests().is_empty(),
        "an auth error must surface, not be hidden"
    );
}

#[tokio::test]
async fn a_stream_cut_mid_way_fails_over_and_voids_the_partial_text() {
    let (_main, backup, client) = chain(
        vec![MockReply::StreamCut("half an ans".into())],
        vec![MockReply::text("a whole answer")],
        true,
        |_| {},
    )
    .await;
    let (result, deltas) = run(&client, &user("hi")).await;
    assert_eq!(result.unwrap().content, "a whole answer");
    assert_eq!(
        deltas.concat(),
        "a whole answer",
        "the cut stream's text was discarded"
    );
    assert_eq!(backup.requests().len(), 1);
}

#[tokio::test]
async fn a_failed_provider_cools_down_and_is_skipped_then_used_when_nothing_else_works() {
    let (main, backup, client) = chain(
        vec![
            MockReply::status(503, "down"),
            MockReply::text("main is back"),
        ],
        vec![
            MockReply::text("one"),
            MockReply::text("two"),
            MockReply::status(503, "down too"),
        ],
        false,
        |_| {},
    )
    .await;
    assert_eq!(run(&client, &user("1")).await.0.unwrap().content, "one");
    assert_eq!(run(&client, &user("2")).await.0.unwrap().content, "two");
    assert_eq!(
        main.requests().len(),
        1,
        "main is cooling down: not asked again"
    );
    // The backup fails too: the cooling main is still tried rather than refusing.
    let third = run(&client, &user("3")).await.0.unwrap();
    assert_eq!(
        (third.content.as_str(), third.served_by.as_deref()),
        ("main is back", Some("main"))
    );
    assert_eq!((main.requests().len(), backup.requests().len()), (2, 3));
}
