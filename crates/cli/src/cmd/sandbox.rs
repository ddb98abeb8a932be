//! `reef sandbox run` (one command under the tool sandbox) and `reef sandbox status` (what is
//! configured, whether it works here), plus the helper command every kernel backend re-executes.

use crate::args::{BackendArg, NetArg, SandboxRunArgs};
use crate::exit::{self, Exit};
use crate::home;
use anyhow::Context as _;
use reef_config::{Config, NetworkModeName, SandboxBackendName, format_size};
use reef_sandbox::{
    ExecRequest, HelperCommand, NetRequest, NetVerdict, Sandbox, SandboxError, SandboxPolicy,
};
use serde::Serialize;
use std::io::Write as _;
use std::time::Duration;

/// The hidden subcommand under which the `reef` binary acts as the sandbox helper.
pub const HELPER_SUBCOMMAND: &str = "sandbox-exec";

/// Exit code of `sandbox run` when the command's time limit expired (as `timeout(1)`).
const TIMED_OUT: u8 = 124;
/// Exit code of `sandbox run` when the command could not be started (as a shell).
const CANNOT_EXECUTE: u8 = 126;
/// Exit code of `sandbox run` when the command was not found (as a shell).
const NOT_FOUND: u8 = 127;

/// The small helper program: the sandbox alone, a fraction of reef's size, so starting it for
/// each command costs less than starting all of reef again. Built with the workspace
/// (`cargo install --path crates/sandbox` installs it beside `reef`).
pub const HELPER_PROGRAM: &str = "reef-sandbox-exec";

/// How kernel backends start their helper: [`HELPER_PROGRAM`] beside this binary when it is
/// there and safe to run, else this very binary with `sandbox-exec`.
pub fn helper() -> anyhow::Result<HelperCommand> {
    let program = std::env::current_exe()
        .context("cannot find the reef executable to start the sandbox helper")?;
    if let Some(small) = small_helper(&program) {
        return Ok(HelperCommand {
            program: small,
            args: Vec::new(),
        });
    }
    Ok(HelperCommand {
        program,
        args: vec![HELPER_SUBCOMMAND.to_owned()],
    })
}

/// [`HELPER_PROGRAM`] in `reef`'s directory, if it is a regular file (not a link), executable,
/// owned by this user or root, and writable by no one else: whoever could replace it could run
/// anything outside the sandbox.
fn small_helper(reef: &std::path::Path) -> Option<std::path::PathBuf> {
    use std::os::unix::fs::MetadataExt as _;
    let path = reef.parent()?.join(HELPER_PROGRAM);
    let meta = std::fs::symlink_metadata(&path).ok()?;
    let me = rustix::process::geteuid().as_raw();
    let owner_ok = meta.uid() == me || meta.uid() == 0;
    let mode = meta.mode();
    (meta.file_type().is_file() && owner_ok && mode & 0o022 == 0 && mode & 0o100 != 0)
        .then_some(path)
}

/// The policy of a one-shot run: as every command's (`reef_agent::sandbox_policy`), without
/// its self-test when one passed for this policy since the machine booted
/// (`sandbox_works`).
async fn one_shot_policy(config: &Config) -> anyhow::Result<(SandboxPolicy, Option<String>)> {
    let policy = reef_agent::policy_from_config(config, Some(helper()?));
    if policy.backend == reef_sandbox::SandboxBackend::Landlock
        && super::sandbox_works::remembered(&config.home, &policy)
    {
        return Ok((policy, None));
    }
    let (tested, warning) = reef_agent::sandbox_policy(config, Some(helper()?)).await?;
    if tested.backend == reef_sandbox::SandboxBackend::Landlock && warning.is_none() {
        super::sandbox_works::remember(&config.home, &tested);
    }
    Ok((tested, warning))
}

