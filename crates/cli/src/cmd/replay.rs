//! `reef sessions replay ID --from SEQ [--model PROVIDER]`: runs a stored session again from
//! one of its user messages onwards, in a copy (a new session holding the messages before
//! it), with the same or another model, to reproduce a failure or compare models. The
//! original is left untouched; tools run in the current directory, as in `reef run`.

use super::session;
use crate::exit::{self, Exit};
use crate::render::{Mode, Renderer};
use anyhow::Context as _;
use reef_agent::Session;
use reef_config::Config;
use reef_core::{Message, SessionId, SubmissionId};
use reef_store::{NewSession, Store};

pub async fn replay(
    config: &Config,
    store: &Store,
    id: &str,
    from: u64,
    model: Option<&str>,
    json: bool,
) -> anyhow::Result<u8> {
    let source = store.resolve_session(id).await?;
    let record = store
        .get_session(&source)
        .await?
        .ok_or_else(|| anyhow::anyhow!("session {source} disappeared"))?;
    let messages = store.messages(&source).await?;
    let starts: Vec<u64> = messages
        .iter()
        .filter(|m| matches!(m.message, Message::User { .. }))
        .map(|m| m.seq)
        .collect();
    if !starts.contains(&from) {
        return Err(Exit::usage(format!(
            "--from {from}: replay starts at a user message of session {source}; those are \
             messages {starts:?}"
        )));
    }
    let inputs: Vec<String> = messages
        .into_iter()
        .filter(|m| m.seq >= from)
        .filter_map(|m| match m.message {
            Message::User { content } => Some(content),
            _ => None,
        })
        .collect();
    let client = match model {
        Some(name) => {
            let provider = config.providers.get(name).ok_or_else(|| {
                let names: Vec<&str> = config.providers.keys().map(String::as_str).collect();
                Exit::usage(format!(
                    "--model {name}: no such provider; configured: {}",
                    names.join(", ")
                ))
            })?;
            reef_agent::model_client(provider)?
        }
        None => reef_agent::default_model(config)?,
    };
    let tools = session::Tools::from_config(config, Some(store)).await?;
    let workspace = std::env::current_dir().context("cannot read the current directory")?;
    let copy = SessionId::new();
    let new = NewSession {
        id: copy.clone(),
        agent: Some(reef_core::DEFAULT_AGENT.to_owned()),
        workspace: workspace.display().to_string(),
        provider: client.provider().to_owned(),
        model: client.model().to_owned(),
    };
    if from > 1 {
        store.fork_session(&source, from - 1, new).await?;
    } else {
        store.create_session(new).await?;
    }
    let opts = reef_agent::session_options(config, workspace);
    let mut session = Session::resume(
        copy.clone(),
        client,
        tools.registry.clone(),
        store.clone(),
        opts,
    )
    .await?;
    session.set_rights(session::operator_rights(store)?);
    let mode = if json { Mode::Json } else { Mode::Human };
    let mut renderer = Renderer::new(mode);
    renderer.event(&session.configured_event(SubmissionId::new()));
    if mode == Mode::Human {
        eprintln!(
            "[replay of {source} ({}) from message {from} as session {copy} · {} / {}]",
            record.model,
            session.model().provider(),
            session.model().model()
        );
    }
    let mut sigint = session::interrupts()?;
    let mut handle = reef_agent::spawn(session);
    let mut code = exit::OK;
    for input in inputs {
        let outcome = session::drive_turn(
            &mut handle,
            &mut renderer,
            &mut sigint,
            input,
            tools.warning.as_deref(),
        )
        .await?;
        code = session::outcome_code(&outcome);
        if code != exit::OK {
            break;
        }
    }
    session::shutdown(handle, &mut renderer).await;
    Ok(code)
}
