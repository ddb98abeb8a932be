//! The IRC channel against ngircd: registration, rooms, direct messages, nick collisions,
//! line splitting, sanitizing, invitations, flood control, QUIT, and a server that dies.

use reef_channels::irc::{Credentials, IrcChannel};
use reef_config::IrcConfig;
use reef_core::{Channel, ChannelError, Conversation, Inbound, Outbound, Speaker};
use reef_test_support::{IrcClient, Ngircd};
use std::time::Duration;

fn config(port: u16) -> IrcConfig {
    IrcConfig {
        host: "127.0.0.1".into(),
        port,
        tls: false,
        nick: "overseer".into(),
        control: "#control".into(),
        room: "#agents".into(),
        sasl_secret: None,
        nickserv_secret: None,
        flood_burst: 100,
        flood_interval_ms: 100,
    }
}

fn channel(config: IrcConfig) -> IrcChannel {
    IrcChannel::new(
        config,
        vec!["alice!*@*".into()],
        Credentials::default(),
        None,
    )
    .unwrap()
}

fn agents(names: &[&str]) -> Vec<(String, Vec<String>)> {
    names
        .iter()
        .map(|n| ((*n).to_owned(), vec!["#agents".to_owned()]))
        .collect()
}

async fn next(channel: &mut IrcChannel) -> Inbound {
    tokio::time::timeout(Duration::from_secs(60), channel.recv())
        .await
        .expect("an inbound event within a minute")
        .expect("the channel stays connected")
}

#[tokio::test]
async fn the_overseer_hears_operators_in_control_and_agents_hear_their_direct_messages() {
    let server = Ngircd::start();
    let mut alice = IrcClient::connect(server.port(), "alice").await;
    alice.join("#control").await;
    let mut irc = channel(config(server.port()));
    irc.connect(&agents(&["ada"])).await.unwrap();
    alice
        .expect(|l| l.command == "JOIN" && l.nick.as_deref() == Some("overseer"))
        .await;
    alice.say("#control", "!list").await;
    let Inbound::Message {
        listener,
        conversation,
        author,
        text,
        sanitized,
        addressed,
        key,
        ..
    } = next(&mut irc).await
    else {
        panic!("expected a message");
    };
    assert_eq!(listener, Speaker::Overseer);
    assert_eq!(conversation, Conversation::Room("#control".into()));
    assert_eq!(text, "!list");
    assert!(!sanitized);
    // A room line is not addressed by itself, and IRC has no message ids.
    assert!(!addressed);
    assert_eq!(key, None);
    assert_eq!(author.name, "alice");
    assert!(author.identity.starts_with("alice!"), "{}", author.identity);
    assert!(irc.is_operator(&author));
    assert!(irc.same_name("ALICE", "alice"));

    let mut bob = IrcClient::connect(server.port(), "bob").await;
    bob.say("ada", "hello ada").await;
    let Inbound::Message {
        listener,
        conversation,
        author,
        text,
        ..
    } = next(&mut irc).await
    else {
        panic!("expected a message");
    };
    assert_eq!(listener, Speaker::Agent("ada".into()));
    assert_eq!(conversation, Conversation::Direct("bob".into()));
    assert_eq!(text, "hello ada");
    assert!(!irc.is_operator(&author), "bob is no operator");

    // The answer goes back to bob, from ada's own nick.
    irc.send(Outbound::Say {
        from: Speaker::Agent("ada".into()),
        to: Conversation::Direct("bob".into()),
        text: "hello bob".into(),
    })
    .await
    .unwrap();
    bob.expect_message("ada", "bob", "hello bob").await;
    assert_eq!(irc.health().connected, 2);
}

