//! Shared by `run` and `chat`: opening a session and driving one turn with Ctrl-C handling.

use crate::exit;
use crate::home;
use crate::render::Renderer;
use anyhow::Context as _;
use reef_agent::{AgentHandle, Session};
use reef_config::Config;
use reef_core::{Event, EventMsg, Op, SubmissionId, TurnOutcome};
use reef_store::Store;
use reef_tools::ToolRegistry;
use std::sync::Arc;
use tokio::signal::unix::{Signal, SignalKind, signal};

/// The built-in tools under the configured sandbox (after checking that the sandbox works
/// here) plus, with a store, the memory tools of the `main` agent; and the warning to show at
/// the start of every turn when tools run unconfined.
pub struct Tools {
    pub registry: Arc<ToolRegistry>,
    pub warning: Option<String>,
    /// Skills from reef's home and the workspace; `None` when disabled or tools are off.
    pub skills: Option<Arc<reef_skills::SkillSet>>,
    /// The MCP servers offered to every agent; `None` when there are none or tools are off.
    pub mcp: Option<reef_mcp::McpAccess>,
}

impl Tools {
    pub async fn from_config(config: &Config, store: Option<&Store>) -> anyhow::Result<Tools> {
        let helper = super::sandbox::helper()?;
        let (policy, warning) = reef_agent::sandbox_policy(config, Some(helper)).await?;
        let mut mcp = reef_agent::mcp_hub(config, policy.clone()).map(|hub| {
            // The operator's own agent has no template: it gets the servers offered to all.
            let servers = hub.servers_for("");
            reef_mcp::McpAccess { hub, servers }
        });
        let sandbox = Arc::new(reef_sandbox::Sandbox::new(policy));
        // With the microvm backend, the session's first VM boots while the user types.
        if let Ok(workspace) = std::env::current_dir()
            && let Err(err) = sandbox.prepare(&workspace)
        {
            tracing::warn!(%err, "cannot boot the session's VMs ahead of need");
        }
        let mut registry = reef_agent::builtin_registry_in(config, sandbox.clone());
        let mut skills = reef_agent::skill_set(
            config,
            sandbox,
            registry.secrets(),
            Vec::new(),
            reef_core::Capabilities::default(),
        )
        .map(Arc::new);
        if let Some(store) = store {
            let memory = reef_agent::memory(config, store.clone());
            // The operator's own agent may write the memory every agent reads.
            reef_agent::add_memory_tools(&mut registry, memory, reef_core::DEFAULT_AGENT, true);
        }
        if let Some(model) = toolless_model(config) {
            // Its tool descriptions alone would fill a small model's window, for calls it
            // cannot make.
            tracing::info!(%model, "the model cannot call tools; the session offers none");
            registry = ToolRegistry::default();
            skills = None;
            mcp = None;
        }
        Ok(Tools {
            registry: Arc::new(registry),
            warning,
            skills,
            mcp,
        })
    }
}

/// The default model, when it is an embedded model reef's catalogue says cannot call tools.
fn toolless_model(config: &Config) -> Option<String> {
    let provider = config.provider().ok()?;
    if provider.wire_api != reef_core::WireApi::Local {
        return None;
    }
    let entry = reef_models::find(&provider.model)?;
    (!entry.tools).then(|| provider.model.clone())
}

/// Creates a new session in the current directory, or resumes `resume` (an id or prefix).
pub async fn open(
    config: &Config,
    store: &Store,
    tools: &Tools,
    resume: Option<&str>,
) -> anyhow::Result<Session> {
    // No provider at all is a configuration error (exit 2), reported before model setup.
    config.provider()?;
    let model = reef_agent::default_model(config)?;
    let skills = tools.skills.clone();
    let mcp = tools.mcp.clone();
    let tools = tools.registry.clone();
    let workspace = std::env::current_dir().context("cannot read the current directory")?;
    let opts = reef_agent::session_options(config, workspace);
    let session = match resume {
        Some(prefix) => {
            let id = store.resolve_session(prefix).await?;
            Session::resume(id, model, tools, store.clone(), opts).await?
        }
        None => Session::create(model, tools, store.clone(), opts).await?,
    };
    let mut session = session;
    session.set_rights(operator_rights(store)?);
    if let Some(skills) = skills {
        session.set_skills(skills);
    }
    if let Some(mcp) = mcp.filter(|m| !m.servers.is_empty()) {
        session.set_mcp(mcp);
    }
    Ok(session)
}

