//! Starting one configured server: a program in reef's sandbox (its own directory, the
//! `[sandbox]` policy with the server's changes, secrets put in its environment) spoken to
//! over its pipes, or a URL reached over streamable HTTP.

use crate::client::{Connection, Signals, connect_http, connect_pipes};
use crate::error::McpError;
use crate::names::ToolList;
use reef_config::{ConfigValue, McpServerConfig, McpTransport, NetworkModeName};
use reef_core::SecretSpec;
use reef_sandbox::{ExecRequest, NetworkMode, Sandbox, SandboxPolicy, Spawned};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// Secret values shorter than this are refused: they could not be redacted reliably.
pub const MIN_SECRET_LEN: usize = 8;

/// What servers are started with: the base sandbox policy, where their directories live and
/// the secrets they may name.
#[derive(Clone, Debug)]
pub struct Launcher {
    /// `[sandbox]` as the daemon runs it (backend after its self-test, helper, hidden paths).
    pub policy: SandboxPolicy,
    /// Each program runs in `DIR/NAME` (its HOME and only writable place by default).
    pub servers_dir: PathBuf,
    pub secrets: Vec<SecretSpec>,
    /// Where `SecretSource::Vault` secrets are read (none: they are not available).
    pub vault: Option<std::sync::Arc<reef_config::Vault>>,
}

/// A started server: its session, what it announced, and its process when it is a program.
pub(crate) struct Live {
    pub conn: Arc<dyn Connection>,
    pub signals: Arc<Signals>,
    pub process: Process,
    /// Its tools as last listed; listed again when the server says they changed.
    pub tools: Mutex<Option<Arc<ToolList>>>,
}

impl Live {
    /// Ends the session and kills the process.
    pub async fn stop(&self) {
        self.conn.close().await;
        self.process.kill();
    }
}

/// The process of a program server (none for a URL), and the secrets it was given.
pub(crate) struct Process {
    spawned: Mutex<Option<Spawned>>,
    /// Kept for the process's lifetime: it owns the cgroup and the allow-list proxy.
    _sandbox: Option<Sandbox>,
    /// Secret values given to the server, removed from what reef reports of it.
    secrets: Vec<(String, String)>,
}

impl Process {
    /// The host PID of the server's process (the sandbox helper when confined).
    pub fn pid(&self) -> Option<u32> {
        self.spawned
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .and_then(Spawned::id)
    }

    /// Why the server is gone, as far as its process tells: exit status and stderr's end.
    pub fn exit_report(&self) -> Option<String> {
        let mut spawned = self.spawned.lock().unwrap_or_else(PoisonError::into_inner);
        let child = spawned.as_mut()?;
        let mut report = match child.try_status() {
            Some(status) => format!("the process ended ({status})"),
            None => "the process is still running".to_owned(),
        };
        let tail = child.stderr_tail();
        let lines: Vec<&str> = tail.trim().lines().collect();
        if !lines.is_empty() {
            let last = &lines[lines.len().saturating_sub(5)..];
            report.push_str(&format!("; its stderr ends: {}", last.join(" | ")));
        }
        Some(self.redact(&report))
    }

    /// `text` with every secret value given to the server replaced by its name.
    pub fn redact(&self, text: &str) -> String {
        redact(text, &self.secrets)
    }

