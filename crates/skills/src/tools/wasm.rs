//! A WASM skill's tool: `main.wasm` checked against the hash pinned when the skill was loaded
//! (the lock's, for an installed skill) before every compile or cache use, then run by
//! reef-wasm with the arguments as JSON on stdin, the workspace read-only unless the skill
//! declares `writes-workspace`, and HTTP only to the domains the skill declares, with secrets
//! put into headers by the host.

use crate::catalog::{Origin, Skill, WASM_ENTRY};
use crate::folder::MAX_FILE;
use crate::params::check_args;
use crate::set::WasmRuntime;
use async_trait::async_trait;
use reef_core::{Tool, ToolContext, ToolError, ToolSpec};
use reef_sandbox::DomainAllowList;
use reef_tools::{GuardedHttp, Secrets, truncate_middle};
use reef_wasm::{Call, HttpHost, Limits};
use serde::Deserialize;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Default deadline of a WASM tool.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// Default memory cap of a WASM tool.
const DEFAULT_MEMORY: u64 = 64 * 1024 * 1024;

pub(crate) struct WasmTool {
    pub skill: Arc<Skill>,
    pub wasm: Arc<WasmRuntime>,
    /// Requests to the skill's domains, when the agent may use the network (`http_fetch`).
    pub http: Option<Arc<GuardedHttp>>,
    pub secrets: Arc<Secrets>,
    pub max_output_chars: usize,
    /// Paths the sandbox hides (resolved): a workspace holding one is not preopened.
    pub hidden: Arc<Vec<PathBuf>>,
    /// Hosts exempt from the SSRF check, the only ones a secret may reach over plain http.
    pub plain_http_hosts: Vec<String>,
}

#[async_trait]
impl Tool for WasmTool {
    fn content_source(&self) -> Option<reef_core::ContentSource> {
        Some(reef_core::ContentSource::Skill)
    }

    fn spec(&self) -> ToolSpec {
        let m = &self.skill.manifest;
        ToolSpec {
            name: m.name.clone(),
            description: m.description.clone(),
            parameters: crate::params::schema(m.parameters.as_deref()),
        }
    }

    fn needs(&self, _args: &Value) -> Vec<reef_core::Need> {
        use reef_core::Need;
        let m = &self.skill.manifest;
        let trusted = !matches!(self.skill.origin, Origin::Workspace { .. });
        let mut needs = vec![if m.writes_workspace && trusted {
            Need::Workspace
        } else {
            Need::Read("/".to_owned())
        }];
        if self.http.is_some() {
            needs.extend(m.domains.iter().map(|d| Need::Domain(d.clone())));
        }
        if trusted {
            needs.extend(m.secrets.iter().map(|s| Need::Secret(s.clone())));
        }
        needs
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<String, ToolError> {
        let m = &self.skill.manifest;
        let args =
            check_args(m.parameters.as_deref(), args).map_err(ToolError::InvalidArguments)?;
        let failed = |e: String| ToolError::Failed(format!("`{}`: {e}", m.name));
        let bytes = self.skill.dir.read(WASM_ENTRY, MAX_FILE).map_err(failed)?;
        let hash = blake3::hash(&bytes).to_hex().to_string();
        if Some(&hash) != self.skill.entry_hash.as_ref() {
            let until = match self.skill.origin {
                Origin::Installed { .. } => "until `reef skills verify --accept` pins it again",
                _ => "until the skill is checked again at the start of the next turn",
            };
            return Err(failed(format!(
                "{WASM_ENTRY} changed since the skill was checked (blake3 {hash}, pinned {}); \
                 it is refused {until}",
                self.skill.entry_hash.as_deref().unwrap_or("none")
            )));
        }
        // The module sees the whole workspace through WASI, which knows nothing of the paths
        // the sandbox hides inside it: such a workspace is not shown at all.
        let root = std::fs::canonicalize(&ctx.workspace).unwrap_or_else(|_| ctx.workspace.clone());
        if let Some(h) = self.hidden.iter().find(|h| h.starts_with(&root)) {
            return Err(failed(format!(
                "the workspace holds {}, which reef hides from agents, so WASM skills cannot be \
                 given it; work in a directory without it",
                h.display()
            )));
        }
        // Code the agent wrote itself gets no more than the defaults, no secrets and no writes.
        let trusted = !matches!(self.skill.origin, Origin::Workspace { .. });
        let clamp = |declared: Option<u64>, default: u64| match declared {
            Some(v) if trusted || v <= default => v,
            _ => default,
        };
        let engine = self.wasm.engine().map_err(failed)?;
        let http: Option<Arc<dyn HttpHost>> = match &self.http {
            Some(client) if !m.domains.is_empty() => Some(Arc::new(SkillHttp {
                skill: m.name.clone(),
                domains: DomainAllowList::new(&m.domains),
                secret_names: if trusted {
                    m.secrets.clone()
                } else {
                    Vec::new()
                },
                plain_http_hosts: self.plain_http_hosts.clone(),
                secrets: self.secrets.clone(),
                client: client.clone(),
                handle: tokio::runtime::Handle::current(),
            })),
            _ => None,
        };
        let call = Call {
            stdin: Value::Object(args).to_string().into_bytes(),
            workspace: Some((root, m.writes_workspace && trusted)),
            program: WASM_ENTRY.into(),
            limits: Limits {
                timeout: Duration::from_secs(clamp(m.timeout_secs, DEFAULT_TIMEOUT.as_secs())),
                memory_bytes: clamp(m.memory_bytes, DEFAULT_MEMORY),
                ..Limits::default()
            },
            http,
        };
        let outcome = tokio::task::spawn_blocking(move || {
            let module = engine.module(&bytes, &hash)?;
            engine.run(&module, call)
        })
        .await
        .map_err(|e| failed(format!("the WASM call failed: {e}")))?
        .map_err(|e| failed(e.to_string()))?;
        if outcome.exit_code != 0 {
            let stderr = outcome.stderr.trim();
            return Err(failed(format!(
                "exited with code {}:\n{}",
                outcome.exit_code,
                if stderr.is_empty() {
                    "(no stderr)"
                } else {
                    stderr
                }
            )));
        }
        Ok(truncate_middle(&outcome.stdout, self.max_output_chars))
    }
}

/// A request as a module sends it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Request {
    #[serde(default = "get")]
    method: String,
    url: String,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    #[serde(default)]
    body: Option<String>,
}

