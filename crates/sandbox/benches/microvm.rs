//! The microVM backend's start: the wall time of a session's first command (`true`) when its
//! VM is (1) booted on demand, a cold boot, and (2) handed out by the warm pool, booted ahead;
//! then (3) a later command in the same VM. Also each VM's own boot time (QEMU's start to the
//! agent's first answer) and, for the VM the pool starts to replace the one it handed out, the
//! time to restore it from the snapshot of its first (QEMU's start to the agent's answer after
//! reseeding). The two first-command variants alternate, each in a fresh session.
//!
//! Run with `cargo bench -p reef-sandbox --bench microvm` after building the guest image
//! (`scripts/microvm-image ~/.cache/reef/microvm`, or set `REEF_MICROVM_IMAGE`). It says
//! whether the VMs ran under KVM or software emulation.
#![allow(clippy::print_stdout, reason = "a benchmark reports on stdout")]
#![allow(clippy::print_stderr, reason = "a benchmark reports its setup errors")]

use reef_sandbox::{
    Accelerator, ExecRequest, HandOut, MicrovmSettings, Sandbox, SandboxBackend, SandboxPolicy,
};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

const ROUNDS: usize = 8;
const LATER_COMMANDS: usize = 20;

fn main() -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("microvm bench: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("microvm bench: {message}");
            ExitCode::FAILURE
        }
    }
}

fn image() -> PathBuf {
    std::env::var_os("REEF_MICROVM_IMAGE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/reef/microvm")
        })
}

fn policy(pool: usize) -> SandboxPolicy {
    SandboxPolicy {
        backend: SandboxBackend::Microvm,
        microvm: MicrovmSettings {
            image: image(),
            pool,
            memory_mib: 256,
            accelerator: Accelerator::Auto,
            ..MicrovmSettings::default()
        },
        ..SandboxPolicy::default()
    }
}

async fn timed_true(sandbox: &Sandbox, ws: &Path) -> Result<Duration, String> {
    let started = Instant::now();
    let out = sandbox
        .run(ExecRequest::new(
            "true",
            Vec::new(),
            ws.to_path_buf(),
            Duration::from_secs(60),
        ))
        .await
        .map_err(|e| e.to_string())?;
    if !out.success() {
        return Err(format!("`true` failed in the VM: {out:?}"));
    }
    Ok(started.elapsed())
}

async fn run() -> Result<(), String> {
    let ws = std::env::temp_dir().join(format!("reef-microvm-bench-{}", std::process::id()));
    std::fs::create_dir_all(&ws).map_err(|e| format!("create {}: {e}", ws.display()))?;
    let (accel, why) = reef_sandbox::choose_acceleration(Accelerator::Auto)?;
    println!("microVMs run under {}: {why}", accel.as_str());
    let mut cold = Vec::new();
    let mut pooled = Vec::new();
    let mut boots = Vec::new();
    let mut later = Vec::new();
    let mut restores = Vec::new();
    for round in 0..ROUNDS {
        let sandbox = Sandbox::new(policy(0));
        cold.push(timed_true(&sandbox, &ws).await?);
        let status = sandbox.microvm_status().ok_or("no VM status")?;
        let current = status.current.ok_or("no current VM")?;
        if current.handed_out != HandOut::Cold {
            return Err(format!(
                "expected a cold boot, got {:?}",
                current.handed_out
            ));
        }
        boots.push(current.boot);
        if round == 0 {
            for _ in 0..LATER_COMMANDS {
                later.push(timed_true(&sandbox, &ws).await?);
            }
        }
        drop(sandbox);

        let sandbox = Sandbox::new(policy(1));
        sandbox.prepare(&ws).map_err(|e| e.to_string())?;
        // Wait for the pool's VM; the time to get there is not what is measured.
        let ready_by = Instant::now() + Duration::from_secs(300);
        while sandbox.microvm_status().is_none_or(|s| s.pool.idle == 0) {
            if Instant::now() > ready_by {
                return Err("the pool booted no VM within 300 s".into());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        pooled.push(timed_true(&sandbox, &ws).await?);
        let current = sandbox
            .microvm_status()
            .and_then(|s| s.current)
            .ok_or("no current VM")?;
        if current.handed_out != HandOut::Ready {
            return Err(format!(
                "expected a pooled VM, got {:?}",
                current.handed_out
            ));
        }
        boots.push(current.boot);
        // The replacement is restored from the snapshot of the pool's first VM.
        let restored_by = Instant::now() + Duration::from_secs(300);
        loop {
            let pool = sandbox.microvm_status().ok_or("no VM status")?.pool;
            if pool.restores == 1 && pool.idle == 1 {
                restores.push(pool.last_restore.ok_or("no restore time")?);
                break;
            }
            if Instant::now() > restored_by {
                return Err(format!("the pool restored no VM within 300 s: {pool:?}"));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        drop(sandbox);
    }
    let _ = std::fs::remove_dir_all(&ws);
    let cold_median = report("first command, cold boot", &mut cold);
    let pooled_median = report("first command, VM from the pool", &mut pooled);
    let boot_median = report("a VM's boot (QEMU start to agent)", &mut boots);
    let restore_median = report("a VM's restore from a snapshot", &mut restores);
    report("a later command in the same VM", &mut later);
    println!(
        "the pool hands out a VM in {:.3}x the time of a cold boot",
        pooled_median.as_secs_f64() / cold_median.as_secs_f64()
    );
    println!(
        "a restore takes {:.3}x the time of a boot",
        restore_median.as_secs_f64() / boot_median.as_secs_f64()
    );
    Ok(())
}

fn report(name: &str, times: &mut [Duration]) -> Duration {
    times.sort();
    let median = times[times.len() / 2];
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "{name:<40} median {:>9.1} ms  (min {:.1}, max {:.1}, n = {})",
        ms(median),
        ms(times[0]),
        ms(times[times.len() - 1]),
        times.len()
    );
    median
}
