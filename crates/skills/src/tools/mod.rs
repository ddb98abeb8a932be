//! The tools skills give an agent: `skill` (load one), one tool per skill that declares
//! `parameters`, and `skill_create` for agents that may write skills.

mod command;
mod create;
mod load;
#[cfg(feature = "wasm")]
mod wasm;

pub(crate) use command::CommandTool;
pub(crate) use create::CreateTool;
pub(crate) use load::SkillTool;
#[cfg(feature = "wasm")]
pub(crate) use wasm::WasmTool;
