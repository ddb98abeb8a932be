//! Assembling a daemon agent's session: its options from config and record, its model by
//! provider name, its tools narrowed to its capabilities, and the session itself, resumed
//! from the agent's transcript and wrapped in the protocol handle the worker drives.

use super::budget::Remaining;
use crate::error::RuntimeError;
use crate::gate::ApprovalGate;
use crate::kernel::{Inner, Runtime, lock};
use crate::tools::{AgentCtx, Kind, RuntimeTool};
use reef_agent::Sandbox;
use reef_agent::{AgentError, AgentHandle, Session, SessionOptions, ToolRegistry};
use reef_core::{ModelClient, TurnSettings};
use reef_store::AgentRecord;
use std::sync::{Arc, Weak};
use std::time::Duration;

/// Why a session could not be opened, and whether waiting helps.
pub(super) enum OpenError {
    /// The store failed (busy, disk full): try again shortly.
    Transient(RuntimeError),
    /// The agent cannot run as configured (a model removed from config, …).
    Fatal(RuntimeError),
}

/// Opens the agent's session (resuming its transcript, or creating one and recording it on
/// the agent) and starts its protocol loop.
pub(super) async fn open(
    rt: &Runtime,
    record: &AgentRecord,
    ctx: Arc<AgentCtx>,
) -> Result<AgentHandle, OpenError> {
    let fatal = OpenError::Fatal;
    // Agents made before tokens existed get theirs now.
    crate::caps::ensure_token(rt.store(), record)
        .await
        .map_err(|err| match err {
            RuntimeError::Store(_) => OpenError::Transient(err),
            other => OpenError::Fatal(other),
        })?;
    let model = model_for(rt, record.model.as_deref()).map_err(fatal)?;
    // One sandbox for the agent's built-in tools and its skills: one cgroup, one network log.
    let sandbox = sandbox_for(rt, record);
    // With the microvm backend, the agent's first VM boots while the session opens.
    if let Err(err) = sandbox
        .sandbox
        .prepare(std::path::Path::new(&record.workspace))
    {
        tracing::warn!(agent = %record.name, %err, "cannot boot the agent's VMs ahead of need");
    }
    // What confines its commands from now on, in the history and the audit log.
    super::record::event(
        rt,
        &record.id,
        "agent.sandbox",
        policy_summary(sandbox.sandbox.policy()),
    )
    .await;
    let tools = Arc::new(registry_in(rt, record, Some(ctx), &sandbox).map_err(fatal)?);
    let skills = skills_in(rt, record, &sandbox, tools.secrets());
    let store = rt.store().clone();
    let opts = session_options(rt, record);
    let session = match &record.session {
        Some(id) => Session::resume(id.clone(), model, tools, store, opts).await,
        None => Session::create(model, tools, store, opts).await,
    };
    let mut session = session.map_err(|err| match err {
        // A row reef cannot read will not get better by waiting.
        AgentError::Store(err @ reef_store::StoreError::Corrupt(_)) => {
            OpenError::Fatal(RuntimeError::Setup(err.to_string()))
        }
        AgentError::Store(err) => OpenError::Transient(err.into()),
        other => OpenError::Fatal(RuntimeError::Setup(other.to_string())),
    })?;
    if record.session.is_none() {
        rt.store()
            .set_agent_session(&record.id, session.id())
            .await
            .map_err(|e| OpenError::Transient(e.into()))?;
    }
    if let Some(skills) = skills {
        session.set_skills(skills);
    }
    if let Some(mcp) = mcp_for(rt, record) {
        session.set_mcp(mcp);
    }
    session.set_memory(rt.inner.memory.clone());
    session.set_debugger(rt.debugger(record));
    session.set_rights(Arc::new(reef_agent::Rights::new(
        reef_agent::TokenSource::Stored,
    )));
    let weak: Weak<Inner> = Arc::downgrade(&rt.inner);
    session.set_model_resolver(Arc::new(move |name: Option<&str>| {
        let rt = Runtime::from_weak(&weak).map_err(|e| e.to_string())?;
        model_for(&rt, name).map_err(|e| e.to_string())
    }));
    Ok(reef_agent::spawn(session))
}

/// The settings of the agent's next turn: its persona and what is left of its budgets.
pub(super) fn turn_settings(
    rt: &Runtime,
    record: &AgentRecord,
    remaining: Remaining,
) -> TurnSettings {
    let agent = &rt.config().agent;
    TurnSettings {
        persona: Some(persona(record)),
        max_rounds: record.budget.rounds.unwrap_or(agent.max_rounds).max(1),
        max_wall_secs: record
            .budget
            .wall_secs
            .unwrap_or(agent.max_wall_secs)
            .max(1),
        token_budget: remaining.tokens,
        cost_budget_micros: remaining.cost_micros,
    }
}

