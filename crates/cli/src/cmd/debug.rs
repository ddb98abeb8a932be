//! `reef agent debug NAME [--break SPEC]... [COMMAND [ARG]]`: sets an agent's breakpoints and
//! drives the turn paused at one, with one command, or interactively from stdin.

use crate::cmd::client::{Client, segment};
use crate::exit::{self, Exit};
use reef_runtime::DebugCommand;
use reqwest::Method;
use serde_json::{Value, json};
use std::collections::VecDeque;
use std::io::IsTerminal as _;
use tokio::sync::mpsc;

/// Seconds one wait request asks the daemon to hold.
const WAIT_SLICE: u64 = 30;

const HELP: &str = "commands: step | continue | skip TEXT | edit JSON | inspect | status | \
                    off (clear breakpoints and let it run) | quit (leave breakpoints set)";

pub struct DebugArgs {
    pub name: String,
    pub breaks: Vec<String>,
    pub command: Vec<String>,
    pub timeout: u64,
    pub json: bool,
}

pub async fn debug(c: &Client, args: DebugArgs) -> anyhow::Result<u8> {
    let path = format!("/v1/agents/{}/debug", segment(&args.name));
    if !args.breaks.is_empty() {
        c.put(&path, json!({"breakpoints": args.breaks})).await?;
    }
    let Some((word, rest)) = args.command.split_first() else {
        return interactive(c, &path, &args.name, args.timeout).await;
    };
    let status = match word.as_str() {
        "status" => c.get(&path).await?,
        "wait" => wait(c, &path, &args.name, Some(args.timeout)).await?,
        "off" => c.delete(&path).await?,
        _ => {
            let body = command_body(word, &rest.join(" "))?;
            // Not paused is a question of usage: exit 2 with the daemon's reason.
            c.request(Method::POST, &path, Some(body), exit::USAGE)
                .await?
        }
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&status)?);
    } else {
        print_status(&status, word == "inspect");
    }
    Ok(exit::OK)
}

/// The API body of a command typed as `WORD REST`.
fn command_body(word: &str, rest: &str) -> anyhow::Result<Value> {
    // The daemon's own parser (the one `reef answer` on a breakpoint goes through).
    let command = DebugCommand::parse(&format!("{word} {rest}"))
        .map_err(|e| Exit::usage(format!("{e}; {HELP}")))?;
    Ok(match command {
        DebugCommand::Step => json!({"command": "step"}),
        DebugCommand::Continue => json!({"command": "continue"}),
        DebugCommand::Inspect => json!({"command": "inspect"}),
        DebugCommand::Skip { error } => json!({"command": "skip", "error": error}),
        DebugCommand::Edit { arguments } => json!({"command": "edit", "arguments": arguments}),
    })
}

/// Waits until the agent is paused (for at most `timeout` seconds, or forever).
async fn wait(c: &Client, path: &str, name: &str, timeout: Option<u64>) -> anyhow::Result<Value> {
    let mut left = timeout;
    loop {
        let slice = left.map_or(WAIT_SLICE, |l| l.min(WAIT_SLICE));
        let status = c.get(&format!("{path}?wait={slice}")).await?;
        if !status["paused"].is_null() {
            return Ok(status);
        }
        left = left.map(|l| l.saturating_sub(slice));
        if left == Some(0) {
            return Err(anyhow::Error::new(Exit {
                code: exit::RUNTIME,
                message: format!(
                    "agent {name} did not reach a breakpoint within {} s",
                    timeout.unwrap_or(0)
                ),
            }));
        }
    }
}

