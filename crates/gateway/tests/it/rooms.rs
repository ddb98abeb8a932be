//! Agents in `#agents`: they answer when named or messaged directly, two agents stop
//! answering each other by the cooldown rule, a `spawn:` route gives each person an agent,
//! and a server that dies and comes back finds everyone again.

use crate::support::daemon;
use reef_store::InboxStatus;
use reef_test_support::{MockReply, Responder};
use std::sync::Arc;
use std::time::Duration;

fn echo() -> Responder {
    Arc::new(|req| {
        let text = req.last_user_text().unwrap_or_default();
        // The message's last line, inside the fence that marks it as someone else's.
        let body = text
            .lines()
            .rfind(|l| !l.starts_with("</untrusted"))
            .unwrap_or_default()
            .to_owned();
        MockReply::text(format!("{} heard: {body}", req.agent()))
    })
}

#[tokio::test]
async fn an_agent_answers_when_named_in_the_room_or_messaged_directly_and_not_otherwise() {
    let d = daemon(echo(), "", "").await;
    let rt = &d.runtime;
    rt.operate("invoke ada worker", "test").await;
    let mut bob = d.person("bob", &["#agents"]).await;
    d.wait_for(&mut bob, "ada", "#agents").await;

    bob.say("#agents", "nobody in particular: hello").await;
    bob.say("#agents", "ada, what is 2+2?").await;
    let answer = bob.expect_message("ada", "#agents", "heard").await;
    assert_eq!(answer, "bob: ada heard: ada, what is 2+2?");
    // Only the named line reached the model, labelled with where it came from.
    let sent = d.mock.requests();
    assert_eq!(sent.len(), 1);
    let input = sent[0].last_user_text().unwrap();
    assert!(input.contains("from irc:bob@#agents"), "{input}");
    // Bob is not an operator: his words arrive fenced, labelled as a channel's.
    assert!(
        input.contains("<untrusted source=\"channel irc:bob@#agents\" id=\"")
            && input.contains(">\nada, what is 2+2?\n</untrusted id=\""),
        "{input}"
    );

    bob.say("ada", "a private word").await;
    let private = bob.expect_message("ada", "bob", "heard").await;
    assert_eq!(private, "ada heard: a private word");
    let done = rt
        .store()
        .inbox(&rt.get_agent("ada").await.unwrap().id, InboxStatus::Done)
        .await
        .unwrap();
    assert_eq!(done.len(), 2, "{done:?}");
}

#[tokio::test]
async fn two_agents_addressing_each_other_stop_by_the_cooldown_not_a_budget() {
    // Each agent answers by naming the other.
    let chatty: Responder = Arc::new(|req| {
        let other = if req.agent() == "ada" { "bea" } else { "ada" };
        MockReply::text(format!("{other}: your turn"))
    });
    let d = daemon(chatty, "", "").await;
    let rt = &d.runtime;
    rt.operate("invoke ada worker", "test").await;
    rt.operate("invoke bea worker", "test").await;
    let mut bob = d.person("bob", &["#agents"]).await;
    d.wait_for(&mut bob, "ada", "#agents").await;
    d.wait_for(&mut bob, "bea", "#agents").await;

    bob.say("#agents", "ada: start a conversation").await;
    // ada names bea (bea's message passes), bea names ada back: held by the cooldown.
    let from_ada = bob.expect_message("ada", "#agents", "bea: your turn").await;
    assert_eq!(from_ada, "bob: bea: your turn");
    let from_bea = bob.expect_message("bea", "#agents", "your turn").await;
    assert_eq!(from_bea, "ada: your turn");
    let held = d.wait_event("channel.cooldown", |_| true).await;
    assert_eq!(
        (held.data["from"].as_str(), held.data["to"].as_str()),
        (Some("bea"), Some("ada"))
    );
    // ada read only bob's message, bea only ada's: two model calls in all, both agents still
    // running with their budgets untouched.
    let ada = rt.get_agent("ada").await.unwrap();
    let bea = rt.get_agent("bea").await.unwrap();
    let inbox = |id| async move {
        let mut all = rt.store().inbox(id, InboxStatus::Done).await.unwrap();
        all.extend(rt.store().inbox(id, InboxStatus::Pending).await.unwrap());
        all.extend(rt.store().inbox(id, InboxStatus::Processing).await.unwrap());
        all
    };
    let ada_inbox = inbox(&ada.id).await;
    assert_eq!(ada_inbox.len(), 1, "{ada_inbox:?}");
    assert_eq!(ada_inbox[0].sender, "irc:bob@#agents");
    let bea_inbox = inbox(&bea.id).await;
    assert_eq!(bea_inbox.len(), 1, "{bea_inbox:?}");
    assert_eq!(bea_inbox[0].sender, "irc:ada@#agents");
    assert_eq!(d.mock.requests().len(), 2);
    assert!(!d.events().await.iter().any(|e| e.kind == "budget.exceeded"));
}

