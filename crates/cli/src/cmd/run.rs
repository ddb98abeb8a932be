//! `reef run PROMPT`: one turn in the current directory, streamed or as JSON lines.

use super::session;
use crate::args::RunArgs;
use crate::exit::Exit;
use crate::render::{Mode, Renderer};
use anyhow::Context as _;
use reef_core::SubmissionId;
use std::io::{IsTerminal as _, Read as _};

pub async fn run(overrides: &[String], args: RunArgs) -> anyhow::Result<u8> {
    let prompt = read_prompt(&args.prompt)?;
    let (config, store) = session::prepare(overrides)?;
    super::models::ensure_installed(&config, args.yes).await?;
    let tools = session::Tools::from_config(&config, Some(&store)).await?;
    let session = session::open(&config, &store, &tools, args.session.as_deref()).await?;
    let mode = if args.json { Mode::Json } else { Mode::Human };
    let mut renderer = Renderer::new(mode);
    renderer.event(&session.configured_event(SubmissionId::new()));
    if mode == Mode::Human {
        eprintln!("[session {}]", session.id());
    }
    let mut sigint = session::interrupts()?;
    let mut handle = reef_agent::spawn(session);
    let outcome = session::drive_turn(
        &mut handle,
        &mut renderer,
        &mut sigint,
        prompt,
        tools.warning.as_deref(),
    )
    .await?;
    session::shutdown(handle, &mut renderer).await;
    Ok(session::outcome_code(&outcome))
}

fn read_prompt(words: &[String]) -> anyhow::Result<String> {
    let joined = words.join(" ");
    let text = if joined.trim().is_empty() || joined == "-" {
        if std::io::stdin().is_terminal() {
            return Err(Exit::usage(
                "no prompt: pass it as an argument (reef run \"...\") or pipe it on stdin",
            ));
        }
        let mut buf = String::new();
        std::io::stdin()
            .read_to_string(&mut buf)
            .context("cannot read the prompt from stdin")?;
        buf
    } else {
        joined
    };
    if text.trim().is_empty() {
        return Err(Exit::usage(
            "no prompt: pass it as an argument (reef run \"...\") or on stdin",
        ));
    }
    Ok(text.trim_end().to_owned())
}