/// Headers a module may not set.
const HOP_HEADERS: [&str; 8] = [
    "host",
    "connection",
    "content-length",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
    "keep-alive",
];

fn get() -> String {
    "GET".into()
}

/// The HTTP host of one WASM call: the skill's domains only, secrets by name, and the answer
/// with every secret value redacted.
struct SkillHttp {
    skill: String,
    domains: DomainAllowList,
    /// Secrets it may name: those its skill declares, none for a skill in the workspace.
    secret_names: Vec<String>,
    plain_http_hosts: Vec<String>,
    secrets: Arc<Secrets>,
    client: Arc<GuardedHttp>,
    handle: tokio::runtime::Handle,
}

impl HttpHost for SkillHttp {
    fn request(&self, request: &[u8]) -> Vec<u8> {
        let answer = match self.handle.block_on(self.answer(request)) {
            Ok(answer) => answer,
            Err(error) => json!({ "error": error }),
        };
        self.secrets.redact(&answer.to_string()).into_bytes()
    }
}

impl SkillHttp {
    async fn answer(&self, request: &[u8]) -> Result<Value, String> {
        let req: Request = serde_json::from_slice(request)
            .map_err(|e| format!("the request is not valid JSON for reef.http_request: {e}"))?;
        let url = url::Url::parse(&req.url).map_err(|e| format!("url {:?}: {e}", req.url))?;
        let host = url.host_str().unwrap_or_default();
        if !self.domains.allows(host) {
            return Err(format!(
                "{host} is not among the domains the skill `{}` declares",
                self.skill
            ));
        }
        let mut headers = Vec::with_capacity(req.headers.len());
        let mut used = Vec::new();
        for (name, value) in req.headers {
            // The host sets these itself: a module must not pick another virtual host or
            // frame the request.
            if HOP_HEADERS.contains(&name.to_ascii_lowercase().as_str())
                || name.to_ascii_lowercase().starts_with("proxy-")
            {
                return Err(format!(
                    "the header {name} is set by reef, not by the module"
                ));
            }
            let filled = self.fill_secrets(&value, host, &mut used)?;
            headers.push((name, filled));
        }
        let exempt = self
            .plain_http_hosts
            .iter()
            .any(|h| h.eq_ignore_ascii_case(host));
        let with_secret = !used.is_empty();
        if with_secret && url.scheme() != "https" && !exempt {
            return Err(format!("secrets are sent only over https, not to {url}"));
        }
        if with_secret {
            // Remembered before the request leaves, as for a `shell` command given a secret.
            let tool = format!("skill:{}", self.skill);
            self.secrets
                .persist(&tool, &used, Some(host))
                .await
                .map_err(|e| e.to_string())?;
        }
        let reply = self
            .client
            .send(
                &req.method,
                &url,
                &headers,
                req.body.map(String::into_bytes),
            )
            .await
            .map_err(|e| e.to_string())?;
        Ok(json!({
            "status": reply.status,
            "headers": reply.headers.into_iter().collect::<BTreeMap<_, _>>(),
            "body": String::from_utf8_lossy(&reply.body),
            "truncated": reply.truncated,
        }))
    }

    /// `value` with each `${NAME}` replaced by the secret NAME, which the skill must declare.
    /// The names filled are added to `used` (once each).
    fn fill_secrets(
        &self,
        value: &str,
        host: &str,
        used: &mut Vec<String>,
    ) -> Result<String, String> {
        let mut out = String::new();
        let mut rest = value;
        while let Some(start) = rest.find("${") {
            let Some(len) = rest[start + 2..].find('}') else {
                break;
            };
            let name = &rest[start + 2..start + 2 + len];
            if !self.secret_names.iter().any(|n| n == name) {
                return Err(format!(
                    "secret `{name}` is not declared by the skill `{}` (its `secrets` list; a \
                     skill in the workspace gets none)",
                    self.skill
                ));
            }
            let to = reef_core::SecretUse {
                tool: &self.skill,
                skill: Some(&self.skill),
                host: Some(host),
                approved: false,
            };
            let secret = self.secrets.read(name, &to).map_err(|e| e.to_string())?;
            if !used.iter().any(|u| u == name) {
                used.push(name.to_owned());
            }
            out.push_str(&rest[..start]);
            out.push_str(&secret);
            rest = &rest[start + 3 + len..];
        }
        out.push_str(rest);
        Ok(out)
    }
}