/// Shows each stop and applies the commands read from stdin there, in order: a command read
/// while the agent runs waits for its next stop (`quit`, `off` and `status` act at once). End
/// of input, once every command read is done, clears the breakpoints (the agent runs on);
/// commands still waiting then get `timeout` seconds for a stop. `quit` leaves the
/// breakpoints set. Exits 2 when a command was refused.
async fn interactive(c: &Client, path: &str, name: &str, timeout: u64) -> anyhow::Result<u8> {
    let status = c.get(path).await?;
    if status["breakpoints"].as_array().is_none_or(Vec::is_empty) && status["paused"].is_null() {
        return Err(Exit::usage(format!(
            "agent {name} has no breakpoints; set some with --break tool=NAME, --break tool \
             or --break round"
        )));
    }
    let tty = std::io::stdin().is_terminal();
    let mut input = Input::start();
    let mut queued: VecDeque<String> = VecDeque::new();
    let mut announced = false;
    let mut refused = false;
    let mut idle_since_end: u64 = 0;
    loop {
        let status = c.get(path).await?;
        if status["paused"].is_null() {
            if input.ended && (queued.is_empty() || idle_since_end >= timeout) {
                if !queued.is_empty() {
                    eprintln!(
                        "{name} reached no stop within {timeout} s; not run: {}",
                        queued.iter().cloned().collect::<Vec<_>>().join("; ")
                    );
                    refused = true;
                }
                return end(c, path, name, refused).await;
            }
            if !announced {
                println!(
                    "waiting for {name} to reach a breakpoint ({})",
                    list(&status["breakpoints"])
                );
                announced = true;
            }
            let slice = if input.ended {
                (timeout - idle_since_end).clamp(1, WAIT_SLICE)
            } else {
                WAIT_SLICE
            };
            let long_poll = format!("{path}?wait={slice}");
            tokio::select! {
                waited = c.get(&long_poll) => {
                    waited?;
                    if input.ended {
                        idle_since_end += slice;
                    }
                }
                line = input.next(), if !input.ended => {
                    if let Some(line) = line {
                        match line.split_whitespace().next() {
                            Some("quit" | "q") => return quit(name, refused),
                            Some("off") => return end(c, path, name, refused).await,
                            Some("status") => print_status(&c.get(path).await?, false),
                            Some(_) => {
                                if tty {
                                    println!("(the agent is running: `{line}` waits for its next stop)");
                                }
                                queued.push_back(line);
                            }
                            None => {}
                        }
                    }
                }
            }
            continue;
        }
        announced = false;
        idle_since_end = 0;
        let stop_id = status["paused"]["id"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        print_status(&status, false);
        if tty {
            println!("{HELP}");
        }
        // Commands until one lets the agent go on.
        loop {
            let line = match queued.pop_front() {
                Some(line) => line,
                None => {
                    if tty {
                        print!("debug> ");
                        std::io::Write::flush(&mut std::io::stdout())?;
                    }
                    match input.next().await {
                        Some(line) => line,
                        None => return end(c, path, name, refused).await,
                    }
                }
            };
            let line = line.trim().to_owned();
            let (word, rest) = line
                .split_once(char::is_whitespace)
                .map_or((line.as_str(), ""), |(w, r)| (w, r));
            match word {
                "" => continue,
                "quit" | "q" => return quit(name, refused),
                "off" => return end(c, path, name, refused).await,
                "status" => {
                    print_status(&c.get(path).await?, false);
                    continue;
                }
                _ => {}
            }
            let mut body = match command_body(word, rest) {
                Ok(body) => body,
                Err(err) => {
                    eprintln!("{err}");
                    refused = true;
                    continue;
                }
            };
            // Meant for the stop shown: refused if the agent has moved on.
            body["stop"] = Value::String(stop_id.clone());
            println!("> {line}");
            match c.request(Method::POST, path, Some(body), exit::USAGE).await {
                // edit and inspect leave the agent where it is.
                Ok(status) if !status["paused"].is_null() => {
                    print_status(&status, word == "inspect" || word == "i");
                }
                Ok(_) => break,
                Err(err)
                    if exit::classify(&err) == exit::USAGE
                        && is_conflict(&c.get(path).await?, &stop_id) =>
                {
                    // The stop went away (the turn was interrupted): the command waits for
                    // the next one.
                    eprintln!("{err}");
                    queued.push_front(line);
                    break;
                }
                Err(err) => {
                    eprintln!("{err}");
                    refused = true;
                }
            }
        }
    }
}

/// Whether the agent is no longer at stop `id`.
fn is_conflict(status: &Value, id: &str) -> bool {
    status["paused"]["id"].as_str() != Some(id)
}

fn quit(name: &str, refused: bool) -> anyhow::Result<u8> {
    println!("left {name}'s breakpoints set");
    Ok(if refused { exit::USAGE } else { exit::OK })
}

async fn end(c: &Client, path: &str, name: &str, refused: bool) -> anyhow::Result<u8> {
    c.delete(path).await?;
    println!("breakpoints cleared: {name} runs on");
    Ok(if refused { exit::USAGE } else { exit::OK })
}

/// Lines of stdin, read on a thread of their own (a blocking read there never holds up the
/// exit) so the session can wait for the agent meanwhile.
struct Input {
    lines: mpsc::UnboundedReceiver<String>,
    ended: bool,
}

impl Input {
    fn start() -> Input {
        let (tx, lines) = mpsc::unbounded_channel();
        let reader = std::thread::Builder::new()
            .name("reef-debug-stdin".into())
            .spawn(move || {
                for line in std::io::stdin().lines() {
                    let Ok(line) = line else { break };
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            });
        if let Err(err) = reader {
            tracing::warn!(error = %err, "cannot read stdin");
        }
        Input {
            lines,
            ended: false,
        }
    }

    /// The next line; `None` once input has ended.
    async fn next(&mut self) -> Option<String> {
        let line = self.lines.recv().await;
        self.ended = line.is_none();
        line
    }
}

/// The strings of a JSON array, joined with `, ` (empty for anything else).
pub(super) fn list(v: &Value) -> String {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default()
}

fn print_status(status: &Value, with_context: bool) {
    let name = status["agent"].as_str().unwrap_or("-");
    let breakpoints = list(&status["breakpoints"]);
    let stepping = if status["stepping"].as_bool() == Some(true) {
        ", stepping"
    } else {
        ""
    };
    let stop = &status["paused"];
    if stop.is_null() {
        let breakpoints = if breakpoints.is_empty() {
            "none".to_owned()
        } else {
            breakpoints
        };
        println!("{name} is not paused (breakpoints: {breakpoints}{stepping})");
        return;
    }
    let what = match stop["tool"].as_str() {
        Some(tool) => format!("tool call `{tool}`"),
        None => "model request".to_owned(),
    };
    println!(
        "{name} paused before {what} (round {}, breakpoint {}; breakpoints: {breakpoints}{stepping})",
        stop["round"],
        stop["id"].as_str().unwrap_or("-")
    );
    if !stop["arguments"].is_null() {
        let edited = if stop["edited"].as_bool() == Some(true) {
            " (edited)"
        } else {
            ""
        };
        println!("  arguments{edited}: {}", stop["arguments"]);
    }
    let tokens = stop["context_tokens"].as_u64().unwrap_or(0);
    let size = match stop["window"].as_u64() {
        Some(window) if window > 0 => format!(
            "{tokens} of {window} tokens ({}%)",
            tokens.saturating_mul(100) / window
        ),
        _ => format!("{tokens} tokens"),
    };
    println!("  context: {size}, {} messages", stop["context_messages"]);
    if with_context {
        for message in stop["context"].as_array().into_iter().flatten() {
            print_message(message);
        }
    }
}

fn print_message(m: &Value) {
    let role = m["role"].as_str().unwrap_or("?");
    let head = match role {
        "tool" => format!(
            "--- tool result {} ({}){}",
            m["name"].as_str().unwrap_or("?"),
            m["call_id"].as_str().unwrap_or("?"),
            if m["is_error"].as_bool() == Some(true) {
                ", error"
            } else {
                ""
            }
        ),
        other => format!("--- {other}"),
    };
    println!("{head}");
    let content = m["content"].as_str().unwrap_or("");
    if !content.is_empty() {
        println!("{content}");
    }
    for call in m["tool_calls"].as_array().into_iter().flatten() {
        println!(
            "[call {} {} {}]",
            call["id"].as_str().unwrap_or("?"),
            call["name"].as_str().unwrap_or("?"),
            call["arguments"].as_str().unwrap_or("")
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_commands_become_api_bodies() {
        assert_eq!(command_body("s", "").unwrap(), json!({"command": "step"}));
        assert_eq!(
            command_body("skip", " not now ").unwrap(),
            json!({"command": "skip", "error": "not now"})
        );
        assert_eq!(
            command_body("edit", r#"{"command": "ls"}"#).unwrap(),
            json!({"command": "edit", "arguments": {"command": "ls"}})
        );
        for (word, rest) in [("skip", ""), ("edit", "ls"), ("step", "2"), ("jump", "")] {
            let err = command_body(word, rest).unwrap_err();
            assert_eq!(exit::classify(&err), exit::USAGE, "{word} {rest}");
        }
    }
}