#[tokio::test]
async fn a_taken_nick_gets_a_suffix_and_long_replies_are_split_within_the_line_limit() {
    let server = Ngircd::start();
    let mut squatter = IrcClient::connect(server.port(), "ada").await;
    squatter.join("#agents").await;
    let mut irc = channel(config(server.port()));
    irc.connect(&agents(&["ada"])).await.unwrap();
    let nick = irc.handle(&Speaker::Agent("ada".into())).unwrap();
    assert_eq!(nick, "ada2");
    squatter
        .expect(|l| l.command == "JOIN" && l.nick.as_deref() == Some("ada2"))
        .await;

    // Two paragraphs of multi-byte words, far over one line.
    let words: Vec<String> = (0..300).map(|i| format!("récif{i}")).collect();
    let text = format!("{}\n\n{}", words[..150].join(" "), words[150..].join(" "));
    irc.send(Outbound::Say {
        from: Speaker::Agent("ada".into()),
        to: Conversation::Room("#agents".into()),
        text: text.clone(),
    })
    .await
    .unwrap();
    let mut received = Vec::new();
    while !received
        .last()
        .is_some_and(|l: &String| l.ends_with("récif299"))
    {
        let line = squatter
            .expect(|l| l.nick.as_deref() == Some("ada2") && l.privmsg().is_some())
            .await;
        assert!(
            line.raw.len() + 2 <= 512,
            "a relayed line over 512 bytes: {}",
            line.raw.len()
        );
        received.push(line.params[1].clone());
    }
    assert!(received.len() >= 4, "{received:?}");
    // Nothing lost, nothing cut inside a word.
    let rejoined: Vec<&str> = received.iter().flat_map(|l| l.split(' ')).collect();
    let sent: Vec<&str> = text.split_whitespace().collect();
    assert_eq!(rejoined, sent);
}

#[tokio::test]
async fn control_characters_and_invalid_utf8_are_sanitized_and_ctcp_requests_dropped() {
    let server = Ngircd::start();
    let mut irc = channel(config(server.port()));
    irc.connect(&agents(&["ada"])).await.unwrap();
    let mut mallory = IrcClient::connect(server.port(), "mallory").await;
    mallory.say("ada", "\x01VERSION\x01").await;
    mallory
        .send_bytes(b"PRIVMSG ada :\x0304red\x03 \xff\xfe ok\x07 \xe2\x80\x8bhidden\r\n")
        .await;
    let Inbound::Message {
        text, sanitized, ..
    } = next(&mut irc).await
    else {
        panic!("expected a message");
    };
    // The CTCP request never arrived as a message; the next one did, cleaned.
    assert_eq!(text, "red \u{fffd}\u{fffd} ok hidden");
    assert!(sanitized);
}

#[tokio::test]
async fn an_invited_agent_can_join_the_room_and_departs_with_a_quit() {
    let server = Ngircd::start();
    let mut bob = IrcClient::connect(server.port(), "bob").await;
    bob.join("#side").await;
    let mut irc = channel(config(server.port()));
    irc.connect(&agents(&["ada"])).await.unwrap();
    bob.send("INVITE ada #side").await;
    let invited = next(&mut irc).await;
    let Inbound::Invited {
        agent,
        room,
        author,
    } = invited
    else {
        panic!("expected an invitation, got {invited:?}");
    };
    assert_eq!(
        (agent.as_str(), room.as_str(), author.name.as_str()),
        ("ada", "#side", "bob")
    );
    irc.send(Outbound::Join { agent, room }).await.unwrap();
    bob.expect(|l| l.command == "JOIN" && l.nick.as_deref() == Some("ada"))
        .await;
    irc.send(Outbound::Depart {
        agent: "ada".into(),
        reason: "destroyed by alice".into(),
    })
    .await
    .unwrap();
    let quit = bob
        .expect(|l| l.command == "QUIT" && l.nick.as_deref() == Some("ada"))
        .await;
    assert!(quit.raw.contains("destroyed by alice"), "{}", quit.raw);
    assert_eq!(irc.handle(&Speaker::Agent("ada".into())), None);
}

