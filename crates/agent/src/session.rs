//! One conversation: its identity, history, model, tools and the store it is persisted in.

use crate::debug::{Debugger, PauseClock};
use crate::error::AgentError;
use crate::history::{self, Held};
use crate::meter::ContextMeter;
use crate::{prompt, small};
use reef_core::{
    AgentProfile, CompactionStrategy, Event, EventMsg, Message, ModelClient, ModelResponse,
    SessionId, SubmissionId, ToolSpec, TurnSettings, Usage, WireApi,
};
use reef_store::{NewSession, NewUsage, Store};
use reef_tools::ToolRegistry;
use std::collections::{HashSet, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc::UnboundedSender;

/// Finds the model client for a configured provider name (`None`: the default model), for
/// `Op::SetModel`; the error says what is wrong with the name.
pub type ModelResolver =
    Arc<dyn Fn(Option<&str>) -> Result<Arc<dyn ModelClient>, String> + Send + Sync>;

/// Steering messages waiting for the next round boundary of the running turn.
pub(crate) type SteerQueue = Arc<Mutex<VecDeque<(SubmissionId, String)>>>;

/// Budgets and placement of a session, usually taken from `[agent]` in config.
#[derive(Clone, Debug)]
pub struct SessionOptions {
    /// Where relative paths resolve and the only place tools may write.
    pub workspace: PathBuf,
    /// Whose session this is: a daemon agent's name, or `main` (`reef_core::DEFAULT_AGENT`).
    pub agent: String,
    /// The most characters of the workspace's `MEMORY.md` put in the system prompt; beyond
    /// that the agent is asked to compact the file. 0 leaves notes out.
    pub notes_max_chars: usize,
    /// Model requests per turn before the turn stops with `MaxRounds`.
    pub max_rounds: u32,
    /// Wall-clock budget of one turn.
    pub max_wall: Duration,
    /// Tool outputs longer than this many characters are saved to the workspace.
    pub inline_output_chars: usize,
    /// Replaces the built-in system prompt.
    pub system_prompt: Option<String>,
    /// Who the agent is (a daemon agent's name, role and persona), put before the system
    /// prompt.
    pub persona: Option<String>,
    /// Tokens (input + output) this turn may use before it stops with `BudgetExceeded`;
    /// `None` is unlimited.
    pub token_budget: Option<u64>,
    /// The same tool call (name and arguments) this many times in one turn stops it with
    /// `LoopDetected`; 0 turns loop detection off.
    pub loop_limit: u32,
    /// Millionths of a US dollar this turn may spend before it stops with `CostExceeded`;
    /// `None` is unlimited.
    pub cost_budget_micros: Option<u64>,
    /// Prices that turn each request's usage into a cost.
    pub prices: Arc<reef_llm::Prices>,
    /// Compact when the next request would pass this share of the model's window (0, 1].
    pub compact_at: f64,
    /// How the history is compacted.
    pub compaction: CompactionStrategy,
    /// Recent turns a compaction keeps verbatim (fewer when they do not fit).
    pub keep_recent_turns: u32,
    /// How the model is driven; `Auto` picks `Small` for a model run in-process.
    pub profile: AgentProfile,
    /// Paths the sandbox hides (`SandboxPolicy::hidden_paths`): the small profile's checks
    /// do not look at them either.
    pub hidden: Vec<PathBuf>,
    /// `[safety.sources]`: what happens to untrusted content before the model reads it.
    pub safety: reef_security::safety::SafetyPolicy,
}

/// Progress of the turn in flight, kept on the session so an interrupted turn can still report it.
#[derive(Clone, Debug, Default)]
pub(crate) struct TurnState {
    pub rounds: u32,
    pub usage: Usage,
    /// Millionths of a US dollar spent by the turn so far (priced requests only).
    pub cost_micros: u64,
    /// The seq of the turn's input message (0 outside a turn).
    pub first_seq: u64,
    /// What the turn's tool results have shown (for the small profile's review).
    pub evidence: small::Evidence,
    /// Answers the small profile sent back in this turn, by why.
    pub nudges: Vec<small::Nudge>,
    /// The next request must call a tool.
    pub require_call: bool,
}

/// A conversation with one agent. Every message is written to the store before it is used.
pub struct Session {
    pub(crate) id: SessionId,
    pub(crate) model: Arc<dyn ModelClient>,
    pub(crate) tools: Arc<ToolRegistry>,
    pub(crate) store: Store,
    pub(crate) opts: SessionOptions,
    pub(crate) history: Vec<Held>,
    pub(crate) turn: TurnState,
    pub(crate) meter: ContextMeter,
    /// Long-term memory, where `archive` compaction saves what it replaces.
    pub(crate) memory: Option<reef_store::Memory>,
    pub(crate) models: Option<ModelResolver>,
    pub(crate) steers: SteerQueue,
    /// A prompt size the current provider refused as too long: the window is taken to be
    /// below it from then on.
    pub(crate) refused_at: Option<u64>,
    /// Stops turns for an operator (`reef agent debug`).
    pub(crate) debugger: Option<Arc<dyn Debugger>>,
    /// Time the running turn waited at stops.
    pub(crate) pauses: PauseClock,
    /// The optional programs the small profile's recipes may name, looked for the first time
    /// a small model is offered tools (never for the standard profile).
    pub(crate) programs: std::sync::OnceLock<small::Programs>,
    /// Skills, found again at the start of every turn.
    pub(crate) skills: Option<crate::skills::SessionSkills>,
    /// MCP servers, whose tools are listed again at the start of every turn.
    pub(crate) mcp: Option<reef_mcp::McpAccess>,
    /// The session's own tools, before skills and MCP servers were laid over them.
    pub(crate) own_tools: Option<Arc<ToolRegistry>>,
    /// The capability check every call passes; `None` runs calls unchecked (a library
    /// embedding the engine without tokens).
    pub(crate) rights: Option<Arc<crate::rights::Rights>>,
}

impl Session {
    /// Starts a new session and records it in the store.
    pub async fn create(
        model: Arc<dyn ModelClient>,
        tools: Arc<ToolRegistry>,
        store: Store,
        opts: SessionOptions,
    ) -> Result<Session, AgentError> {
        check_workspace(&opts)?;
        let id = SessionId::new();
        store
            .create_session(NewSession {
                id: id.clone(),
                agent: Some(opts.agent.clone()),
                workspace: opts.workspace.display().to_string(),
                provider: model.provider().to_owned(),
                model: model.model().to_owned(),
            })
            .await?;
        remember_secrets(&store, &tools, &opts).await?;
        Ok(Session::assemble(id, model, tools, store, opts, Vec::new()))
    }

    fn assemble(
        id: SessionId,
        model: Arc<dyn ModelClient>,
        tools: Arc<ToolRegistry>,
        store: Store,
        opts: SessionOptions,
        history: Vec<Held>,
    ) -> Session {
        Session {
            id,
            model,
            tools,
            store,
            opts,
            history,
            turn: TurnState::default(),
            meter: ContextMeter::default(),
            memory: None,
            models: None,
            steers: SteerQueue::default(),
            refused_at: None,
            debugger: None,
            pauses: PauseClock::default(),
            programs: std::sync::OnceLock::new(),
            skills: None,
            mcp: None,
            own_tools: None,
            rights: None,
        }
    }

    /// Continues a stored session: its transcript becomes the history.
    pub async fn resume(
        id: SessionId,
        model: Arc<dyn ModelClient>,
        tools: Arc<ToolRegistry>,
        store: Store,
        opts: SessionOptions,
    ) -> Result<Session, AgentError> {
        check_workspace(&opts)?;
        if store.get_session(&id).await?.is_none() {
            return Err(AgentError::NoSuchSession(id));
        }
        let messages = store.messages(&id).await?;
        let compactions = store.compactions(&id).await?;
        let history = history::rebuild(messages, &compactions);
        remember_secrets(&store, &tools, &opts).await?;
        Ok(Session::assemble(id, model, tools, store, opts, history))
    }

    /// Starts a fresh session in the same workspace with the same model and tools (`/new`,
    /// `reef agent reset`): a new transcript; notes and long-term memory stay.
    pub async fn start_new(&mut self) -> Result<(), AgentError> {
        let id = SessionId::new();
        self.store
            .create_session(NewSession {
                id: id.clone(),
                agent: Some(self.opts.agent.clone()),
                workspace: self.opts.workspace.display().to_string(),
                provider: self.model.provider().to_owned(),
                model: self.model.model().to_owned(),
            })
            .await?;
        self.id = id;
        self.history.clear();
        self.meter.forget_anchor();
        Ok(())
    }

    /// Lets `Op::SetModel` find models by provider name.
    pub fn set_model_resolver(&mut self, models: ModelResolver) {
        self.models = Some(models);
    }

    /// Lets a debugger stop the following turns before model requests and tool calls.
    /// Checks every tool call against these rights before it runs.
    pub fn set_rights(&mut self, rights: Arc<crate::rights::Rights>) {
        self.rights = Some(rights);
    }

    pub fn set_debugger(&mut self, debugger: Arc<dyn Debugger>) {
        self.debugger = Some(debugger);
    }

    /// Long-term memory for `archive` compaction.
    pub fn set_memory(&mut self, memory: reef_store::Memory) {
        self.memory = Some(memory);
    }

    /// Applies per-turn settings (`Op::Configure`).
    pub fn configure(&mut self, settings: TurnSettings) {
        self.opts.persona = settings.persona;
        self.opts.max_rounds = settings.max_rounds.max(1);
        self.opts.max_wall = Duration::from_secs(settings.max_wall_secs.max(1));
        self.opts.token_budget = settings.token_budget;
        self.opts.cost_budget_micros = settings.cost_budget_micros;
    }

    /// The context's current size in tokens (exact for a model that counts its own, else
    /// estimated) and the model's window when known.
    pub async fn context_size(&self) -> (u64, Option<u64>) {
        let (_, measure) = self.next_request().await;
        (measure.tokens, self.window())
    }

    pub fn id(&self) -> &SessionId {
        &self.id
    }

    pub fn model(&self) -> &Arc<dyn ModelClient> {
        &self.model
    }

    /// Replaces the options for the following turns (a daemon agent's persona, budget or
    /// limits changed).
    pub fn set_options(&mut self, opts: SessionOptions) {
        self.opts = opts;
    }

    /// Switches the model for the following turns (`/model`).
    pub fn set_model(&mut self, model: Arc<dyn ModelClient>) {
        self.model = model;
        self.meter.forget_anchor();
        self.refused_at = None;
    }

    /// Switches to the configured provider `provider` (`None`: the default model) through
    /// the resolver the front end set.
    pub(crate) fn switch_model(&mut self, provider: Option<&str>) -> Result<(), String> {
        let Some(models) = &self.models else {
            return Err("this session cannot switch models (no provider list was given)".into());
        };
        let model = models(provider)?;
        self.set_model(model);
        Ok(())
    }

    /// The messages the next request carries after the system prompt.
    pub fn history(&self) -> Vec<Message> {
        self.history.iter().map(|h| h.message.clone()).collect()
    }

    pub fn options(&self) -> &SessionOptions {
        &self.opts
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The event announcing this session, sent once by front ends before the first turn.
    pub fn configured_event(&self, id: SubmissionId) -> Event {
        Event {
            id,
            msg: EventMsg::SessionConfigured {
                session_id: self.id.clone(),
                provider: self.model.provider().to_owned(),
                model: self.model.model().to_owned(),
                workspace: self.opts.workspace.display().to_string(),
            },
        }
    }

    /// Writes a message to the store, then to the in-memory history.
    pub(crate) async fn persist(&mut self, message: Message) -> Result<(), AgentError> {
        let stored = self.store.append_message(&self.id, &message).await?;
        self.history.push(Held::stored(stored.seq, message));
        Ok(())
    }

    /// Records a model response's usage and cost, counts it against the turn and reports it.
    pub(crate) async fn account(
        &mut self,
        response: &ModelResponse,
        emitter: &Emitter,
    ) -> Result<(), AgentError> {
        self.turn.usage.add(&response.usage);
        // The member of a failover chain that answered, else the client itself.
        let provider = response
            .served_by
            .clone()
            .unwrap_or_else(|| self.model.provider().to_owned());
        let cost_micros = self
            .opts
            .prices
            .cost_micros(&response.model, &response.usage);
        self.turn.cost_micros += cost_micros.unwrap_or(0);
        self.store
            .record_usage(
                &self.id,
                &NewUsage {
                    provider: provider.clone(),
                    model: response.model.clone(),
                    usage: response.usage,
                    round: self.turn.rounds,
                    cost_micros,
                },
            )
            .await?;
        emitter.emit(EventMsg::Usage {
            provider,
            model: response.model.clone(),
            usage: response.usage,
            cost_micros,
        });
        Ok(())
    }

    /// Whether the small-model profile drives this session's current model.
    pub(crate) fn small(&self) -> bool {
        match self.opts.profile {
            AgentProfile::Small => true,
            AgentProfile::Standard => false,
            AgentProfile::Auto => self.model.wire_api() == Some(WireApi::Local),
        }
    }

    /// The tools the model is offered: all of them, or the small profile's few.
    pub(crate) fn offered_tools(&self) -> Vec<ToolSpec> {
        let specs = self.tools.specs();
        if self.small() {
            small::tool_specs(specs, *self.programs.get_or_init(small::Programs::on_path))
        } else {
            specs
        }
    }

    /// The system prompt: persona, base prompt and the workspace's notes (for the small
    /// profile, only when there are any).
    pub(crate) fn system_message(&self) -> Message {
        let small = self.small();
        let names: Vec<String> = if small {
            self.offered_tools().into_iter().map(|t| t.name).collect()
        } else {
            self.tools.names()
        };
        let mut system = prompt::system_prompt(
            self.opts.persona.as_deref(),
            self.opts.system_prompt.as_deref(),
            &self.opts.workspace,
            &names,
            small,
        );
        if let Some(skills) = self.skills_prompt(&names) {
            system.push_str("\n\n");
            system.push_str(skills);
        }
        let notes = prompt::notes(&self.opts.workspace, self.opts.notes_max_chars)
            .filter(|_| !small || prompt::has_notes(&self.opts.workspace));
        if let Some(notes) = notes {
            system.push_str("\n\n");
            system.push_str(&notes);
        }
        Message::system(system)
    }

    /// What the model is sent: the system prompt and the history, with any tool call left
    /// without a result (a turn interrupted or killed mid-way) answered by an error result,
    /// so the request stays valid for every wire API.
    pub(crate) fn context(&self) -> Vec<Message> {
        let mut out = Vec::with_capacity(self.history.len() + 1);
        out.push(self.system_message());
        let answered: HashSet<&str> = self
            .history
            .iter()
            .filter_map(|h| match &h.message {
                Message::Tool { call_id, .. } => Some(call_id.as_str()),
                _ => None,
            })
            .collect();
        for message in self.history.iter().map(|h| &h.message) {
            out.push(message.clone());
            let Message::Assistant { tool_calls, .. } = message else {
                continue;
            };
            for call in tool_calls {
                if !answered.contains(call.id.as_str()) {
                    out.push(Message::Tool {
                        call_id: call.id.clone(),
                        name: call.name.clone(),
                        content: "no result: the turn was interrupted before this call finished"
                            .into(),
                        is_error: true,
                    });
                }
            }
        }
        out
    }
}

/// The steering queue, usable even if a panic poisoned its lock (it holds plain data).
pub(crate) fn lock_steers(
    steers: &SteerQueue,
) -> std::sync::MutexGuard<'_, VecDeque<(SubmissionId, String)>> {
    steers
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Sends events of one submission to a front end; a front end that went away is ignored.
#[derive(Clone)]
pub(crate) struct Emitter {
    pub tx: UnboundedSender<Event>,
    pub id: SubmissionId,
}

impl Emitter {
    pub fn emit(&self, msg: EventMsg) {
        let event = Event {
            id: self.id.clone(),
            msg,
        };
        if self.tx.send(event).is_err() {
            tracing::trace!("an event was not delivered: the front end is gone");
        }
    }
}

fn check_workspace(opts: &SessionOptions) -> Result<(), AgentError> {
    if opts.workspace.is_dir() {
        Ok(())
    } else {
        Err(AgentError::Workspace {
            path: opts.workspace.display().to_string(),
            message: "is not a directory".into(),
        })
    }
}

/// Has the tools keep the fingerprints of secret values the agent's commands use in the store,
/// and redact the values behind those its earlier sessions left there, even where this
/// session never reads the secret.
async fn remember_secrets(
    store: &Store,
    tools: &ToolRegistry,
    opts: &SessionOptions,
) -> Result<(), AgentError> {
    tools.attach_secrets(store.clone(), &opts.agent).await?;
    Ok(())
}
