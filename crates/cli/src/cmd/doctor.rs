//! `reef doctor`: checks configuration, store, provider reachability and sandbox support, and
//! in cluster mode both engines: PostgreSQL (connected and migrated) and NATS (JetStream on).

use crate::exit;
use crate::home;
use reef_sandbox::{NetworkMode, SandboxBackend, SandboxPolicy};
use serde::Serialize;

#[derive(Debug, Serialize)]
struct Check {
    name: &'static str,
    status: Status,
    detail: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
enum Status {
    Ok,
    Warn,
    Fail,
}

pub async fn doctor(overrides: &[String], json: bool) -> anyhow::Result<u8> {
    let mut checks = Vec::new();
    let config = match home::load_config(overrides) {
        Ok(config) => {
            let files: Vec<String> = config
                .files
                .iter()
                .map(|f| f.display().to_string())
                .collect();
            checks.push(Check {
                name: "config",
                status: Status::Ok,
                detail: if files.is_empty() {
                    format!(
                        "no config file in {} (defaults only)",
                        config.home.display()
                    )
                } else {
                    format!("read {}", files.join(", "))
                },
            });
            Some(config)
        }
        Err(err) => {
            checks.push(Check {
                name: "config",
                status: Status::Fail,
                detail: format!("{err:#}"),
            });
            None
        }
    };
    if let Some(config) = &config {
        match home::open_store(config) {
            Ok(store) => checks.push(Check {
                name: "store",
                status: Status::Ok,
                detail: format!(
                    "{} (schema v{})",
                    config.store_path.display(),
                    store.schema_version().unwrap_or(0)
                ),
            }),
            Err(err) => checks.push(Check {
                name: "store",
                status: Status::Fail,
                detail: format!("{err:#}"),
            }),
        }
        checks.push(provider_check(config).await);
        if let Some(cluster) = &config.cluster {
            checks.push(database_check(cluster).await);
            checks.push(bus_check(cluster).await);
        }
    }
    checks.push(isolation_check(config.as_ref()).await);

    let failed = checks.iter().any(|c| c.status == Status::Fail);
    if json {
        println!("{}", serde_json::to_string_pretty(&checks)?);
    } else {
        for c in &checks {
            let mark = match c.status {
                Status::Ok => "ok  ",
                Status::Warn => "warn",
                Status::Fail => "FAIL",
            };
            println!("[{mark}] {:<10} {}", c.name, c.detail);
        }
    }
    Ok(if failed { exit::RUNTIME } else { exit::OK })
}

/// Whether tools will be confined: the configured backend's self-test, judged against
/// `sandbox.required`, with the kernel's features for context.
async fn isolation_check(config: Option<&reef_config::Config>) -> Check {
    let machine = reef_sandbox::probe().summary_lines().join("; ");
    let helper = match super::sandbox::helper() {
        Ok(helper) => helper,
        Err(err) => {
            return Check {
                name: "isolation",
                status: Status::Fail,
                detail: format!("{err:#}"),
            };
        }
    };
    let (policy, required) = match config {
        Some(config) => (
            reef_agent::policy_from_config(config, Some(helper)),
            config.sandbox.required,
        ),
        // The config is broken (reported above): judge the default backend.
        None => (
            SandboxPolicy {
                backend: SandboxBackend::Landlock,
                helper: Some(helper),
                ..SandboxPolicy::default()
            },
            false,
        ),
    };
    if policy.backend == SandboxBackend::Plain {
        return Check {
            name: "isolation",
            status: Status::Warn,
            detail: format!("{}. This machine: {machine}", reef_agent::DISABLED_WARNING),
        };
    }
    let backend = policy.backend.as_str();
    let mut tested = policy.clone();
    // One VM proves the microvm backend; a pool would boot more, only to stop them.
    tested.microvm.pool = 0;
    let sandbox = reef_sandbox::Sandbox::new(tested);
    match sandbox.self_test().await {
        Ok(()) if !sandbox.limit_problems().is_empty() => Check {
            name: "isolation",
            status: Status::Warn,
            detail: format!(
                "{backend} backend active, but some limits are not enforced: {}. \
                 This machine: {machine}",
                sandbox.limit_problems().join("; ")
            ),
        },
        Ok(()) => Check {
            name: "isolation",
            status: Status::Ok,
            detail: format!(
                "{backend} backend active: network {}, memory {}, {} processes, cpu {} s. \
                 This machine: {machine}",
                network_name(policy.network),
                policy
                    .limits
                    .memory_bytes
                    .map_or_else(|| "unlimited".to_owned(), reef_config::format_size),
                policy
                    .limits
                    .max_processes
                    .map_or_else(|| "unlimited".to_owned(), |n| n.to_string()),
                policy
                    .limits
                    .cpu_secs
                    .map_or_else(|| "unlimited".to_owned(), |n| n.to_string()),
            ),
        },
        Err(err) if required => Check {
            name: "isolation",
            status: Status::Fail,
            detail: format!(
                "sandbox.required is set but the {backend} backend cannot run: {err}; \
                 reef will refuse to run tools. This machine: {machine}"
            ),
        },
        Err(err) => Check {
            name: "isolation",
            status: Status::Warn,
            detail: format!(
                "{}. This machine: {machine}",
                reef_agent::fallback_warning(backend, &err.to_string())
            ),
        },
    }
}

fn network_name(mode: NetworkMode) -> &'static str {
    match mode {
        NetworkMode::None => "none",
        NetworkMode::Allowlist => "allowlist",
        NetworkMode::Full => "full",
    }
}

