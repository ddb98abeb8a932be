//! The grammar of `reef routine …` and `reef job …`.

use clap::{Args, Subcommand};

#[derive(Debug, Subcommand)]
pub enum RoutineCommand {
    /// Every routine: trigger, action, state and next fire.
    List(crate::args::JsonFlag),
    /// One routine in detail.
    Show {
        name: String,
        #[arg(long)]
        json: bool,
    },
    /// Create a routine: one trigger (--cron, --every, --event, --webhook or --manual) and
    /// one action (--agent + --message, or --template + --task).
    Create {
        name: String,
        #[command(flatten)]
        fields: Box<RoutineFieldArgs>,
        #[arg(long)]
        json: bool,
    },
    /// Replace a routine's definition (give it whole); its fire history is kept.
    Edit {
        name: String,
        #[command(flatten)]
        fields: Box<RoutineFieldArgs>,
        #[arg(long)]
        json: bool,
    },
    /// Delete a routine and its fire history.
    Delete {
        name: String,
        #[arg(long)]
        json: bool,
    },
    /// Enable a routine: its failures are cleared; fires missed while off are not caught up.
    Enable {
        name: String,
        #[arg(long)]
        json: bool,
    },
    /// Disable a routine.
    Disable {
        name: String,
        #[arg(long)]
        json: bool,
    },
    /// Fire a routine now.
    Run {
        name: String,
        #[arg(long)]
        json: bool,
    },
    /// A routine's fires, newest first: run or skipped, and why.
    History {
        name: String,
        /// At most this many.
        #[arg(long, default_value_t = 20)]
        limit: usize,
        #[arg(long)]
        json: bool,
    },
}

/// The keys of `[routines.NAME]` as flags.
#[derive(Debug, Default, Args)]
pub struct RoutineFieldArgs {
    /// Cron expression (5 or 6 fields, JAN-DEC, SUN-SAT, @hourly …).
    #[arg(long)]
    pub cron: Option<String>,
    /// The cron expression's IANA zone (default: the system's).
    #[arg(long)]
    pub tz: Option<String>,
    /// A fixed interval: 90s, 5m, 1h30m.
    #[arg(long)]
    pub every: Option<String>,
    /// An event kind (a trailing * matches a prefix).
    #[arg(long)]
    pub event: Option<String>,
    /// A regular expression the event's text must match.
    #[arg(long = "match", value_name = "REGEX")]
    pub pattern: Option<String>,
    /// A [hooks.NAME] whose deliveries fire it.
    #[arg(long)]
    pub webhook: Option<String>,
    /// Fired only by `reef routine run`.
    #[arg(long)]
    pub manual: bool,
    /// Message this agent …
    #[arg(long)]
    pub agent: Option<String>,
    /// … with this text.
    #[arg(long)]
    pub message: Option<String>,
    /// Or spawn an agent of this template …
    #[arg(long)]
    pub template: Option<String>,
    /// … with this task …
    #[arg(long)]
    pub task: Option<String>,
    /// … destroyed after this long (default 15m).
    #[arg(long)]
    pub timeout: Option<String>,
    /// While a run is going: skip (default), queue or replace.
    #[arg(long)]
    pub concurrency: Option<String>,
    /// Failed runs in a row that disable it (default 3; 0 never).
    #[arg(long)]
    pub max_failures: Option<u32>,
    /// Shortest time between runs of an event or webhook routine.
    #[arg(long)]
    pub cooldown: Option<String>,
    /// Fires missed while reef was down: skip (default), once or all.
    #[arg(long)]
    pub catch_up: Option<String>,
    /// The most missed fires `--catch-up all` runs (default 100).
    #[arg(long)]
    pub catch_up_max: Option<u32>,
    /// Tokens one run may use.
    #[arg(long)]
    pub run_tokens: Option<u64>,
    /// US dollars one run may cost.
    #[arg(long)]
    pub run_cost: Option<f64>,
    /// Tokens all runs of a UTC day may use.
    #[arg(long)]
    pub day_tokens: Option<u64>,
    /// US dollars all runs of a UTC day may cost.
    #[arg(long)]
    pub day_cost: Option<f64>,
    /// Create it disabled.
    #[arg(long)]
    pub disabled: bool,
}

impl RoutineFieldArgs {
    pub fn into_fields(self) -> reef_config::RoutineFields {
        reef_config::RoutineFields {
            cron: self.cron,
            tz: self.tz,
            every: self.every,
            event: self.event,
            pattern: self.pattern,
            webhook: self.webhook,
            manual: self.manual.then_some(true),
            agent: self.agent,
            message: self.message,
            template: self.template,
            task: self.task,
            timeout: self.timeout,
            concurrency: self.concurrency,
            max_failures: self.max_failures,
            cooldown: self.cooldown,
            catch_up: self.catch_up,
            catch_up_max: self.catch_up_max,
            run_tokens: self.run_tokens,
            run_cost: self.run_cost,
            day_tokens: self.day_tokens,
            day_cost: self.day_cost,
            enabled: self.disabled.then_some(false),
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum JobCommand {
    /// Jobs (routine runs), newest first.
    List {
        /// Only jobs in this state: pending, running, completed, failed or cancelled.
        #[arg(long)]
        state: Option<String>,
        #[arg(long, default_value_t = 20)]
        limit: usize,
        #[arg(long)]
        json: bool,
    },
    /// One job in detail.
    Status {
        id: u64,
        #[arg(long)]
        json: bool,
    },
    /// Cancel a job that has not ended (a spawned run's agent is destroyed).
    Cancel {
        id: u64,
        #[arg(long)]
        json: bool,
    },
}
