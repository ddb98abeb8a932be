//! Discord end to end against the fake gateway and REST API: a DM reaches its own agent and
//! a long answer comes back split at 2,000 characters; operator commands by user id; in a
//! guild the bot hears mentions and replies to itself only; a 429 and an empty bucket are
//! waited out; a restart resumes the session, and so do a RECONNECT and a zombie connection,
//! without losing or repeating a message; a session that cannot be resumed is replaced; a
//! refused token leaves the channel down and the daemon running.

use reef_gateway::{Gateway, conversation_agent};
use reef_runtime::{
    ChannelState, ChannelStatus, HelperCommand, Runtime, RuntimeOptions, Templates,
};
use reef_test_support::discord::{BOT_ID, FakeDiscord, dm_channel};
use reef_test_support::{MockLlm, MockReply, RecordedRequest, Responder, TestHome, sandbox_helper};
use std::sync::Arc;
use std::time::Duration;

const TOKEN: &str = "discord.test.token";
const OPERATOR: (&str, &str) = ("400000000000000042", "op");
const ALICE: (&str, &str) = ("300000000000000001", "alice");
const ROOM: &str = "600000000000000001";

struct Bot {
    runtime: Runtime,
    gateway: Option<Gateway>,
    fake: FakeDiscord,
    mock: MockLlm,
    _home: TestHome,
}

/// A daemon whose `[channels.dc]` is the fake (prepared by `prepare` before it starts); the
/// model answers with `responder`.
async fn bot(responder: Responder, token: &str, prepare: impl FnOnce(&FakeDiscord)) -> Bot {
    let fake = FakeDiscord::start(TOKEN).await;
    prepare(&fake);
    let mock = MockLlm::start_responder(responder).await;
    let home = TestHome::new();
    let token_file = home.path().join("dc-token");
    std::fs::write(&token_file, token).unwrap();
    home.write_config(&format!(
        "[providers.mock]\nbase_url = \"{}\"\nmodel = \"m\"\nstream = false\nmax_retries = 0\n\n\
         [sandbox]\nrequired = true\n\n\
         [secrets.DC_TOKEN]\nfile = \"{}\"\n\n\
         [channels.dc]\ntype = \"discord\"\ntoken_secret = \"DC_TOKEN\"\napi_url = \"{}\"\n\
         route = \"spawn:worker\"\n\n\
         [operators]\ndc = [{}]\n",
        mock.base_url(),
        token_file.display(),
        fake.api_url(),
        OPERATOR.0,
    ));
    let (runtime, _) = Runtime::start(RuntimeOptions {
        config: home.load_config(),
        templates: Templates::builtin().unwrap(),
        helper: Some(HelperCommand {
            program: sandbox_helper(),
            args: Vec::new(),
        }),
        model_override: None,
        clock: None,
    })
    .await
    .unwrap();
    let gateway = Gateway::start(&runtime).await;
    Bot {
        runtime,
        gateway: Some(gateway),
        fake,
        mock,
        _home: home,
    }
}

/// What the person wrote, out of the message the agent got.
fn written(message: &str) -> &str {
    message
        .lines()
        .find(|l| {
            !l.starts_with("[message #")
                && !l.starts_with("<untrusted")
                && !l.starts_with("</untrusted")
        })
        .unwrap_or("")
}

fn echo() -> Responder {
    Arc::new(|req: &RecordedRequest| {
        let said = req.last_user_text().unwrap_or_default();
        MockReply::text(format!("heard {}", written(&said)))
    })
}

impl Bot {
    /// The user texts the model was sent, in order.
    fn heard(&self) -> Vec<String> {
        self.mock
            .requests()
            .iter()
            .filter_map(RecordedRequest::last_user_text)
            .collect()
    }

    fn status(&self) -> Option<ChannelStatus> {
        self.runtime.channels().into_iter().find(|c| c.name == "dc")
    }

