//! `reef doctor`: checks configuration, store, provider reachability and sandbox support.

use crate::exit;
use crate::home;
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
    }
    let report = reef_sandbox::probe();
    checks.push(Check {
        name: "isolation",
        status: Status::Warn,
        detail: format!(
            "processes run in the plain runner (scrubbed env, timeouts, process-group kill); \
             kernel isolation is not enabled yet. This machine: {}",
            report.summary_lines().join("; ")
        ),
    });

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
    match reef_llm::check_reachable(&settings).await {
        Ok(detail) => Check {
            name: "provider",
            status: Status::Ok,
            detail: format!(
                "{} ({} {} at {}; {key}): {detail}",
                provider.name, provider.wire_api, provider.model, provider.base_url
            ),
        },
        Err(err) => Check {
            name: "provider",
            status: Status::Fail,
            detail: format!("{err} ({key})"),
        },
    }
}
