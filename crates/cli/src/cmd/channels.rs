//! `reef channels status`: each configured channel as the daemon's supervisor last reported
//! it: up (with who is connected and what waits for flood control), down (why, and when the
//! next attempt is), connecting, or disabled; messages in and out and reconnects.

use crate::cmd::client::Client;
use crate::exit;
use crate::home;
use serde_json::Value;

pub async fn status(overrides: &[String], json: bool) -> anyhow::Result<u8> {
    let client = Client::connect(&home::load_config(overrides)?)?;
    let channels = client.get("/v1/channels").await?;
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&channels).unwrap_or_else(|_| channels.to_string())
        );
        return Ok(exit::OK);
    }
    let list = channels.as_array().cloned().unwrap_or_default();
    if list.is_empty() {
        println!("no channels are configured (add a [channels.NAME] table to reef.toml)");
    }
    let now = reef_store::unix_now();
    for c in &list {
        println!("{}", line(c, now));
    }
    Ok(exit::OK)
}

fn line(c: &Value, now: i64) -> String {
    let s = |key: &str| c[key].as_str().unwrap_or("-").to_owned();
    let detail = match c["state"].as_str() {
        Some("up") => format!(
            "{} connected, {} lines queued, up for {}",
            c["connected"],
            c["queued"],
            ago(now - c["since_unix"].as_i64().unwrap_or(now))
        ),
        Some("down") => {
            let next = c["next_attempt_unix"]
                .as_i64()
                .map(|t| format!("; next attempt in {}s", (t - now).max(0)))
                .unwrap_or_default();
            format!(
                "{} (failed {} times){next}",
                c["error"].as_str().unwrap_or("unknown error"),
                c["failures"]
            )
        }
        _ => String::new(),
    };
    let traffic = format!(
        "{} in, {} out, {} reconnects",
        c["messages_in"].as_u64().unwrap_or(0),
        c["messages_out"].as_u64().unwrap_or(0),
        c["reconnects"].as_u64().unwrap_or(0)
    );
    let detail = if detail.is_empty() {
        traffic
    } else {
        format!("{detail}; {traffic}")
    };
    format!(
        "{:<12} {:<8} {:<26} {:<10} {detail}",
        s("name"),
        s("kind"),
        s("target"),
        s("state")
    )
}

fn ago(secs: i64) -> String {
    match secs {
        ..60 => format!("{}s", secs.max(0)),
        60..3600 => format!("{}m", secs / 60),
        _ => format!("{}h{:02}m", secs / 3600, (secs % 3600) / 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_down_channel_says_why_and_when_it_tries_again() {
        let down = json!({"name": "irc", "kind": "irc", "target": "127.0.0.1:1", "state": "down",
                          "error": "connection: cannot connect to 127.0.0.1:1: refused",
                          "failures": 3, "next_attempt_unix": 1_004});
        let text = line(&down, 1_000);
        assert!(text.contains("cannot connect"), "{text}");
        assert!(
            text.contains("(failed 3 times); next attempt in 4s"),
            "{text}"
        );
        let up = json!({"name": "irc", "kind": "irc", "target": "h:6667", "state": "up",
                        "connected": 2, "queued": 0, "since_unix": 880, "messages_in": 5,
                        "messages_out": 7, "reconnects": 1});
        assert!(
            line(&up, 1_000)
                .contains("2 connected, 0 lines queued, up for 2m; 5 in, 7 out, 1 reconnects")
        );
    }
}