    /// Waits until the channel is up on a logged-in connection.
    async fn wait_up(&self) {
        for _ in 0..6000 {
            if self.status().is_some_and(|s| s.state == ChannelState::Up) && self.fake.connected() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("the channel never came up: {:?}", self.runtime.channels());
    }

    /// Each of `texts` reached the model exactly once.
    fn heard_once(&self, texts: &[&str]) {
        for text in texts {
            let times = self.heard().iter().filter(|t| t.contains(text)).count();
            assert_eq!(times, 1, "{text} reached the model {times} times");
        }
    }
}

#[tokio::test]
async fn a_dm_gets_its_own_agent_and_a_long_answer_split_at_2000_characters() {
    let paragraph = |n: usize| format!("Part {n}: **important** {}", "wörd ".repeat(300));
    let long = (1..=4).map(paragraph).collect::<Vec<_>>().join("\n\n");
    let answer = long.clone();
    let b = bot(
        Arc::new(move |_| MockReply::text(answer.clone())),
        TOKEN,
        |_| {},
    )
    .await;
    b.wait_up().await;
    let (channel, _) = b.fake.push_dm(ALICE, "hello there, reef");
    let sent = b.fake.wait_sent(4).await;
    // One agent for the DM channel, named after it; the model heard the person, labelled.
    let agent = conversation_agent("dc", &channel);
    assert!(b.runtime.get_agent(&agent).await.is_ok());
    let heard = b.heard();
    assert!(heard[0].contains("hello there, reef"), "{heard:?}");
    assert!(
        heard[0].contains(&format!("dc:alice~{channel}")),
        "{heard:?}"
    );
    // Each piece fits, pieces break between paragraphs, every word arrived once, and the
    // Markdown is left for Discord to render.
    assert_eq!(sent.len(), 4, "{sent:#?}");
    for (n, piece) in sent.iter().enumerate() {
        assert_eq!(piece.channel_id, channel);
        assert!(piece.content.chars().count() <= 2000);
        assert!(
            piece
                .content
                .starts_with(&format!("Part {}: **important**", n + 1))
        );
        // An agent's words mention nobody.
        assert_eq!(
            piece.body["allowed_mentions"]["parse"],
            serde_json::json!([])
        );
    }
    let words: usize = sent.iter().map(|s| s.content.matches("wörd").count()).sum();
    assert_eq!(words, 1200);
    assert!(b.fake.typing().contains(&channel));
}

#[tokio::test]
async fn operators_run_commands_by_user_id_and_others_are_refused() {
    let b = bot(echo(), TOKEN, |_| {}).await;
    b.wait_up().await;
    b.fake.push_dm(OPERATOR, "!list");
    let sent = b.fake.wait_sent(1).await;
    assert_eq!(sent[0].channel_id, dm_channel(OPERATOR.0));
    assert!(sent[0].content.contains("no agents"), "{}", sent[0].content);
    b.fake.push_dm(ALICE, "!destroy everyone");
    let sent = b.fake.wait_sent(2).await;
    assert_eq!(sent[1].channel_id, dm_channel(ALICE.0));
    assert!(
        sent[1].content.contains("only operators may run commands"),
        "{}",
        sent[1].content
    );
    // In a guild channel, a command goes with a mention.
    b.fake.push_guild(ROOM, OPERATOR, "!status", true);
    let sent = b.fake.wait_sent(3).await;
    assert_eq!(sent[2].channel_id, ROOM);
    assert!(b.heard().is_empty(), "commands never reach a model");
}

#[tokio::test]
async fn in_a_guild_the_bot_hears_mentions_and_replies_to_itself_only() {
    let b = bot(echo(), TOKEN, |_| {}).await;
    b.wait_up().await;
    b.fake
        .push_guild(ROOM, ALICE, "just chatting among ourselves", false);
    b.fake.push_guild(ROOM, ALICE, "what is the weather", true);
    let sent = b.fake.wait_sent(1).await;
    assert_eq!(sent[0].channel_id, ROOM);
    assert_eq!(sent[0].content, "alice: heard what is the weather");
    let bob = ("300000000000000002", "bob");
    b.fake.push_reply(ROOM, ALICE, "bob, lunch?", "1", bob);
    b.fake.push_reply(
        ROOM,
        ALICE,
        "and tomorrow?",
        &sent[0].id,
        (BOT_ID, "reef-test"),
    );
    let sent = b.fake.wait_sent(2).await;
    assert_eq!(sent[1].content, "alice: heard and tomorrow?");
    let heard = b.heard();
    assert_eq!(heard.len(), 2, "{heard:?}");
    assert!(
        !heard
            .iter()
            .any(|t| t.contains("chatting") || t.contains("lunch"))
    );
    assert!(
        b.runtime
            .get_agent(&conversation_agent("dc", ROOM))
            .await
            .is_ok()
    );
}

#[tokio::test]
async fn a_429_and_an_empty_bucket_are_waited_out() {
    let paragraph = |n: usize| format!("Part {n} {}", "x".repeat(1500));
    let long = (1..=4).map(paragraph).collect::<Vec<_>>().join("\n\n");
    let b = bot(
        Arc::new(move |_| MockReply::text(long.clone())),
        TOKEN,
        |fake| {
            // Two posts per channel a second: the four pieces need the bucket to refill.
            fake.set_bucket(2, Duration::from_millis(700));
        },
    )
    .await;
    b.wait_up().await;
    b.fake.limit_next(0.3);
    b.fake.push_dm(ALICE, "ping");
    let sent = b.fake.wait_sent(4).await;
    assert_eq!(sent.len(), 4);
    // The one 429 the fake was told to answer, and none from the bucket: reef read its
    // headers and waited for the refill.
    assert_eq!(b.fake.limits_served(), 1);
    let posts = b
        .fake
        .calls()
        .iter()
        .filter(|(what, _)| what.starts_with("POST /channels/"))
        .count();
    assert_eq!(posts, 5, "four pieces and the retry of the first");
}

#[tokio::test]
async fn a_restart_and_a_reconnect_resume_the_session_without_loss_or_repeats() {
    let mut b = bot(echo(), TOKEN, |_| {}).await;
    b.wait_up().await;
    b.fake.push_dm(ALICE, "message one");
    b.fake.wait_sent(1).await;
    // Stop; messages arrive meanwhile, kept by the session.
    b.gateway.take().unwrap().shutdown().await;
    assert!(!b.fake.connected());
    b.fake.push_dm(ALICE, "message two");
    b.fake.push_dm(ALICE, "message three");
    b.gateway = Some(Gateway::start(&b.runtime).await);
    let sent = b.fake.wait_sent(3).await;
    let texts: Vec<&str> = sent.iter().map(|s| s.content.as_str()).collect();
    assert!(texts.contains(&"heard message two") && texts.contains(&"heard message three"));
    assert_eq!((b.fake.identifies(), b.fake.resumes()), (1, 1));
    // The gateway asks for a reconnect: resumed again.
    b.fake.ask_reconnect();
    b.fake.push_dm(ALICE, "message four");
    b.fake.wait_sent(4).await;
    b.fake
        .wait(|f| f.resumes() == 2 && f.connected(), "the second resume")
        .await;
    // A session the gateway will not resume: a fresh identify.
    b.fake.invalidate_session(false);
    b.fake
        .wait(|f| f.identifies() == 2 && f.connected(), "a new session")
        .await;
    b.fake.push_dm(ALICE, "message five");
    b.fake.wait_sent(5).await;
    b.heard_once(&[
        "message one",
        "message two",
        "message three",
        "message four",
        "message five",
    ]);
    let agent = b
        .runtime
        .get_agent(&conversation_agent("dc", &dm_channel(ALICE.0)))
        .await
        .unwrap();
    let inbox = b
        .runtime
        .store()
        .inbox(&agent.id, reef_store::InboxStatus::Done)
        .await
        .unwrap();
    assert_eq!(inbox.len(), 5);
    let status = b.status().unwrap();
    assert!(
        status.messages_in >= 5 && status.messages_out >= 5,
        "{status:?}"
    );
    assert!(status.reconnects >= 2, "{status:?}");
}

#[tokio::test]
async fn a_zombie_connection_is_dropped_and_resumed() {
    let b = bot(echo(), TOKEN, |fake| fake.set_heartbeat_interval(150)).await;
    b.wait_up().await;
    b.fake.push_dm(ALICE, "before");
    b.fake.wait_sent(1).await;
    // Heartbeats go unanswered: reef gives up on the connection and resumes.
    b.fake.set_acking(false);
    b.fake
        .wait(
            |f| f.closes().contains(&4000),
            "a close after unanswered heartbeats",
        )
        .await;
    b.fake.set_acking(true);
    b.fake.push_dm(ALICE, "after");
    b.fake.wait_sent(2).await;
    b.fake.wait(|f| f.resumes() >= 1, "a resume").await;
    assert_eq!(b.fake.identifies(), 1);
    b.heard_once(&["before", "after"]);
}

#[tokio::test]
async fn a_refused_token_leaves_the_channel_down_and_the_daemon_running() {
    let b = bot(echo(), "wrong.token.value", |_| {}).await;
    let mut down = None;
    for _ in 0..6000 {
        down = b
            .runtime
            .channels()
            .into_iter()
            .find(|c| c.name == "dc" && c.state == ChannelState::Down);
        if down.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let error = down.expect("the channel never went down").error.unwrap();
    assert!(error.contains("refused the bot token"), "{error}");
    assert!(
        !error.contains("wrong.token"),
        "the token is in the error: {error}"
    );
    assert!(b.runtime.list_agents().await.is_ok());
}