pub async fn run(overrides: &[String], args: SandboxRunArgs) -> anyhow::Result<u8> {
    let mut config = home::load_config(overrides)?;
    apply_flags(&mut config, &args)?;
    let (mut policy, warning) = one_shot_policy(&config).await?;
    // One command: a sandbox of its own, without a warm one (or a VM booted ahead) to serve
    // the next.
    policy.warm = false;
    policy.microvm.pool = 0;
    // `--backend none` on the command line is a deliberate choice; say nothing about it.
    if let Some(warning) = warning
        && args.backend != Some(BackendArg::None)
    {
        eprintln!("reef: warning: {warning}");
    }
    let cwd = std::env::current_dir().context("cannot read the current directory")?;
    let timeout = args
        .timeout
        .unwrap_or(Duration::from_secs(config.tools.shell_timeout_secs));
    let (program, rest) = args
        .command
        .split_first()
        .ok_or_else(|| Exit::usage("no command given: reef sandbox run -- CMD ARGS…"))?;
    let request = ExecRequest::new(program.clone(), rest.to_vec(), cwd, timeout);
    let sandbox = Sandbox::new(policy);
    let output = match sandbox.run(request).await {
        Ok(output) => output,
        Err(err @ SandboxError::Spawn { .. }) => {
            let code = match &err {
                SandboxError::Spawn { source, .. }
                    if source.kind() == std::io::ErrorKind::NotFound =>
                {
                    NOT_FOUND
                }
                _ => CANNOT_EXECUTE,
            };
            eprintln!("reef: {err}");
            return Ok(code);
        }
        Err(err) => return Err(err.into()),
    };
    {
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(output.stdout.as_bytes());
        let _ = out.flush();
        let mut err = std::io::stderr().lock();
        let _ = err.write_all(output.stderr.as_bytes());
        let _ = err.flush();
    }
    for problem in sandbox.limit_problems() {
        eprintln!("reef: warning: limit not enforced: {problem}");
    }
    for request in sandbox.network_log() {
        eprintln!("reef: net {}", show_request(&request));
    }
    for (truncated, stream) in [
        (output.stdout_truncated, "stdout"),
        (output.stderr_truncated, "stderr"),
    ] {
        if truncated {
            eprintln!("reef: {stream} was cut at the sandbox's output cap");
        }
    }
    if output.timed_out {
        eprintln!(
            "reef: `{program}` timed out after {} and was stopped",
            show_duration(timeout)
        );
        return Ok(TIMED_OUT);
    }
    Ok(match (output.exit_code, output.signal) {
        (Some(code), _) => u8::try_from(code & 0xff).unwrap_or(exit::RUNTIME),
        (None, Some(signal)) => u8::try_from((128 + signal) & 0xff).unwrap_or(exit::RUNTIME),
        (None, None) => exit::RUNTIME,
    })
}

/// Lays the command-line flags over `[sandbox]`.
fn apply_flags(config: &mut Config, args: &SandboxRunArgs) -> anyhow::Result<()> {
    let s = &mut config.sandbox;
    if let Some(backend) = args.backend {
        s.backend = match backend {
            BackendArg::Landlock => SandboxBackendName::Landlock,
            BackendArg::None => SandboxBackendName::None,
            BackendArg::Microvm => SandboxBackendName::Microvm,
        };
        if s.required && s.backend == SandboxBackendName::None {
            return Err(Exit::usage(
                "--backend none conflicts with sandbox.required = true (see `reef config show`)",
            ));
        }
    }
    if let Some(net) = args.net {
        s.network = match net {
            NetArg::None => NetworkModeName::None,
            NetArg::Allowlist => NetworkModeName::Allowlist,
            NetArg::Full => NetworkModeName::Full,
        };
    }
    s.allow_domains.extend(args.allow_domains.iter().cloned());
    if let Some(mem) = args.mem {
        s.memory_bytes = mem;
    }
    for path in &args.writable {
        let absolute = std::path::absolute(path)
            .map_err(|err| Exit::usage(format!("--rw {}: {err}", path.display())))?;
        s.writable.push(absolute);
    }
    Ok(())
}

/// One proxy log line: `GET example.com:80 allowed` / `… refused: why`.
fn show_request(r: &NetRequest) -> String {
    let target = if r.host.is_empty() {
        "(malformed request)".to_owned()
    } else {
        format!("{} {}:{}", r.method, r.host, r.port)
    };
    match &r.verdict {
        NetVerdict::Allowed => format!("{target} allowed"),
        NetVerdict::Denied(why) => format!("{target} refused: {why}"),
        NetVerdict::Failed(why) => format!("{target} failed: {why}"),
    }
}