#[tokio::test]
async fn a_spawn_route_gives_each_person_their_own_agent_that_lives_on() {
    let d = daemon(echo(), "route = \"spawn:worker\"", "").await;
    let mut carol = d.person("carol", &[]).await;
    let name = reef_gateway::conversation_agent("irc", "carol");
    carol.say("overseer", "hello there").await;
    let first = carol.expect_message(&name, "carol", "heard").await;
    assert_eq!(first, format!("{name} heard: hello there"));
    carol.say("overseer", "again").await;
    carol.expect_message(&name, "carol", "heard: again").await;
    let agent = d.runtime.get_agent(&name).await.unwrap();
    assert_eq!(agent.template, "worker");
    // One agent, one session: the second message was sent with the first in its history.
    let last = d.mock.requests().last().unwrap().clone();
    assert!(
        last.messages()
            .iter()
            .any(|m| m.to_string().contains("hello there"))
    );
    assert_eq!(d.runtime.list_agents().await.unwrap().len(), 1);
}

#[tokio::test]
async fn a_restarted_server_sees_the_overseer_and_the_agents_come_back() {
    let d = daemon(echo(), "", "").await;
    let rt = &d.runtime;
    rt.operate("invoke ada worker", "test").await;
    let mut alice = d.person("alice", &["#control", "#agents"]).await;
    d.wait_for(&mut alice, "ada", "#agents").await;
    drop(alice);
    let mut ircd = d.ircd;
    ircd.kill();
    // ada finishes a task while the server is down; its report goes out once it is back.
    rt.send_message(
        "ada",
        reef_runtime::Sender::Operator,
        "while down",
        "k-down",
        None,
    )
    .await
    .unwrap();
    for _ in 0..6000 {
        let events = rt.store().events_after(0, None, 100_000).await.unwrap();
        if events
            .iter()
            .any(|e| e.kind == "turn.ended" && e.data["from"] == "operator")
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Let the supervisor back off to 4 s or more, so that alice is in the room before the
    // channel reconnects and sends what it owes.
    loop {
        let status = rt.channels().into_iter().next().unwrap();
        if status.failures >= 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    ircd.restart();
    let mut alice = reef_test_support::IrcClient::connect(ircd.port(), "alice").await;
    alice.join("#control").await;
    alice.join("#agents").await;
    let state = rt.channels().into_iter().next().unwrap().state;
    assert_eq!(
        state,
        reef_runtime::ChannelState::Down,
        "reconnected before alice joined"
    );
    // Both rejoin within 30 s of the server coming back.
    let back = tokio::time::timeout(Duration::from_secs(30), async {
        for (nick, room) in [("overseer", "#control"), ("ada", "#agents")] {
            alice
                .expect(|l| {
                    l.command == "JOIN" && l.nick.as_deref() == Some(nick) && l.params[0] == room
                })
                .await;
        }
    })
    .await;
    assert!(back.is_ok(), "not back within 30 s:\n{}", alice.tail(20));
    alice
        .expect_message("ada", "#agents", "heard: while down")
        .await;
    // And the agent still answers.
    alice.say("#agents", "ada: are you back?").await;
    alice
        .expect_message("ada", "#agents", "heard: ada: are you back?")
        .await;
}

#[tokio::test]
async fn on_shutdown_the_agents_and_the_overseer_quit() {
    let mut d = daemon(echo(), "", "").await;
    d.runtime.operate("invoke ada worker", "test").await;
    let mut bob = d.person("bob", &["#control", "#agents"]).await;
    d.wait_for(&mut bob, "ada", "#agents").await;
    d.gateway.take().unwrap().shutdown().await;
    for nick in ["ada", "overseer"] {
        let quit = bob
            .expect(|l| l.command == "QUIT" && l.nick.as_deref() == Some(nick))
            .await;
        assert!(quit.raw.contains("reef is shutting down"), "{}", quit.raw);
    }
}

#[tokio::test]
async fn answers_to_api_clients_stay_off_irc_and_only_operators_invite() {
    let d = daemon(echo(), "", "").await;
    let rt = &d.runtime;
    rt.operate("invoke ada worker", "test").await;
    let mut bob = d.person("bob", &["#agents", "#side"]).await;
    d.wait_for(&mut bob, "ada", "#agents").await;
    // A message from an API client (the OpenAI endpoint's label), then an operator's task.
    rt.send_message(
        "ada",
        reef_runtime::Sender::Channel("openai"),
        "private question",
        "k1",
        None,
    )
    .await
    .unwrap();
    d.wait_event("turn.ended", |e| e.data["from"] == "openai")
        .await;
    rt.send_message("ada", reef_runtime::Sender::Operator, "marker", "k2", None)
        .await
        .unwrap();
    // The operator's task is reported in the room; the API client's answer never was (IRC
    // delivers in order, so it would have come first).
    bob.expect_message("ada", "#agents", "heard: marker").await;
    assert!(
        !bob.seen.iter().any(|l| l.raw.contains("private question")),
        "{}",
        bob.tail(20)
    );
    // bob is no operator: his invitation is recorded and ignored.
    bob.send("INVITE ada #side").await;
    let invited = d.wait_event("channel.invited", |_| true).await;
    assert_eq!(invited.data["accepted"], false);
    bob.say("#side", "ada: are you here?").await;
    bob.say("#agents", "ada: and here?").await;
    bob.expect_message("ada", "#agents", "heard: ada: and here?")
        .await;
    assert!(
        !bob.seen.iter().any(|l| l.command == "JOIN"
            && l.params[0] == "#side"
            && l.nick.as_deref() == Some("ada")),
        "{}",
        bob.tail(20)
    );
}
