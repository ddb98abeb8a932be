//! reef-sandbox: the only place reef starts processes — a confined runner with timeouts,
//! output caps, a scrubbed environment and process-group kill, long-running processes on
//! pipes or on a pseudo-terminal — plus a probe of the isolation features this machine
//! offers.

mod browser;
mod capture;
mod descriptors;
mod error;
mod group;
mod hidden;
mod linux;
mod microvm;
mod policy;
mod private_dir;
mod probe;
mod proxy;
mod request;
mod runner;
mod spawned;
mod terminal;
mod warm;

pub use browser::open_in_browser;
pub use descriptors::raise_open_files_limit;
pub use error::SandboxError;
pub use hidden::{READ_ONLY_IN_WORKSPACE, home_secrets};
pub use linux::helper_main;
pub use microvm::{
    Acceleration, CurrentVm, HandOut, MicrovmStatus, PoolStats, choose_acceleration,
};
pub use policy::{
    Accelerator, DEFAULT_ENV_ALLOW, HelperCommand, Limits, MicrovmSettings, NetworkMode,
    SandboxBackend, SandboxPolicy,
};
pub use probe::{Availability, CgroupVersion, Feature, IsolationReport, probe, probe_root};
pub use proxy::{
    DomainAllowList, MAX_CONNECTIONS as MAX_PROXY_CONNECTIONS, NetProxy, NetRequest, NetVerdict,
    narrow_domains,
};
pub use request::{ExecOutput, ExecRequest};
pub use runner::{Sandbox, self_test};
pub use spawned::Spawned;
pub use terminal::{TermSize, Terminal};