fn show_duration(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{} s", d.as_secs())
    } else {
        format!("{} ms", d.as_millis())
    }
}

/// The report of `reef sandbox status --json`.
#[derive(Debug, Serialize)]
struct Status {
    backend: &'static str,
    required: bool,
    network: &'static str,
    allow_domains: Vec<String>,
    writable: Vec<String>,
    limits: LimitsView,
    /// Whether the configured backend ran a test command on this machine.
    works: bool,
    /// Why it did not.
    error: Option<String>,
    /// Resource limits the session could not put in place (cgroup controllers missing or not
    /// delegated); empty when every limit applies.
    limit_problems: Vec<String>,
    /// The backend tools actually get: the configured one, or `none` after a fallback.
    effective_backend: &'static str,
    /// The program the kernel backend starts for each command (with its arguments).
    helper: String,
    /// Whether that is the small helper rather than reef itself.
    small_helper: bool,
    /// What the kernel offers, one feature per line.
    probe: Vec<String>,
    /// The microVM backend's settings and what it runs under here (with that backend).
    microvm: Option<MicrovmView>,
}

#[derive(Debug, Serialize)]
struct MicrovmView {
    /// `kvm` or `tcg` (software emulation), or none when neither can be used.
    acceleration: Option<reef_sandbox::Acceleration>,
    /// Why: KVM's state on this machine.
    acceleration_detail: String,
    image: String,
    memory_mib: u32,
    cpus: u32,
    pool: usize,
    /// How long the test VM took to boot, when it did.
    test_boot_ms: Option<u128>,
}

#[derive(Debug, Serialize)]
struct LimitsView {
    memory: String,
    file_size: String,
    cpu_secs: u64,
    max_processes: u64,
    open_files: u64,
}

pub async fn status(overrides: &[String], json: bool) -> anyhow::Result<u8> {
    let config = home::load_config(overrides)?;
    let helper = helper()?;
    let small_helper = helper.args.is_empty();
    let helper_line = std::iter::once(helper.program.display().to_string())
        .chain(helper.args.iter().cloned())
        .collect::<Vec<_>>()
        .join(" ");
    let policy = reef_agent::policy_from_config(&config, Some(helper));
    let mut tested = policy.clone();
    // The test needs one VM, not a pool of them.
    tested.microvm.pool = 0;
    let sandbox = Sandbox::new(tested);
    let test = sandbox.self_test().await;
    let s = &config.sandbox;
    let microvm = (policy.backend == reef_sandbox::SandboxBackend::Microvm).then(|| {
        let (acceleration, acceleration_detail) =
            match reef_sandbox::choose_acceleration(policy.microvm.accelerator) {
                Ok((accel, why)) => (Some(accel), why),
                Err(why) => (None, why),
            };
        MicrovmView {
            acceleration,
            acceleration_detail,
            image: policy.microvm.image.display().to_string(),
            memory_mib: policy.microvm.memory_mib,
            cpus: policy.microvm.cpus,
            pool: policy.microvm.pool,
            test_boot_ms: sandbox
                .microvm_status()
                .and_then(|s| s.current)
                .map(|c| c.boot.as_millis()),
        }
    });
    let works = test.is_ok();
    let report = Status {
        backend: s.backend.as_str(),
        required: s.required,
        network: s.network.as_str(),
        allow_domains: s.allow_domains.clone(),
        writable: s.writable.iter().map(|p| p.display().to_string()).collect(),
        limits: LimitsView {
            memory: format_size(s.memory_bytes),
            file_size: format_size(s.file_size_bytes),
            cpu_secs: s.cpu_secs,
            max_processes: s.max_processes,
            open_files: s.open_files,
        },
        works,
        error: test.err().map(|e| e.to_string()),
        limit_problems: sandbox.limit_problems(),
        effective_backend: effective(&policy, works, s.required).await,
        helper: helper_line,
        small_helper,
        probe: reef_sandbox::probe().summary_lines(),
        microvm,
    };
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_status(&report);
    }
    Ok(if works { exit::OK } else { exit::RUNTIME })
}