async fn provider_check(config: &reef_config::Config) -> Check {
    let provider = match config.provider() {
        Ok(p) => p,
        Err(err) => {
            return Check {
                name: "provider",
                status: Status::Fail,
                detail: err.to_string(),
            };
        }
    };
    let key = match (&provider.api_key, &provider.api_key_env) {
        (Some(_), _) => "key set".to_owned(),
        (None, Some(var)) => format!("no key: ${var} is empty"),
        (None, None) => "no key configured".to_owned(),
    };
    let settings = reef_agent::provider_settings(provider);
    let local = provider.wire_api == reef_core::WireApi::Local;
    match reef_llm::check_reachable(&settings).await {
        Ok(detail) if local => Check {
            name: "provider",
            status: Status::Ok,
            detail: format!(
                "{} (local model {}): {detail}",
                provider.name, provider.model
            ),
        },
        Ok(detail) => Check {
            name: "provider",
            status: Status::Ok,
            detail: format!(
                "{} ({} {} at {}; {key}): {detail}",
                provider.name, provider.wire_api, provider.model, provider.base_url
            ),
        },
        Err(err) if local => Check {
            name: "provider",
            status: Status::Fail,
            detail: err.to_string(),
        },
        Err(err) => Check {
            name: "provider",
            status: Status::Fail,
            detail: format!("{err} ({key})"),
        },
    }
}

/// Cluster mode's PostgreSQL: reachable, logged into, and at reef's schema (migrated if not).
async fn database_check(cluster: &reef_config::ClusterConfig) -> Check {
    let password = cluster.database_password.as_ref().map(|p| p.expose());
    let reached = async {
        let store = reef_store::PgStore::connect(&cluster.database_url, password).await?;
        let version = store.schema_version().await?;
        // With pgvector a vector search runs in the database; without, each node holds the
        // vectors in RAM.
        let vectors = match store.pgvector() {
            Some(v) => format!("vectors searched by pgvector {v}"),
            None => "no pgvector: vectors searched in each node's RAM".to_owned(),
        };
        Ok::<_, reef_store::PgError>(format!(
            "PostgreSQL {} (schema v{version}; {vectors})",
            store.target()
        ))
    };
    match reached.await {
        Ok(detail) => Check {
            name: "database",
            status: Status::Ok,
            detail,
        },
        Err(err) => Check {
            name: "database",
            status: Status::Fail,
            detail: err.to_string(),
        },
    }
}

/// How long the bus check waits for NATS to greet.
const BUS_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Cluster mode's NATS: it answers on `nats_url` with its greeting, and JetStream is on.
async fn bus_check(cluster: &reef_config::ClusterConfig) -> Check {
    let fail = |detail: String| Check {
        name: "bus",
        status: Status::Fail,
        detail,
    };
    let address = cluster
        .nats_url
        .split_once("://")
        .map_or(cluster.nats_url.as_str(), |(_, rest)| rest)
        .trim_end_matches('/');
    let address = if address.contains(':') {
        address.to_owned()
    } else {
        format!("{address}:4222")
    };
    let greeting = tokio::time::timeout(BUS_WAIT, async {
        use tokio::io::AsyncBufReadExt as _;
        let stream = tokio::net::TcpStream::connect(&address).await?;
        let mut line = String::new();
        tokio::io::BufReader::new(stream)
            .read_line(&mut line)
            .await?;
        Ok::<_, std::io::Error>(line)
    })
    .await;
    let line = match greeting {
        Err(_) => return fail(format!("NATS at {address} did not greet within 5 s")),
        Ok(Err(err)) => return fail(format!("cannot reach NATS at {address}: {err}")),
        Ok(Ok(line)) => line,
    };
    let Some(info) = line
        .strip_prefix("INFO ")
        .and_then(|json| serde_json::from_str::<serde_json::Value>(json).ok())
    else {
        return fail(format!(
            "{address} does not speak NATS (it said {:?})",
            line.trim()
        ));
    };
    let version = info["version"].as_str().unwrap_or("unknown version");
    if info["jetstream"].as_bool() != Some(true) {
        return fail(format!(
            "NATS {version} at {address} runs without JetStream; start it with -js"
        ));
    }
    Check {
        name: "bus",
        status: Status::Ok,
        detail: format!("NATS {version} at {address}, JetStream on"),
    }
}
