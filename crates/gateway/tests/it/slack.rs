//! Slack in Socket Mode end to end against the fake Web API and Socket Mode endpoint: a DM
//! reaches its own agent and a long answer comes back split, as mrkdwn with markup escaped;
//! operator commands by user id; in a channel the bot hears mentions (once, though Slack
//! sends them twice) and its own threads, each thread a conversation answered in place; a
//! 429 is waited out; a restart and a `disconnect` neither lose nor repeat a message; a
//! refused token leaves the channel down and the daemon running.

use reef_gateway::{Gateway, conversation_agent};
use reef_runtime::{
    ChannelState, ChannelStatus, HelperCommand, Runtime, RuntimeOptions, Templates,
};
use reef_test_support::slack::FakeSlack;
use reef_test_support::{MockLlm, MockReply, RecordedRequest, Responder, TestHome, sandbox_helper};
use std::sync::Arc;
use std::time::Duration;

const BOT_TOKEN: &str = "xoxb-test-bot";
const APP_TOKEN: &str = "xapp-test-app";
const OPERATOR: &str = "U0OPERATOR";
const ALICE: &str = "U0ALICE";
const DM: &str = "D0ALICE";
const ROOM: &str = "C0GENERAL";

struct Bot {
    runtime: Runtime,
    gateway: Option<Gateway>,
    fake: FakeSlack,
    mock: MockLlm,
    _home: TestHome,
}