/// The backend tools end up with: the configured one when it works, after a fallback
/// `landlock` (from `microvm`, when it works) or none, nothing at all ("refused") when it is
/// required and broken.
async fn effective(policy: &SandboxPolicy, works: bool, required: bool) -> &'static str {
    match (works, required) {
        (true, _) => policy.backend.as_str(),
        (false, true) => "refused (tools will not run)",
        (false, false) if policy.backend == reef_sandbox::SandboxBackend::Microvm => {
            let mut landlock = policy.clone();
            landlock.backend = reef_sandbox::SandboxBackend::Landlock;
            if reef_sandbox::self_test(&landlock).await.is_ok() {
                "landlock"
            } else {
                "none"
            }
        }
        (false, false) => "none",
    }
}

fn print_status(r: &Status) {
    println!(
        "backend:   {}{}",
        r.backend,
        if r.required { " (required)" } else { "" }
    );
    match &r.error {
        None => println!("works:     yes"),
        Some(err) => println!("works:     NO: {err}"),
    }
    println!("tools get: {}", r.effective_backend);
    if let Some(vm) = &r.microvm {
        let accel = vm.acceleration.map_or("none", |a| a.as_str());
        println!("vm:        {accel}: {}", vm.acceleration_detail);
        let boot = vm
            .test_boot_ms
            .map(|ms| format!("; the test VM booted in {:.1} s", ms as f64 / 1000.0))
            .unwrap_or_default();
        println!(
            "           image {}, {} MiB, {} CPU(s), {} kept booted per workspace{boot}",
            vm.image, vm.memory_mib, vm.cpus, vm.pool
        );
    } else if r.small_helper {
        println!("helper:    {}", r.helper);
    } else {
        println!(
            "helper:    {} (reef itself; {HELPER_PROGRAM} beside it starts faster)",
            r.helper
        );
    }
    let domains = if r.allow_domains.is_empty() {
        String::new()
    } else {
        format!(" ({})", r.allow_domains.join(", "))
    };
    println!("network:   {}{domains}", r.network);
    if !r.writable.is_empty() {
        println!("writable:  the workspace, {}", r.writable.join(", "));
    }
    let l = &r.limits;
    println!(
        "limits:    memory {}, file size {}, cpu {} s, {} processes, {} open files",
        l.memory, l.file_size, l.cpu_secs, l.max_processes, l.open_files
    );
    for problem in &r.limit_problems {
        println!("  NOT ENFORCED: {problem}");
    }
    println!("this machine:");
    for line in &r.probe {
        println!("  {line}");
    }
}

#[cfg(test)]
mod tests {
    use super::{HELPER_PROGRAM, small_helper};
    use std::os::unix::fs::PermissionsExt as _;

    #[test]
    fn the_small_helper_is_used_only_when_no_one_else_could_have_replaced_it() {
        let dir = tempfile::tempdir().unwrap();
        let reef = dir.path().join("reef");
        std::fs::write(&reef, "").unwrap();
        assert_eq!(small_helper(&reef), None, "none beside reef");

        let helper = dir.path().join(HELPER_PROGRAM);
        std::fs::write(&helper, "").unwrap();
        let with_mode = |mode: u32| {
            std::fs::set_permissions(&helper, std::fs::Permissions::from_mode(mode)).unwrap();
            small_helper(&reef)
        };
        assert_eq!(with_mode(0o755), Some(helper.clone()));
        assert_eq!(with_mode(0o644), None, "not executable");
        assert_eq!(with_mode(0o775), None, "writable by the group");
        assert_eq!(with_mode(0o757), None, "writable by anyone");

        // A link in its place is not followed.
        std::fs::remove_file(&helper).unwrap();
        let real = dir.path().join("elsewhere");
        std::fs::write(&real, "").unwrap();
        std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::os::unix::fs::symlink(&real, &helper).unwrap();
        assert_eq!(small_helper(&reef), None, "a link");
    }
}