fn session_options(rt: &Runtime, record: &AgentRecord) -> SessionOptions {
    let mut opts = reef_agent::session_options(rt.config(), record.workspace.clone().into());
    opts.agent = record.name.clone();
    opts.persona = Some(persona(record));
    if let Some(rounds) = record.budget.rounds {
        opts.max_rounds = rounds.max(1);
    }
    if let Some(secs) = record.budget.wall_secs {
        opts.max_wall = Duration::from_secs(secs.max(1));
    }
    opts
}

fn persona(record: &AgentRecord) -> String {
    format!(
        "You are `{name}`, a long-lived agent in reef (template `{template}`).\n{persona}\n\n\
         Each user message comes from your inbox, headed with its sender and number. Your final \
         text ends the turn; when the message expects a reply, that text is sent back to the \
         sender. Use message_agent to talk to other agents and ask_operator for decisions that \
         belong to the operator.",
        name = record.name,
        template = record.template,
        persona = record.persona.trim(),
    )
}

/// The model client for a provider name (`None` = the default provider), shared per name.
pub(crate) fn model_for(
    rt: &Runtime,
    name: Option<&str>,
) -> Result<Arc<dyn ModelClient>, RuntimeError> {
    if let Some(model) = &rt.inner.model_override {
        return Ok(model.clone());
    }
    let config = rt.config();
    let mut models = lock(&rt.inner.models);
    // "" caches the default: one provider or the failover chain of `[model] default`.
    let key = name.unwrap_or("");
    if let Some(model) = models.get(key) {
        return Ok(model.clone());
    }
    let model = match name {
        Some(name) => {
            let provider = config.providers.get(name).ok_or_else(|| {
                RuntimeError::Setup(format!("model `{name}` is not a configured provider"))
            })?;
            reef_agent::model_client(provider)
        }
        None => reef_agent::default_model(config),
    }
    .map_err(|e| RuntimeError::Setup(e.to_string()))?;
    models.insert(key.to_owned(), model.clone());
    Ok(model)
}

/// The sandbox of the agent's commands and the config it comes from.
struct AgentSandbox {
    config: reef_config::Config,
    sandbox: Arc<Sandbox>,
}

/// The agent's sandbox: `[sandbox]` with its template's changes, the domains it may reach
/// narrowed to those its capabilities grant, on the backend the daemon's self-test chose.
fn sandbox_for(rt: &Runtime, record: &AgentRecord) -> AgentSandbox {
    let mut config = rt.config().clone();
    if let Some(template) = rt.templates().get(&record.template) {
        config.sandbox = template.sandbox.apply(&config.sandbox);
    }
    config.sandbox.allow_domains =
        reef_sandbox::narrow_domains(&config.sandbox.allow_domains, &record.capabilities.domains);
    let mut policy = reef_agent::policy_from_config(&config, rt.inner.policy.helper.clone());
    // The self-test ran once at start; a fallback applies to every agent.
    policy.backend = rt.inner.policy.backend;
    AgentSandbox {
        config,
        sandbox: Arc::new(Sandbox::new(policy).counting(rt.inner.meter.spawns.clone())),
    }
}

/// The agent's skills: those its template selects, with its capabilities, in `sandbox`, with
/// the secrets of its tool registry.
fn skills_in(
    rt: &Runtime,
    record: &AgentRecord,
    sandbox: &AgentSandbox,
    secrets: Arc<reef_agent::Secrets>,
) -> Option<Arc<reef_skills::SkillSet>> {
    let select = rt
        .templates()
        .get(&record.template)
        .map(|t| t.skills.clone())
        .unwrap_or_default();
    let set = reef_agent::skill_set(
        &sandbox.config,
        sandbox.sandbox.clone(),
        secrets,
        select,
        record.capabilities.clone(),
    )?;
    Some(Arc::new(set.with_wasm(rt.inner.wasm.clone())))
}

/// The agent's MCP servers: those offered to every template or to its own, and those its
/// template names. `None` when it has none.
fn mcp_for(rt: &Runtime, record: &AgentRecord) -> Option<reef_mcp::McpAccess> {
    let hub = rt.inner.mcp.clone()?;
    let mut servers = hub.servers_for(&record.template);
    let named = rt
        .templates()
        .get(&record.template)
        .map(|t| t.mcp.clone())
        .unwrap_or_default();
    let configured = &rt.config().mcp.servers;
    for name in named {
        match configured.get(&name) {
            Some(server) if server.enabled => {
                if !servers.contains(&name) {
                    servers.push(name);
                }
            }
            Some(_) => {}
            None => tracing::warn!(
                template = %record.template,
                server = %name,
                "the template names an MCP server that is not configured"
            ),
        }
    }
    (!servers.is_empty()).then_some(reef_mcp::McpAccess { hub, servers })
}