/// The rights of the operator's own agent (`reef run`, `reef chat`): every tool, path, host,
/// secret and room, and the shared memory, in a token minted for this session.
pub fn operator_rights(store: &Store) -> anyhow::Result<Arc<reef_agent::Rights>> {
    use reef_security::cap::{Grant, OPERATOR, Token};
    let grant = Grant {
        agent: reef_core::DEFAULT_AGENT.to_owned(),
        by: OPERATOR.to_owned(),
        capabilities: reef_core::Capabilities {
            shared_memory_write: true,
            ..reef_core::Capabilities::default()
        },
        budget: reef_core::Budget::default(),
    };
    let token = Token::mint(store.capability_root(), &grant)?;
    Ok(Arc::new(reef_agent::Rights::new(
        reef_agent::TokenSource::Fixed(Arc::new(token)),
    )))
}

/// Opens config and store for a session-running command.
pub fn prepare(overrides: &[String]) -> anyhow::Result<(Config, Store)> {
    let config = home::load_config(overrides)?;
    crate::passphrase::unlock_if_used(&config.vault)?;
    let store = home::open_store(&config)?;
    Ok((config, store))
}

/// The SIGINT stream of a command, created once so that no Ctrl-C falls between two listeners.
pub fn interrupts() -> anyhow::Result<Signal> {
    signal(SignalKind::interrupt()).context("cannot listen for Ctrl-C")
}

/// Submits `text`, renders events until the turn ends and returns its outcome. `warning` (tools
/// run unconfined) is rendered first, as a `warning` event of this turn. The first Ctrl-C
/// interrupts the turn; a second one exits at once.
pub async fn drive_turn(
    handle: &mut AgentHandle,
    renderer: &mut Renderer,
    sigint: &mut Signal,
    text: String,
    warning: Option<&str>,
) -> anyhow::Result<TurnOutcome> {
    let id = handle.submit(Op::UserInput { text });
    if let Some(message) = warning {
        renderer.event(&Event {
            id,
            msg: EventMsg::Warning {
                message: message.to_owned(),
            },
        });
    }
    let mut interrupt: Option<SubmissionId> = None;
    // The interrupt was answered on its own (it came as the turn ended: nothing was running).
    let mut answered = false;
    let mut ended: Option<TurnOutcome> = None;
    loop {
        tokio::select! {
            event = handle.next_event() => {
                let Some(event) = event else {
                    anyhow::bail!("the session ended unexpectedly");
                };
                if interrupt.as_ref() == Some(&event.id) {
                    answered = true;
                    if let Some(outcome) = ended.take() {
                        return Ok(outcome);
                    }
                    continue;
                }
                renderer.event(&event);
                if let EventMsg::TurnEnded { outcome, .. } = event.msg {
                    if interrupt.is_some()
                        && !answered
                        && !matches!(outcome, TurnOutcome::Interrupted)
                    {
                        // The turn ended before it took the interrupt, which is answered on
                        // its own: wait for that answer so a session kept for the next turn
                        // (`reef chat`) does not show it there.
                        ended = Some(outcome);
                        continue;
                    }
                    return Ok(outcome);
                }
            }
            _ = sigint.recv() => {
                if interrupt.is_some() {
                    std::process::exit(i32::from(exit::INTERRUPTED));
                }
                eprintln!("\n^C: interrupting the turn (press Ctrl-C again to quit now)");
                interrupt = Some(handle.submit(Op::Interrupt));
            }
        }
    }
}

/// The exit code for how a turn ended.
pub fn outcome_code(outcome: &TurnOutcome) -> u8 {
    match outcome {
        TurnOutcome::Completed { .. } => exit::OK,
        TurnOutcome::MaxRounds { .. }
        | TurnOutcome::TimedOut { .. }
        | TurnOutcome::BudgetExceeded { .. }
        | TurnOutcome::CostExceeded { .. }
        | TurnOutcome::LoopDetected { .. } => exit::BUDGET,
        TurnOutcome::Interrupted => exit::INTERRUPTED,
        // The model cannot take the message: a limit of the model, like a rejected request.
        TurnOutcome::Failed { .. } | TurnOutcome::ContextOverflow { .. } => exit::MODEL,
    }
}

/// Sends `Shutdown` and waits for the session loop to finish.
pub async fn shutdown(mut handle: AgentHandle, renderer: &mut Renderer) -> Option<Session> {
    handle.submit(Op::Shutdown);
    while let Some(event) = handle.next_event().await {
        let done = matches!(event.msg, EventMsg::ShutdownComplete);
        renderer.event(&event);
        if done {
            break;
        }
    }
    handle.join().await
}