#[tokio::test]
async fn flood_control_holds_lines_back_while_quit_goes_ahead() {
    let server = Ngircd::start();
    let mut bob = IrcClient::connect(server.port(), "bob").await;
    bob.join("#agents").await;
    let mut slow = config(server.port());
    slow.flood_burst = 1;
    slow.flood_interval_ms = 60_000;
    let mut irc = channel(slow);
    irc.connect(&agents(&["ada"])).await.unwrap();
    bob.expect(|l| l.command == "JOIN" && l.nick.as_deref() == Some("ada"))
        .await;
    // ada's JOIN took its one token: these three lines wait a minute each.
    irc.send(Outbound::Say {
        from: Speaker::Agent("ada".into()),
        to: Conversation::Room("#agents".into()),
        text: "one\ntwo\nthree".into(),
    })
    .await
    .unwrap();
    assert_eq!(irc.health().queued, 3);
    irc.close("shutting down").await;
    let quit = bob
        .expect(|l| l.command == "QUIT" && l.nick.as_deref() == Some("ada"))
        .await;
    assert!(quit.raw.contains("shutting down"));
    assert!(
        !bob.seen.iter().any(|l| l.privmsg().is_some()),
        "a held line went out: {}",
        bob.tail(10)
    );
}

#[tokio::test]
async fn a_dead_server_ends_the_channel_and_a_new_connect_brings_everyone_back() {
    let mut server = Ngircd::start();
    let mut irc = channel(config(server.port()));
    irc.connect(&agents(&["ada", "bea"])).await.unwrap();
    server.kill();
    let err = tokio::time::timeout(Duration::from_secs(60), irc.recv())
        .await
        .expect("the channel notices within a minute")
        .unwrap_err();
    assert!(matches!(err, ChannelError::Connection(_)), "{err}");
    // While the server is down, connecting says why.
    let err = irc.connect(&agents(&["ada"])).await.unwrap_err();
    assert!(err.to_string().contains("cannot connect"), "{err}");
    server.restart();
    let mut carol = IrcClient::connect(server.port(), "carol").await;
    carol.join("#agents").await;
    irc.connect(&agents(&["ada", "bea"])).await.unwrap();
    for nick in ["ada", "bea"] {
        carol
            .expect(|l| l.command == "JOIN" && l.nick.as_deref() == Some(nick))
            .await;
    }
}

#[tokio::test]
async fn tls_against_a_plain_port_fails_the_handshake_and_says_so() {
    // A plain server that greets at once, as many IRC servers do (ngircd waits for the
    // client's first line, so the handshake would only end at its registration timeout).
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        use tokio::io::AsyncWriteExt;
        let (mut socket, _) = listener.accept().await.unwrap();
        let _ = socket
            .write_all(b":irc.test NOTICE * :*** Looking up your hostname\r\n")
            .await;
        tokio::time::sleep(Duration::from_secs(5)).await;
    });
    let mut tls = config(port);
    tls.tls = true;
    let mut irc = IrcChannel::new(
        tls,
        vec![],
        Credentials::default(),
        Some(rustls::RootCertStore::empty()),
    )
    .unwrap();
    let err = irc.connect(&[]).await.unwrap_err();
    assert!(err.to_string().contains("TLS handshake"), "{err}");
    assert!(err.to_string().contains("set tls = false"), "{err}");
}

#[tokio::test]
async fn over_tls_the_channel_checks_the_certificate_and_works() {
    let server = Ngircd::start_tls();
    let (tls_port, ca) = server.tls().unwrap();
    let roots = |pem: &str| {
        use rustls::pki_types::CertificateDer;
        use rustls::pki_types::pem::PemObject;
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(pem.as_bytes()) {
            roots.add(cert.unwrap()).unwrap();
        }
        roots
    };
    let mut tls = config(tls_port);
    tls.tls = true;
    let mut irc =
        IrcChannel::new(tls.clone(), vec![], Credentials::default(), Some(roots(ca))).unwrap();
    irc.connect(&agents(&["ada"])).await.unwrap();
    let mut bob = IrcClient::connect(server.port(), "bob").await;
    bob.say("ada", "over tls?").await;
    let Inbound::Message { text, .. } = next(&mut irc).await else {
        panic!("expected a message");
    };
    assert_eq!(text, "over tls?");
    // A certificate no trusted CA signed is refused.
    let mut untrusted = IrcChannel::new(
        tls,
        vec![],
        Credentials::default(),
        Some(rustls::RootCertStore::empty()),
    )
    .unwrap();
    let err = untrusted.connect(&[]).await.unwrap_err();
    assert!(err.to_string().contains("TLS handshake"), "{err}");
}
