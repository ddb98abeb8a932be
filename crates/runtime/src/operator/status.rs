//! `status`: the daemon at a glance — agents and their states, uptime, the turn queue, the
//! model in use, today's tokens and cost, the process's memory and the store's disk use.

use super::run::{dollars, state_counts};
use crate::error::RuntimeError;
use crate::kernel::Runtime;
use std::path::Path;
use std::time::Duration;

impl Runtime {
    pub(crate) async fn status_lines(&self) -> Result<Vec<String>, RuntimeError> {
        let agents = self.list_agents().await?;
        let (waiting, working) = self.store().inbox_counts().await?;
        let today = self
            .store()
            .cost_report(None, Some(&reef_store::start_of_today()))
            .await?;
        let tokens: u64 = today
            .iter()
            .map(|r| r.usage.input_tokens + r.usage.output_tokens)
            .sum();
        let cost: u64 = today.iter().map(|r| r.cost_micros).sum();
        let unpriced: u64 = today.iter().map(|r| r.unpriced_requests).sum();
        let limit = self.config().daemon.max_concurrent_turns;
        let running = limit.saturating_sub(self.inner.turns.available_permits());
        let model = match self.config().provider() {
            Ok(p) => format!("{} ({})", p.name, p.model),
            Err(_) => "none configured".to_owned(),
        };
        let mut lines = vec![
            format!(
                "{} agents: {} · up {}",
                agents.len(),
                state_counts(&agents),
                uptime(self.inner.started.elapsed())
            ),
            format!(
                "turns: {running} of {limit} running · {waiting} messages waiting, {working} in \
                 progress · model {model}"
            ),
            format!(
                "today: {tokens} tokens · {}{}",
                dollars(cost),
                if unpriced > 0 {
                    format!(" (+{unpriced} requests without a price)")
                } else {
                    String::new()
                }
            ),
        ];
        // File system reads, off the async threads.
        let store_path = self.store().path().map(Path::to_path_buf);
        let home = self.config().home.clone();
        let (memory, store, free) = tokio::task::spawn_blocking(move || {
            (
                resident_bytes(),
                store_path.as_deref().map_or(0, store_bytes),
                free_bytes(&home),
            )
        })
        .await
        .unwrap_or((None, 0, None));
        let memory = memory.map_or_else(|| "unknown".to_owned(), size);
        let free = free.map_or_else(String::new, |f| format!(", {} free", size(f)));
        lines.push(format!(
            "memory {memory} resident · store {}{free}",
            size(store)
        ));
        Ok(lines)
    }
}

fn uptime(elapsed: Duration) -> String {
    let secs = elapsed.as_secs();
    match secs {
        0..60 => format!("{secs}s"),
        60..3600 => format!("{}m{:02}s", secs / 60, secs % 60),
        3600..86400 => format!("{}h{:02}m", secs / 3600, (secs % 3600) / 60),
        _ => format!("{}d{:02}h", secs / 86400, (secs % 86400) / 3600),
    }
}

fn size(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

/// The process's resident memory, from `/proc/self/status`.
fn resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// The store's database with its write-ahead log.
fn store_bytes(path: &Path) -> u64 {
    let mut total = 0;
    for suffix in ["", "-wal", "-shm"] {
        let mut name = path.as_os_str().to_owned();
        name.push(suffix);
        total += std::fs::metadata(Path::new(&name)).map_or(0, |m| m.len());
    }
    total
}

/// Free space for reef's home.
fn free_bytes(home: &Path) -> Option<u64> {
    let stat = rustix::fs::statvfs(home).ok()?;
    Some(stat.f_bavail.saturating_mul(stat.f_frsize))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uptime_and_sizes_read_well() {
        assert_eq!(uptime(Duration::from_secs(42)), "42s");
        assert_eq!(uptime(Duration::from_secs(3 * 3600 + 7 * 60)), "3h07m");
        assert_eq!(uptime(Duration::from_secs(2 * 86400 + 5 * 3600)), "2d05h");
        assert_eq!(size(512), "512 B");
        assert_eq!(size(3 * 1024 * 1024 / 2), "1.5 MiB");
    }

    #[test]
    fn this_process_has_resident_memory() {
        assert!(resident_bytes().is_some_and(|b| b > 0));
    }
}
