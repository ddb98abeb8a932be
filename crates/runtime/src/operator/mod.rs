//! The operator command set every front end shares (IRC's `!invoke …` in `#control` first):
//! a closed set of [`Command`]s parsed from one line, each with its usage and summary for
//! `help`, and [`Runtime::operate`](crate::Runtime::operate), which runs one and answers in
//! lines a chat can show.

mod parse;
mod run;
mod spec;
mod status;

pub use parse::{Command, DEFAULT_LOG_LINES, MAX_LOG_LINES};
pub use run::{DEFAULT_TEMPLATE, Reply};
pub use spec::{COMMANDS, CommandSpec, UsageError};