/// What a sandbox policy lets a command do, as the API, `reef agent status` and the
/// `agent.sandbox` event show it: backend, network and domains, writable paths (besides the
/// workspace), whether commands are forked from a warm sandbox, limits (null: none), and with
/// the microvm backend each VM's memory, CPUs, pool and accelerator.
pub(crate) fn policy_summary(policy: &reef_sandbox::SandboxPolicy) -> serde_json::Value {
    let l = &policy.limits;
    let vm = &policy.microvm;
    let microvm = (policy.backend == reef_sandbox::SandboxBackend::Microvm).then(|| {
        serde_json::json!({
            "memory_mib": vm.memory_mib,
            "cpus": vm.cpus,
            "pool": vm.pool,
            "accelerator": vm.accelerator,
        })
    });
    serde_json::json!({
        "backend": policy.backend.as_str(),
        "network": match policy.network {
            reef_sandbox::NetworkMode::None => "none",
            reef_sandbox::NetworkMode::Allowlist => "allowlist",
            reef_sandbox::NetworkMode::Full => "full",
        },
        "allow_domains": policy.allow_domains,
        "writable": policy.writable,
        "warm": policy.warm,
        "limits": {
            "memory_bytes": l.memory_bytes,
            "file_size_bytes": l.file_size_bytes,
            "cpu_secs": l.cpu_secs,
            "max_processes": l.max_processes,
            "open_files": l.open_files,
        },
        "microvm": microvm,
    })
}

/// The sandbox the agent's commands run in (a new session of the same policy).
pub(crate) fn agent_sandbox(rt: &Runtime, record: &AgentRecord) -> Arc<Sandbox> {
    sandbox_for(rt, record).sandbox
}

/// The folders of the agent's skills outside its workspace, for a command run on its behalf
/// outside a turn (an approved command).
pub(crate) fn skill_folders(rt: &Runtime, record: &AgentRecord) -> Vec<std::path::PathBuf> {
    let secrets = Arc::new(reef_agent::Secrets::new(Vec::new()));
    skills_in(rt, record, &sandbox_for(rt, record), secrets)
        .map(|set| set.load(std::path::Path::new(&record.workspace)).folders)
        .unwrap_or_default()
}

/// The agent's tools: the built-ins in a sandbox shaped by its template, narrowed to its
/// capabilities. With `ctx` (a worker's), the runtime tools are added and `shell` is put
/// behind the approval gate.
pub(crate) fn registry_for(
    rt: &Runtime,
    record: &AgentRecord,
    ctx: Option<Arc<AgentCtx>>,
) -> Result<ToolRegistry, RuntimeError> {
    registry_in(rt, record, ctx, &sandbox_for(rt, record))
}

fn registry_in(
    rt: &Runtime,
    record: &AgentRecord,
    ctx: Option<Arc<AgentCtx>>,
    sandbox: &AgentSandbox,
) -> Result<ToolRegistry, RuntimeError> {
    let mut registry = reef_agent::builtin_registry_in(&sandbox.config, sandbox.sandbox.clone());
    if let Some(ctx) = ctx {
        if let Some(shell) = registry.get("shell") {
            registry.register(Arc::new(ApprovalGate {
                inner: shell,
                rules: rt.inner.rules.clone(),
                ctx: ctx.clone(),
                secrets: registry.secrets(),
            }));
        }
        let manager: &[Kind] = if record.capabilities.spawn {
            &Kind::MANAGER
        } else {
            &[]
        };
        for kind in Kind::COMMON.iter().chain(manager) {
            registry.register(Arc::new(RuntimeTool {
                kind: *kind,
                ctx: ctx.clone(),
            }));
        }
        if record.capabilities.schedule {
            for kind in crate::routine_tools::RoutineKind::ALL {
                registry.register(Arc::new(crate::routine_tools::RoutineTool {
                    kind,
                    ctx: ctx.clone(),
                }));
            }
        }
    }
    reef_agent::add_memory_tools(
        &mut registry,
        rt.inner.memory.clone(),
        &record.name,
        record.capabilities.shared_memory_write,
    );
    registry.retain(|name| record.capabilities.allows_tool(name));
    Ok(registry)
}
