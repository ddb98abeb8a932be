//! Secrets by reference: where a secret's value lives, never the value itself. The
//! configuration produces these; the tools read the value only when a call needs it.

use std::path::PathBuf;

/// Where a secret's value is read from, at the moment a tool call needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SecretSource {
    /// A variable in reef's own environment (never passed to tools unless asked for).
    Env(String),
    /// A file whose content, without trailing newlines, is the value.
    File(PathBuf),
    /// `$REEF_HOME/vault`, encrypted: read through the unlocked vault.
    Vault,
}

/// A secret tools may use: its name (also the environment variable the command sees), its
/// source, and what it is for (shown to the model next to the name).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SecretSpec {
    pub name: String,
    pub source: SecretSource,
    pub description: Option<String>,
    /// Who may be given the value.
    pub policy: SecretPolicy,
}

/// Who may be given a secret's value.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind", content = "for")]
pub enum SecretPolicy {
    /// Any call the agent's capabilities allow.
    #[default]
    Always,
    /// Each use waits for the operator's approval.
    WithApproval,
    /// Only the tools, skills or domains named.
    OnlyFor(Vec<SecretScope>),
}

/// One thing an `only-for` secret may be given to: `tool:NAME`, `skill:NAME` or `domain:HOST`
/// (`*.example.com` matches its subdomains).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum SecretScope {
    Tool(String),
    Skill(String),
    Domain(String),
}

/// Where a secret's value is about to go: the tool, the skill behind it, and the host a
/// request carrying it goes to (none for a command, which may send it anywhere).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SecretUse<'a> {
    pub tool: &'a str,
    pub skill: Option<&'a str>,
    pub host: Option<&'a str>,
    /// The operator approved this one use.
    pub approved: bool,
}

impl SecretPolicy {
    /// Whether a use is allowed; the error says why not, in words for the model.
    pub fn allows(&self, name: &str, used: &SecretUse<'_>) -> Result<(), String> {
        match self {
            SecretPolicy::Always => Ok(()),
            SecretPolicy::WithApproval if used.approved => Ok(()),
            SecretPolicy::WithApproval => Err(format!(
                "secret `{name}` is used only with the operator's approval, and `{}` cannot \
                 wait for one",
                used.tool
            )),
            SecretPolicy::OnlyFor(scopes) if scopes.iter().any(|s| s.covers(used)) => Ok(()),
            SecretPolicy::OnlyFor(scopes) => Err(format!(
                "secret `{name}` may be given only to {}, not to {}",
                scopes
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", "),
                describe_use(used)
            )),
        }
    }

    /// `always`, `with-approval` or `only-for tool:shell, domain:example.com`.
    pub fn describe(&self) -> String {
        match self {
            SecretPolicy::Always => "always".into(),
            SecretPolicy::WithApproval => "with-approval".into(),
            SecretPolicy::OnlyFor(scopes) => format!(
                "only-for {}",
                scopes
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }

    /// The domains an `only-for` secret may be sent to (none for other policies).
    pub fn domains(&self) -> impl Iterator<Item = &str> {
        let scopes = match self {
            SecretPolicy::OnlyFor(scopes) => scopes.as_slice(),
            _ => &[],
        };
        scopes.iter().filter_map(|s| match s {
            SecretScope::Domain(d) => Some(d.as_str()),
            _ => None,
        })
    }
}

fn describe_use(used: &SecretUse<'_>) -> String {
    let mut out = format!("tool:{}", used.tool);
    if let Some(skill) = used.skill {
        out.push_str(&format!(" (skill:{skill})"));
    }
    match used.host {
        Some(host) => out.push_str(&format!(" bound for domain:{host}")),
        None => out.push_str(" (which may send it anywhere)"),
    }
    out
}

impl SecretScope {
    /// Whether this scope names the use.
    pub fn covers(&self, used: &SecretUse<'_>) -> bool {
        match self {
            SecretScope::Tool(t) => t == used.tool,
            SecretScope::Skill(s) => used.skill == Some(s.as_str()),
            SecretScope::Domain(d) => used.host.is_some_and(|h| domain_matches(d, h)),
        }
    }
}

/// `pattern` is a host name, or `*.` and a domain matching any of its subdomains; both
/// ignore case and a trailing dot.
pub fn domain_matches(pattern: &str, host: &str) -> bool {
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    let pattern = pattern.trim_end_matches('.').to_ascii_lowercase();
    match pattern.strip_prefix("*.") {
        Some(base) => host.len() > base.len() && host.ends_with(&format!(".{base}")),
        None => host == pattern,
    }
}

impl std::fmt::Display for SecretScope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SecretScope::Tool(t) => write!(f, "tool:{t}"),
            SecretScope::Skill(s) => write!(f, "skill:{s}"),
            SecretScope::Domain(d) => write!(f, "domain:{d}"),
        }
    }
}

impl std::str::FromStr for SecretScope {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (kind, name) = s
            .split_once(':')
            .ok_or_else(|| format!("{s:?} is not tool:NAME, skill:NAME or domain:HOST"))?;
        let name = name.trim();
        let valid = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.*".contains(c));
        if !valid {
            return Err(format!("{s:?}: `{name}` is not a name or host"));
        }
        let wild = name.strip_prefix("*.").unwrap_or(name).contains('*');
        match kind.trim() {
            "tool" | "skill" if name.contains('*') => Err(format!(
                "{s:?}: a tool or skill is named exactly, without `*`"
            )),
            "tool" => Ok(SecretScope::Tool(name.to_owned())),
            "skill" => Ok(SecretScope::Skill(name.to_owned())),
            "domain" if wild => Err(format!(
                "{s:?}: a domain may start with `*.`, with no other `*`"
            )),
            "domain" => Ok(SecretScope::Domain(name.to_ascii_lowercase())),
            other => Err(format!("{s:?}: `{other}` is not tool, skill or domain")),
        }
    }
}

impl TryFrom<String> for SecretScope {
    type Error = String;

    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<SecretScope> for String {
    fn from(s: SecretScope) -> String {
        s.to_string()
    }
}

/// What reef remembers of a secret value an agent's command was given, so that a later
/// session of the same agent still redacts it: never the value, only its length, a salted
/// SHA-256 of it and a 32-bit rolling hash that picks out candidate windows of an output
/// before the SHA-256 is checked (see `reef_security::fingerprint`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SecretFingerprint {
    /// The secret's name, shown in place of the value (`[secret NAME]`).
    pub name: String,
    /// Length of the value in bytes.
    pub len: usize,
    /// The value's rolling hash, truncated to 32 bits.
    pub probe: u32,
    /// Random bytes hashed before the value.
    pub salt: Vec<u8>,
    /// SHA-256 of `salt || value`.
    pub hash: Vec<u8>,
}
