//! Telegram end to end against the fake Bot API: a private chat reaches its own agent and the
//! answer comes back split and formatted; operator commands by user id; groups hear mentions
//! and replies only; allowed users, a 429 honoured, photos saved in the workspace; a restart
//! in the middle of a long poll neither loses nor repeats a message; a refused token leaves
//! the channel down and the daemon running.

use reef_gateway::{Gateway, conversation_agent};
use reef_runtime::{ChannelState, HelperCommand, Runtime, RuntimeOptions, Templates};
use reef_test_support::telegram::{BOT_ID, BOT_USERNAME, FakeTelegram};
use reef_test_support::{MockLlm, MockReply, RecordedRequest, Responder, TestHome, sandbox_helper};
use std::sync::Arc;
use std::time::Duration;

const TOKEN: &str = "123456:test-token";
const OPERATOR: i64 = 42;
const ALICE: i64 = 1001;

struct Bot {
    runtime: Runtime,
    gateway: Option<Gateway>,
    fake: FakeTelegram,
    mock: MockLlm,
    _home: TestHome,
}

/// A daemon whose `[channels.tg]` is the fake, with `channel` appended to its table; the
/// model answers with `responder`.
async fn bot(responder: Responder, channel: &str, token: &str) -> Bot {
    let fake = FakeTelegram::start(TOKEN).await;
    let mock = MockLlm::start_responder(responder).await;
    let home = TestHome::new();
    let token_file = home.path().join("tg-token");
    std::fs::write(&token_file, token).unwrap();
    home.write_config(&format!(
        "[providers.mock]\nbase_url = \"{}\"\nmodel = \"m\"\nstream = false\nmax_retries = 0\n\n\
         [sandbox]\nrequired = true\n\n\
         [secrets.TG_TOKEN]\nfile = \"{}\"\n\n\
         [channels.tg]\ntype = \"telegram\"\ntoken_secret = \"TG_TOKEN\"\napi_url = \"{}\"\n\
         route = \"spawn:worker\"\npoll_timeout_secs = 2\n{channel}\n\n\
         [operators]\ntg = [{OPERATOR}]\n",
        mock.base_url(),
        token_file.display(),
        fake.url(),
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

/// What the person wrote, out of the message the agent got: reef's header line and the
/// fence of untrusted text around it taken away.
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
        MockReply::text(format!("**heard** `{}`", written(&said)))
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

    async fn wait_up(&self) {
        for _ in 0..6000 {
            if self
                .runtime
                .channels()
                .iter()
                .any(|c| c.name == "tg" && c.state == ChannelState::Up)
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("the channel never came up: {:?}", self.runtime.channels());
    }
}

#[tokio::test]
async fn a_private_chat_gets_its_own_agent_and_a_long_answer_split_with_entities() {
    let paragraph = |n: usize| format!("Part {n}: **important** {}", "word ".repeat(500));
    let long = (1..=4).map(paragraph).collect::<Vec<_>>().join("\n\n");
    let answer = long.clone();
    let b = bot(
        Arc::new(move |_| MockReply::text(answer.clone())),
        "",
        TOKEN,
    )
    .await;
    b.wait_up().await;
    b.fake
        .push_text(ALICE, (ALICE, "alice"), "hello there, reef");
    let sent = b.fake.wait_sent(4).await;
    // One agent for the chat, named after it; the model heard the person, fenced (not an
    // operator) and labelled with the chat.
    let agent = conversation_agent("tg", &ALICE.to_string());
    assert!(b.runtime.get_agent(&agent).await.is_ok());
    let heard = b.heard();
    assert!(heard[0].contains("hello there, reef"), "{heard:?}");
    assert!(heard[0].contains("tg:alice~1001"), "{heard:?}");
    // Each piece fits, pieces break between paragraphs, and every word arrived once.
    assert!(sent.iter().all(|s| s.chat_id == ALICE));
    assert!(
        sent.iter()
            .all(|s| s.text.chars().map(char::len_utf16).sum::<usize>() <= 4096)
    );
    for (n, piece) in sent.iter().enumerate() {
        assert!(
            piece.text.starts_with(&format!("Part {}", n + 1)),
            "{}",
            piece.text
        );
        // The Markdown is entities, not asterisks.
        assert!(!piece.text.contains("**"));
        assert!(
            piece
                .entities
                .iter()
                .any(|e| e["type"] == "bold" && e["offset"] == 8 && e["length"] == 9),
            "{:?}",
            piece.entities
        );
    }
    let words: usize = sent.iter().map(|s| s.text.matches("word").count()).sum();
    assert_eq!(words, 2000);
    // The bot showed it was typing while the agent worked.
    assert!(
        b.fake
            .actions()
            .iter()
            .any(|(chat, action)| *chat == ALICE && action == "typing")
    );
}

#[tokio::test]
async fn operators_run_commands_by_user_id_and_others_are_refused() {
    let b = bot(echo(), "", TOKEN).await;
    b.wait_up().await;
    b.fake.push_text(OPERATOR, (OPERATOR, "op"), "/list");
    let sent = b.fake.wait_sent(1).await;
    assert_eq!(sent[0].chat_id, OPERATOR);
    assert!(sent[0].text.contains("no agents"), "{}", sent[0].text);
    b.fake
        .push_text(ALICE, (ALICE, "alice"), "/destroy everyone");
    let sent = b.fake.wait_sent(2).await;
    assert_eq!(sent[1].chat_id, ALICE);
    assert!(
        sent[1].text.contains("only operators may run commands"),
        "{}",
        sent[1].text
    );
    // `/start` is not a command: the person's agent gets it.
    b.fake.push_text(ALICE, (ALICE, "alice"), "/start");
    let sent = b.fake.wait_sent(3).await;
    assert_eq!(sent[2].text, "heard /start");
    assert!(b.heard().iter().any(|t| t.contains("/start")));
    let refused = b
        .runtime
        .store()
        .events_after(0, None, 10_000)
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.kind == "operator.refused")
        .count();
    assert_eq!(refused, 1);
}

#[tokio::test]
async fn in_a_group_the_bot_hears_mentions_and_replies_to_itself_only() {
    let b = bot(echo(), "", TOKEN).await;
    b.wait_up().await;
    let group = -100_500;
    b.fake
        .push_text(group, (ALICE, "alice"), "just chatting among ourselves");
    b.fake.push_text(
        group,
        (ALICE, "alice"),
        &format!("@{BOT_USERNAME} what is the weather"),
    );
    let sent = b.fake.wait_sent(1).await;
    assert_eq!(sent[0].chat_id, group);
    assert_eq!(sent[0].text, "alice: heard what is the weather");
    // A reply to one of the bot's messages is addressed too; one to a person is not.
    let to_bot = serde_json::json!({"text": "and tomorrow?", "reply_to_message": {
        "message_id": sent[0].message_id, "date": 1, "chat": {"id": group, "type": "supergroup"},
        "from": {"id": BOT_ID, "is_bot": true, "first_name": "reef"}}});
    let to_bob = serde_json::json!({"text": "bob, lunch?", "reply_to_message": {
        "message_id": 1, "date": 1, "chat": {"id": group, "type": "supergroup"},
        "from": {"id": 3003, "is_bot": false, "first_name": "bob"}}});
    b.fake.push_message(group, (ALICE, "alice"), to_bob);
    b.fake.push_message(group, (ALICE, "alice"), to_bot);
    let sent = b.fake.wait_sent(2).await;
    assert_eq!(sent[1].text, "alice: heard and tomorrow?");
    let heard = b.heard();
    assert_eq!(heard.len(), 2, "{heard:?}");
    assert!(
        !heard
            .iter()
            .any(|t| t.contains("chatting") || t.contains("lunch"))
    );
    // One agent for the group.
    let agent = conversation_agent("tg", &group.to_string());
    assert!(b.runtime.get_agent(&agent).await.is_ok());
}

#[tokio::test]
async fn strangers_are_refused_once_and_a_429_is_waited_out() {
    let b = bot(echo(), "allowed_users = [1001]", TOKEN).await;
    b.wait_up().await;
    let stranger = 2002;
    b.fake.push_text(stranger, (stranger, "eve"), "let me in");
    b.fake.push_text(stranger, (stranger, "eve"), "please");
    b.fake.wait_sent(1).await;
    // The answer to alice meets a 429 first.
    b.fake.limit_next("sendMessage", 1);
    b.fake.push_text(ALICE, (ALICE, "alice"), "ping");
    let sent = b.fake.wait_sent(2).await;
    let refusals: Vec<_> = sent.iter().filter(|s| s.chat_id == stranger).collect();
    assert_eq!(refusals.len(), 1, "{sent:?}");
    assert!(refusals[0].text.contains("only talks with people"));
    let to_alice: Vec<_> = sent.iter().filter(|s| s.chat_id == ALICE).collect();
    assert_eq!(to_alice.len(), 1);
    assert_eq!(to_alice[0].text, "heard ping");
    // The refused call and its retry.
    let attempts = b
        .fake
        .calls()
        .iter()
        .filter(|(m, p)| m == "sendMessage" && p["chat_id"] == ALICE)
        .count();
    assert_eq!(attempts, 2);
    assert!(!b.heard().iter().any(|t| t.contains("let me in")));
}

#[tokio::test]
async fn a_photo_lands_in_the_workspace_and_odd_updates_are_skipped() {
    let b = bot(echo(), "", TOKEN).await;
    b.wait_up().await;
    b.fake
        .push_raw(serde_json::json!({"callback_query": {"id": "1", "data": "x"}}));
    b.fake
        .push_raw(serde_json::json!({"edited_message": {"message_id": 5}}));
    let jpeg = b"\xff\xd8\xff\xe0 not really a jpeg".to_vec();
    b.fake
        .push_photo(ALICE, (ALICE, "alice"), &jpeg, "what is in this picture?");
    b.fake.wait_sent(1).await;
    let heard = b.heard();
    assert_eq!(heard.len(), 1, "{heard:?}");
    assert!(
        heard[0].contains("what is in this picture?"),
        "{}",
        heard[0]
    );
    assert!(
        heard[0].contains("uploads/photo-uphoto1.jpg"),
        "{}",
        heard[0]
    );
    let agent = b
        .runtime
        .get_agent(&conversation_agent("tg", &ALICE.to_string()))
        .await
        .unwrap();
    let saved = std::path::Path::new(&agent.workspace).join("uploads/photo-uphoto1.jpg");
    assert_eq!(std::fs::read(saved).unwrap(), jpeg);
}

#[tokio::test]
async fn a_restart_mid_poll_neither_loses_nor_repeats_a_message() {
    let mut b = bot(echo(), "", TOKEN).await;
    b.wait_up().await;
    let first = b.fake.push_text(ALICE, (ALICE, "alice"), "message one");
    b.fake.wait_sent(1).await;
    // Stop while a long poll is waiting; messages arrive meanwhile.
    b.gateway.take().unwrap().shutdown().await;
    b.fake.push_text(ALICE, (ALICE, "alice"), "message two");
    b.fake.push_text(ALICE, (ALICE, "alice"), "message three");
    b.gateway = Some(Gateway::start(&b.runtime).await);
    let sent = b.fake.wait_sent(3).await;
    let texts: Vec<&str> = sent.iter().map(|s| s.text.as_str()).collect();
    assert!(texts.contains(&"heard message two") && texts.contains(&"heard message three"));
    // As if reef had stopped after handling the first message and before keeping its place:
    // the platform offers it again, and it is not delivered twice.
    b.gateway.take().unwrap().shutdown().await;
    b.runtime
        .store()
        .set_channel_cursor("tg", &first.to_string())
        .await
        .unwrap();
    b.fake.redeliver(first);
    b.gateway = Some(Gateway::start(&b.runtime).await);
    b.fake.push_text(ALICE, (ALICE, "alice"), "message four");
    let sent = b.fake.wait_sent(4).await;
    assert_eq!(sent[3].text, "heard message four");
    for text in [
        "message one",
        "message two",
        "message three",
        "message four",
    ] {
        let times = b.heard().iter().filter(|t| t.contains(text)).count();
        assert_eq!(times, 1, "{text} reached the model {times} times");
    }
    let agent = b
        .runtime
        .get_agent(&conversation_agent("tg", &ALICE.to_string()))
        .await
        .unwrap();
    let inbox = b
        .runtime
        .store()
        .inbox(&agent.id, reef_store::InboxStatus::Done)
        .await
        .unwrap();
    assert_eq!(inbox.len(), 4);
    assert_eq!(b.fake.pending(), 0);
    let status = b
        .runtime
        .channels()
        .into_iter()
        .find(|c| c.name == "tg")
        .unwrap();
    assert!(
        status.messages_in >= 4 && status.messages_out >= 4,
        "{status:?}"
    );
}

#[tokio::test]
async fn a_refused_token_leaves_the_channel_down_and_the_daemon_running() {
    let b = bot(echo(), "", "999:wrong").await;
    let mut down = None;
    for _ in 0..6000 {
        down = b
            .runtime
            .channels()
            .into_iter()
            .find(|c| c.name == "tg" && c.state == ChannelState::Down);
        if down.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let down = down.expect("the channel never went down");
    let error = down.error.unwrap();
    assert!(error.contains("refused the token"), "{error}");
    assert!(
        !error.contains("wrong"),
        "the token is in the error: {error}"
    );
    // The daemon still works.
    assert!(b.runtime.list_agents().await.is_ok());
}