/// A daemon whose `[channels.sl]` is the fake, its bot token `bot_token`.
async fn bot(responder: Responder, bot_token: &str) -> Bot {
    let fake = FakeSlack::start(BOT_TOKEN, APP_TOKEN).await;
    let mock = MockLlm::start_responder(responder).await;
    let home = TestHome::new();
    let secret = |name: &str, value: &str| {
        let file = home.path().join(name);
        std::fs::write(&file, value).unwrap();
        format!("[secrets.{name}]\nfile = \"{}\"\n\n", file.display())
    };
    home.write_config(&format!(
        "[providers.mock]\nbase_url = \"{}\"\nmodel = \"m\"\nstream = false\nmax_retries = 0\n\n\
         [sandbox]\nrequired = true\n\n{}{}\
         [channels.sl]\ntype = \"slack\"\nbot_token_secret = \"SLACK_BOT\"\n\
         app_token_secret = \"SLACK_APP\"\napi_url = \"{}\"\nroute = \"spawn:worker\"\n\n\
         [operators]\nsl = [\"{OPERATOR}\"]\n",
        mock.base_url(),
        secret("SLACK_BOT", bot_token),
        secret("SLACK_APP", APP_TOKEN),
        fake.api_url(),
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
    fn heard(&self) -> Vec<String> {
        self.mock
            .requests()
            .iter()
            .filter_map(RecordedRequest::last_user_text)
            .collect()
    }

    fn status(&self) -> Option<ChannelStatus> {
        self.runtime.channels().into_iter().find(|c| c.name == "sl")
    }

    async fn wait_up(&self) {
        for _ in 0..6000 {
            if self.status().is_some_and(|s| s.state == ChannelState::Up) && self.fake.connected() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("the channel never came up: {:?}", self.runtime.channels());
    }

    fn heard_once(&self, texts: &[&str]) {
        for text in texts {
            let times = self.heard().iter().filter(|t| t.contains(text)).count();
            assert_eq!(times, 1, "{text} reached the model {times} times");
        }
    }
}

#[tokio::test]
async fn a_dm_gets_its_own_agent_and_a_long_answer_split_as_escaped_mrkdwn() {
    let paragraph =
        |n: usize| format!("Part {n}: **important** <!channel> {}", "word ".repeat(700));
    let long = (1..=3).map(paragraph).collect::<Vec<_>>().join("\n\n");
    let b = bot(Arc::new(move |_| MockReply::text(long.clone())), BOT_TOKEN).await;
    b.wait_up().await;
    b.fake.push_dm(DM, ALICE, "hello there, reef &amp; friends");
    let posted = b.fake.wait_posted(3).await;
    let agent = conversation_agent("sl", DM);
    assert!(b.runtime.get_agent(&agent).await.is_ok());
    let heard = b.heard();
    // Slack's escapes are undone for the model.
    assert!(
        heard[0].contains("hello there, reef & friends"),
        "{heard:?}"
    );
    assert_eq!(posted.len(), 3, "{posted:#?}");
    for (n, piece) in posted.iter().enumerate() {
        assert_eq!(piece.channel, DM);
        assert_eq!(piece.thread_ts, None, "a DM is answered in place");
        assert!(piece.text.chars().count() <= 4000);
        assert!(
            piece
                .text
                .starts_with(&format!("Part {}: *important* &lt;!channel&gt;", n + 1)),
            "{}",
            &piece.text[..60]
        );
        assert_eq!(piece.body["unfurl_links"], false);
    }
    let words: usize = posted.iter().map(|p| p.text.matches("word").count()).sum();
    assert_eq!(words, 2100);
    // Every envelope was acknowledged.
    b.fake
        .wait(|f| f.pending() == 0, "every envelope acknowledged")
        .await;
}

#[tokio::test]
async fn operators_run_commands_by_user_id_and_others_are_refused() {
    let b = bot(echo(), BOT_TOKEN).await;
    b.wait_up().await;
    b.fake.push_dm("D0OP", OPERATOR, "!list");
    let posted = b.fake.wait_posted(1).await;
    assert_eq!(posted[0].channel, "D0OP");
    assert!(posted[0].text.contains("no agents"), "{}", posted[0].text);
    b.fake.push_dm(DM, ALICE, "!destroy everyone");
    let posted = b.fake.wait_posted(2).await;
    assert_eq!(posted[1].channel, DM);
    assert!(
        posted[1].text.contains("only operators may run commands"),
        "{}",
        posted[1].text
    );
    assert!(b.heard().is_empty(), "commands never reach a model");
}

#[tokio::test]
async fn in_a_channel_mentions_and_the_bots_threads_are_heard_once_each() {
    let b = bot(echo(), BOT_TOKEN).await;
    b.wait_up().await;
    b.fake
        .push_channel(ROOM, ALICE, "just chatting among ourselves", false, None);
    // Slack sends a mention twice (message and app_mention): one answer, in its thread.
    let asked = b
        .fake
        .push_channel(ROOM, ALICE, "what is the weather", true, None);
    let posted = b.fake.wait_posted(1).await;
    assert_eq!(posted[0].channel, ROOM);
    assert_eq!(posted[0].thread_ts.as_deref(), Some(asked.as_str()));
    assert_eq!(posted[0].text, "U0ALICE: heard what is the weather");
    // In that thread the bot hears what follows without a mention; elsewhere it does not.
    b.fake
        .push_channel(ROOM, ALICE, "and tomorrow?", false, Some(&asked));
    let posted = b.fake.wait_posted(2).await;
    assert_eq!(posted[1].thread_ts.as_deref(), Some(asked.as_str()));
    assert_eq!(posted[1].text, "U0ALICE: heard and tomorrow?");
    b.fake
        .push_channel(ROOM, ALICE, "bob, lunch?", false, Some("1700000000.999999"));
    // Each thread is its own conversation: a new mention, a new agent.
    let other = b.fake.push_channel(ROOM, ALICE, "second topic", true, None);
    let posted = b.fake.wait_posted(3).await;
    assert_eq!(posted[2].thread_ts.as_deref(), Some(other.as_str()));
    b.heard_once(&["what is the weather", "and tomorrow?", "second topic"]);
    assert!(
        !b.heard()
            .iter()
            .any(|t| t.contains("chatting") || t.contains("lunch"))
    );
    for thread in [&asked, &other] {
        let agent = conversation_agent("sl", &format!("{ROOM}/{thread}"));
        assert!(b.runtime.get_agent(&agent).await.is_ok(), "{agent}");
    }
}

#[tokio::test]
async fn a_429_is_waited_out() {
    let b = bot(echo(), BOT_TOKEN).await;
    b.wait_up().await;
    b.fake.limit_next("chat.postMessage", 1);
    b.fake.push_dm(DM, ALICE, "ping");
    let posted = b.fake.wait_posted(1).await;
    assert_eq!(posted[0].text, "heard ping");
    let posts = b
        .fake
        .calls()
        .iter()
        .filter(|(m, _)| m == "chat.postMessage")
        .count();
    assert_eq!(posts, 2, "the limited post and its retry");
}

#[tokio::test]
async fn a_restart_and_a_disconnect_neither_lose_nor_repeat_a_message() {
    let mut b = bot(echo(), BOT_TOKEN).await;
    b.wait_up().await;
    b.fake.push_dm(DM, ALICE, "message one");
    b.fake.wait_posted(1).await;
    b.gateway.take().unwrap().shutdown().await;
    b.fake
        .wait(|f| !f.connected(), "the connection closed")
        .await;
    b.fake.push_dm(DM, ALICE, "message two");
    b.fake.push_dm(DM, ALICE, "message three");
    b.gateway = Some(Gateway::start(&b.runtime).await);
    let posted = b.fake.wait_posted(3).await;
    let texts: Vec<&str> = posted.iter().map(|p| p.text.as_str()).collect();
    assert!(texts.contains(&"heard message two") && texts.contains(&"heard message three"));
    // Slack refreshes the connection: reef opens a new one.
    b.fake.disconnect("refresh_requested");
    b.fake
        .wait(|f| f.opens() == 3 && f.connected(), "a new connection")
        .await;
    b.fake.push_dm(DM, ALICE, "message four");
    b.fake.wait_posted(4).await;
    b.heard_once(&[
        "message one",
        "message two",
        "message three",
        "message four",
    ]);
    let agent = b
        .runtime
        .get_agent(&conversation_agent("sl", DM))
        .await
        .unwrap();
    let inbox = b
        .runtime
        .store()
        .inbox(&agent.id, reef_store::InboxStatus::Done)
        .await
        .unwrap();
    assert_eq!(inbox.len(), 4);
    b.fake
        .wait(|f| f.pending() == 0, "every envelope acknowledged")
        .await;
    let status = b.status().unwrap();
    assert!(
        status.messages_in >= 4 && status.messages_out >= 4,
        "{status:?}"
    );
    assert!(status.reconnects >= 1, "{status:?}");
}

#[tokio::test]
async fn a_refused_token_leaves_the_channel_down_and_the_daemon_running() {
    let b = bot(echo(), "xoxb-wrong-token").await;
    let mut down = None;
    for _ in 0..6000 {
        down = b
            .runtime
            .channels()
            .into_iter()
            .find(|c| c.name == "sl" && c.state == ChannelState::Down);
        if down.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let error = down.expect("the channel never went down").error.unwrap();
    assert!(
        error.contains("Slack refused the token (invalid_auth)"),
        "{error}"
    );
    assert!(
        !error.contains("wrong"),
        "the token is in the error: {error}"
    );
    assert!(b.runtime.list_agents().await.is_ok());
}
