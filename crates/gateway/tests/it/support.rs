//! A daemon (runtime and gateway) whose channel is a fresh ngircd.

use reef_gateway::Gateway;
use reef_runtime::{HelperCommand, Runtime, RuntimeOptions, Templates};
use reef_store::StoredEvent;
use reef_test_support::{IrcClient, MockLlm, Ngircd, Responder, TestHome, sandbox_helper};
use std::time::Duration;

pub struct Daemon {
    pub runtime: Runtime,
    pub gateway: Option<Gateway>,
    pub mock: MockLlm,
    pub ircd: Ngircd,
    pub _home: TestHome,
}

/// A daemon on a fresh home and a fresh ngircd; `channel` is appended to the
/// `[channels.irc]` table and `extra` to the configuration.
pub async fn daemon(responder: Responder, channel: &str, extra: &str) -> Daemon {
    let ircd = Ngircd::start();
    let mock = MockLlm::start_responder(responder).await;
    let home = TestHome::new();
    home.write_config(&format!(
        "[model]\ndefault = \"mock\"\n\n\
         [providers.mock]\nbase_url = \"{}\"\nmodel = \"m\"\nstream = false\nmax_retries = 0\n\n\
         [providers.backup]\nbase_url = \"{}\"\nmodel = \"b\"\nstream = false\nmax_retries = 0\n\n\
         [sandbox]\nrequired = true\n\n\
         [channels.irc]\ntype = \"irc\"\nserver = \"{}\"\nflood_burst = 50\nflood_interval_ms = 100\n{channel}\n\n\
         [operators]\nirc = [\"alice!*@*\"]\n\n{extra}",
        mock.base_url(),
        mock.base_url(),
        ircd.address(),
    ));
    let config = home.load_config();
    let (runtime, _) = Runtime::start(RuntimeOptions {
        config,
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
    Daemon {
        runtime,
        gateway: Some(gateway),
        mock,
        ircd,
        _home: home,
    }
}

impl Daemon {
    /// A person who joined `rooms` and, for the control room, saw the overseer there.
    pub async fn person(&self, nick: &str, rooms: &[&str]) -> IrcClient {
        let mut client = IrcClient::connect(self.ircd.port(), nick).await;
        for room in rooms {
            client.join(room).await;
        }
        if rooms.contains(&"#control") {
            self.wait_for(&mut client, "overseer", "#control").await;
        }
        client
    }

    /// Waits until `nick` is in `room` (NAMES), as seen by `client`.
    pub async fn wait_for(&self, client: &mut IrcClient, nick: &str, room: &str) {
        loop {
            client.send(&format!("NAMES {room}")).await;
            let names = client
                .expect(|l| l.command == "353" || l.command == "366")
                .await;
            if names.command == "353"
                && names
                    .params
                    .last()
                    .unwrap()
                    .split(' ')
                    .any(|n| n.trim_start_matches(['@', '+']) == nick)
            {
                client.expect(|l| l.command == "366").await;
                return;
            }
            if names.command == "353" {
                client.expect(|l| l.command == "366").await;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub async fn events(&self) -> Vec<StoredEvent> {
        self.runtime
            .store()
            .events_after(0, None, 100_000)
            .await
            .unwrap()
    }

    /// Waits (bounded by the test harness) until an event of `kind` matching `pred` is in
    /// the history.
    pub async fn wait_event(&self, kind: &str, pred: impl Fn(&StoredEvent) -> bool) -> StoredEvent {
        for _ in 0..6000 {
            if let Some(e) = self
                .events()
                .await
                .into_iter()
                .find(|e| e.kind == kind && pred(e))
            {
                return e;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("no {kind} event came");
    }
}

/// A worker named `name`.
pub fn spawn(name: &str) -> reef_runtime::SpawnRequest {
    reef_runtime::SpawnRequest {
        name: name.into(),
        template: "worker".into(),
        ..reef_runtime::SpawnRequest::default()
    }
}