    /// Waits (up to a second) for the process to be seen as exited, when it is exiting.
    pub async fn settle(&self) {
        for _ in 0..100 {
            let exited = {
                let mut spawned = self.spawned.lock().unwrap_or_else(PoisonError::into_inner);
                spawned.as_mut().is_none_or(|c| c.try_status().is_some())
            };
            if exited {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Kills the process (and everything it started).
    pub fn kill(&self) {
        let spawned = self
            .spawned
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(mut spawned) = spawned {
            spawned.kill();
        }
    }
}

impl Launcher {
    pub(crate) async fn start(&self, config: &McpServerConfig) -> Result<Live, McpError> {
        let timeout = Duration::from_secs(config.timeout_secs);
        let signals = Arc::new(Signals::default());
        let start_error = |reason: String| McpError::Start {
            server: config.name.clone(),
            reason,
        };
        match &config.transport {
            McpTransport::Stdio { command, args, env } => {
                let (env, secrets) = self.values(env).map_err(start_error)?;
                let dir = self.servers_dir.join(&config.name);
                std::fs::create_dir_all(&dir)
                    .map_err(|e| start_error(format!("create {}: {e}", dir.display())))?;
                let sandbox = Sandbox::new(self.policy_for(config));
                let mut request = ExecRequest::new(command.clone(), args.clone(), dir, timeout);
                request.env = env;
                request.read_only = config.read_only.clone();
                let mut process = sandbox
                    .spawn(request)
                    .await
                    .map_err(|e| start_error(e.to_string()))?;
                let (stdout, stdin) = process
                    .take_io()
                    .ok_or_else(|| start_error("the process has no pipes".into()))?;
                let process = Process {
                    spawned: Mutex::new(Some(process)),
                    _sandbox: Some(sandbox),
                    secrets,
                };
                match connect_pipes(&config.name, stdout, stdin, signals.clone(), timeout).await {
                    Ok(conn) => Ok(Live {
                        conn,
                        signals,
                        process,
                        tools: Mutex::new(None),
                    }),
                    Err(err) => {
                        process.settle().await;
                        let report = process.exit_report();
                        process.kill();
                        Err(match (err, report) {
                            (McpError::Handshake { server, reason }, Some(report)) => {
                                McpError::Handshake {
                                    server,
                                    reason: format!("{reason}; {report}"),
                                }
                            }
                            (err, _) => err,
                        })
                    }
                }
            }
            McpTransport::Http {
                url,
                headers,
                bearer_token_secret,
            } => {
                let (headers, mut secrets) = self.values(headers).map_err(start_error)?;
                let bearer = match bearer_token_secret {
                    Some(name) => {
                        let value = self.secret(name).map_err(start_error)?;
                        secrets.push((name.clone(), value.clone()));
                        Some(value)
                    }
                    None => None,
                };
                let conn =
                    connect_http(&config.name, url, headers, bearer, signals.clone(), timeout)
                        .await?;
                Ok(Live {
                    conn,
                    signals,
                    process: Process {
                        spawned: Mutex::new(None),
                        _sandbox: None,
                        secrets,
                    },
                    tools: Mutex::new(None),
                })
            }
        }
    }

    /// `[sandbox]` with the server's own network, domains and writable paths.
    fn policy_for(&self, config: &McpServerConfig) -> SandboxPolicy {
        let mut policy = self.policy.clone();
        if let Some(network) = config.network {
            policy.network = match network {
                NetworkModeName::None => NetworkMode::None,
                NetworkModeName::Allowlist => NetworkMode::Allowlist,
                NetworkModeName::Full => NetworkMode::Full,
            };
        }
        if let Some(domains) = &config.allow_domains {
            policy.allow_domains = domains.clone();
        }
        if let Some(writable) = &config.writable {
            policy.writable = writable.clone();
        }
        policy
    }

    /// Configured values with secrets read now, and the secrets read (name, value).
    #[expect(clippy::type_complexity, reason = "two plain lists of pairs")]
    fn values(
        &self,
        values: &[(String, ConfigValue)],
    ) -> Result<(Vec<(String, String)>, Vec<(String, String)>), String> {
        let mut out = Vec::with_capacity(values.len());
        let mut secrets = Vec::new();
        for (key, value) in values {
            let value = match value {
                ConfigValue::Plain(v) => v.clone(),
                ConfigValue::Secret(name) => {
                    let v = self.secret(name)?;
                    secrets.push((name.clone(), v.clone()));
                    v
                }
            };
            out.push((key.clone(), value));
        }
        Ok((out, secrets))
    }

    fn secret(&self, name: &str) -> Result<String, String> {
        let spec = self
            .secrets
            .iter()
            .find(|s| s.name == name)
            .ok_or_else(|| format!("the secret `{name}` is not configured"))?;
        let value = reef_config::read_secret(spec, self.vault.as_deref())?
            .expose()
            .to_owned();
        if value.chars().count() < MIN_SECRET_LEN {
            return Err(format!(
                "secret `{name}` is shorter than {MIN_SECRET_LEN} characters, too short to be \
                 redacted from what the server says reliably; refusing to use it"
            ));
        }
        Ok(value)
    }

    /// The secret values `config` gives its server, as they read now (those that cannot be
    /// read are left out): what to remove from anything the server says.
    pub(crate) fn secret_values(&self, config: &McpServerConfig) -> Vec<(String, String)> {
        let names: Vec<&String> = match &config.transport {
            McpTransport::Stdio { env, .. } => secret_names(env).collect(),
            McpTransport::Http {
                headers,
                bearer_token_secret,
                ..
            } => secret_names(headers).chain(bearer_token_secret).collect(),
        };
        names
            .into_iter()
            .filter_map(|name| Some((name.clone(), self.secret(name).ok()?)))
            .collect()
    }
}

fn secret_names(values: &[(String, ConfigValue)]) -> impl Iterator<Item = &String> {
    values.iter().filter_map(|(_, v)| match v {
        ConfigValue::Secret(name) => Some(name),
        ConfigValue::Plain(_) => None,
    })
}

/// `text` with each of `secrets`' values replaced by its name.
pub(crate) fn redact(text: &str, secrets: &[(String, String)]) -> String {
    secrets.iter().fold(text.to_owned(), |acc, (name, value)| {
        acc.replace(value, &format!("[secret {name}]"))
    })
}
