//! `reef connect ADDR --fingerprint FP --agent NAME`: a conversation with an agent of a
//! daemon on another machine over its QUIC gateway. Lines from the terminal (or standard
//! input, or one `--message`) go to the agent; its protocol events come back and are shown
//! as `reef chat` shows them, or printed as JSON lines with `--json`.

use crate::exit::{self, Exit};
use crate::render::{Mode, Renderer};
use crate::token_args::ConnectArgs;
use anyhow::Context as _;
use reef_core::{EventMsg, TurnOutcome};
use reef_quic::{Client, Conversation};
use std::io::{IsTerminal as _, Write as _};
use tokio::io::{AsyncBufReadExt as _, BufReader};

pub async fn connect(args: ConnectArgs) -> anyhow::Result<u8> {
    let token = token(&args)?;
    reef_quic::parse_fingerprint(&args.fingerprint)
        .map_err(|e| Exit::usage(format!("--fingerprint: {e}")))?;
    let client = Client::connect(&args.addr, &args.fingerprint).await?;
    let mut conversation = client
        .open(&token, &args.agent)
        .await
        .with_context(|| format!("cannot open a conversation with agent {}", args.agent))?;
    eprintln!(
        "reef: connected to agent {} ({}) at {}",
        conversation.agent(),
        conversation.state(),
        args.addr
    );
    let mode = if args.json { Mode::Json } else { Mode::Human };
    let mut renderer = Renderer::new(mode);
    let code = match &args.message {
        Some(text) => say(&mut conversation, &mut renderer, text).await?,
        None => converse(&mut conversation, &mut renderer).await?,
    };
    conversation.finish();
    client.close().await;
    Ok(code)
}

/// Lines until `/quit` or the end of input; the exit code of the last turn.
async fn converse(conversation: &mut Conversation, renderer: &mut Renderer) -> anyhow::Result<u8> {
    let interactive = std::io::stdin().is_terminal();
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    let mut code = exit::OK;
    loop {
        if interactive {
            eprint!("> ");
            // The prompt is cosmetic: a closed stderr changes nothing.
            let _cosmetic = std::io::stderr().flush();
        }
        let Some(line) = lines
            .next_line()
            .await
            .context("cannot read standard input")?
        else {
            return Ok(code);
        };
        let text = line.trim();
        match text {
            "" => continue,
            "/quit" | "/exit" => return Ok(code),
            _ => code = say(conversation, renderer, text).await?,
        }
    }
}

/// Sends `text` and shows the turn that answers it; its exit code.
async fn say(
    conversation: &mut Conversation,
    renderer: &mut Renderer,
    text: &str,
) -> anyhow::Result<u8> {
    let said = conversation
        .say(text, None, |event| renderer.event(event))
        .await?;
    if said.duplicate {
        eprintln!("reef: that message had been delivered before; no new turn");
        return Ok(exit::OK);
    }
    let outcome = said.events.iter().rev().find_map(|e| match &e.msg {
        EventMsg::TurnEnded { outcome, .. } => Some(outcome),
        _ => None,
    });
    Ok(match outcome {
        Some(TurnOutcome::Completed { .. }) | None => exit::OK,
        Some(_) => exit::RUNTIME,
    })
}

/// The token from `--token-file` or `REEF_TOKEN`.
fn token(args: &ConnectArgs) -> anyhow::Result<String> {
    let text = match &args.token_file {
        Some(path) => std::fs::read_to_string(path)
            .with_context(|| format!("--token-file: cannot read {}", path.display()))?,
        None => std::env::var("REEF_TOKEN").map_err(|_| {
            Exit::usage(
                "no token: set REEF_TOKEN or give --token-file PATH (a token made with \
                 `reef gateway token create NAME --scope agent:NAME` on the daemon's machine)",
            )
        })?,
    };
    let token = text.trim().to_owned();
    if token.is_empty() {
        return Err(Exit::usage("the token is empty"));
    }
    Ok(token)
}
