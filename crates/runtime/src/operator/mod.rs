//! The operator command set every front end shares (IRC's `!invoke …` in `#control` first):
//! a closed set of [`Command`]s parsed from one line, each with its usage and summary for
//! `help`. What a command does is the runtime's; this module only reads the line and says,
//! in one line, what was wrong with it.

mod parse;
mod spec;

pub use parse::{Command, DEFAULT_LOG_LINES, MAX_LOG_LINES};
pub use spec::{COMMANDS, CommandSpec, UsageError};
