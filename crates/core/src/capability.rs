//! Capabilities: what an agent may do (declared in a template, carried in its token), what one
//! call needs, and the patterns both are written in. A child is never given more than its
//! parent holds.

use serde::{Deserialize, Serialize};
use std::fmt;

/// The pattern that matches every value.
pub const ANY: &str = "**";

/// What an agent may do. Every list holds patterns ([`pattern_matches`]); the defaults grant
/// what an agent could always do, so a template that says nothing keeps working.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Capabilities {
    /// Tool names the agent may call; `"*"` allows every tool.
    pub tools: Vec<String>,
    /// May create child agents (the manager's tools).
    #[serde(default)]
    pub spawn: bool,
    /// Templates it may spawn from, when `spawn` is set.
    #[serde(default = "any")]
    pub templates: Vec<String>,
    /// May write to the shared memory namespace.
    #[serde(default)]
    pub shared_memory_write: bool,
    /// May schedule routines of its own (`schedule_routine`), bounded by it and deleted with it.
    #[serde(default)]
    pub schedule: bool,
    /// May write new skills into its workspace (`skill_create`).
    #[serde(default)]
    pub skill_write: bool,
    /// Workspace paths its file tools may read (a path it may write it may also read).
    #[serde(default = "any")]
    pub read: Vec<String>,
    /// Workspace paths its file tools may write.
    #[serde(default = "any")]
    pub write: Vec<String>,
    /// Hosts its requests may reach (`example.com`, `*.example.com`).
    #[serde(default = "any")]
    pub domains: Vec<String>,
    /// Secrets its calls may use, by name.
    #[serde(default = "any")]
    pub secrets: Vec<String>,
    /// Rooms it may post to.
    #[serde(default = "any")]
    pub channels: Vec<String>,
}

fn any() -> Vec<String> {
    vec![ANY.to_owned()]
}

impl Default for Capabilities {
    fn default() -> Self {
        Self {
            tools: vec!["*".to_owned()],
            spawn: false,
            templates: any(),
            shared_memory_write: false,
            schedule: false,
            skill_write: false,
            read: any(),
            write: any(),
            domains: any(),
            secrets: any(),
            channels: any(),
        }
    }
}

/// One list of patterns of [`Capabilities`], named as in a template.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatternList {
    Tools,
    Templates,
    Read,
    Write,
    Domains,
    Secrets,
    Channels,
}

impl PatternList {
    pub const ALL: [PatternList; 7] = [
        PatternList::Tools,
        PatternList::Templates,
        PatternList::Read,
        PatternList::Write,
        PatternList::Domains,
        PatternList::Secrets,
        PatternList::Channels,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            PatternList::Tools => "tools",
            PatternList::Templates => "templates",
            PatternList::Read => "read",
            PatternList::Write => "write",
            PatternList::Domains => "domains",
            PatternList::Secrets => "secrets",
            PatternList::Channels => "channels",
        }
    }

    /// Whether the list holds workspace paths (where `*` stops at `/`) rather than names.
    pub fn is_path(self) -> bool {
        matches!(self, PatternList::Read | PatternList::Write)
    }

    /// [`pattern_covers`] for a pattern of this list.
    pub fn covers(self, parent: &str, child: &str) -> bool {
        if self.is_path() {
            pattern_covers(parent, child)
        } else {
            pattern_covers(&name_pattern(parent), &name_pattern(child))
        }
    }
}

/// A name pattern (a tool, host, secret, room or template) in path-pattern form: names may
/// hold a `/`, so every `*` in them means `**`.
pub fn name_pattern(pattern: &str) -> String {
    pattern.replace("**", "*").replace('*', ANY)
}

impl Capabilities {
    /// Whether the agent may call `tool`.
    pub fn allows_tool(&self, tool: &str) -> bool {
        self.tools
            .iter()
            .any(|t| pattern_matches(&name_pattern(t), tool))
    }

    pub fn list(&self, which: PatternList) -> &[String] {
        match which {
            PatternList::Tools => &self.tools,
            PatternList::Templates => &self.templates,
            PatternList::Read => &self.read,
            PatternList::Write => &self.write,
            PatternList::Domains => &self.domains,
            PatternList::Secrets => &self.secrets,
            PatternList::Channels => &self.channels,
        }
    }

    pub fn list_mut(&mut self, which: PatternList) -> &mut Vec<String> {
        match which {
            PatternList::Tools => &mut self.tools,
            PatternList::Templates => &mut self.templates,
            PatternList::Read => &mut self.read,
            PatternList::Write => &mut self.write,
            PatternList::Domains => &mut self.domains,
            PatternList::Secrets => &mut self.secrets,
            PatternList::Channels => &mut self.channels,
        }
    }

    /// The flags, by name, with their values.
    pub fn flags(&self) -> [(&'static str, bool); 4] {
        [
            ("spawn", self.spawn),
            ("shared_memory_write", self.shared_memory_write),
            ("schedule", self.schedule),
            ("skill_write", self.skill_write),
        ]
    }

    /// Ok when `self` grants nothing `parent` lacks; otherwise what is too wide.
    pub fn within(&self, parent: &Capabilities) -> Result<(), String> {
        for which in PatternList::ALL {
            let theirs = parent.list(which);
            let covers = |q: &String, p: &String| which.covers(q, p);
            if let Some(wide) = self
                .list(which)
                .iter()
                .find(|p| !theirs.iter().any(|q| covers(q, p)))
            {
                return Err(format!(
                    "{} `{wide}` is not allowed to the parent",
                    which.as_str()
                ));
            }
        }
        for ((name, mine), (_, theirs)) in self.flags().into_iter().zip(parent.flags()) {
            if mine && !theirs {
                return Err(format!("{name} is not allowed to the parent"));
            }
        }
        Ok(())
    }

    /// `self` narrowed to what `parent` holds, so the result is always `within` it: a pattern
    /// of `self` the parent covers stays, one wider than some of the parent's patterns is
    /// replaced by those.
    pub fn clamped_to(&self, parent: &Capabilities) -> Capabilities {
        let mut out = self.clone();
        for which in PatternList::ALL {
            let theirs = parent.list(which);
            let mut kept: Vec<String> = Vec::new();
            for mine in self.list(which) {
                if theirs.iter().any(|q| which.covers(q, mine)) {
                    kept.push(mine.clone());
                } else {
                    kept.extend(theirs.iter().filter(|q| which.covers(mine, q)).cloned());
                }
            }
            kept.dedup();
            *out.list_mut(which) = kept;
        }
        out.spawn &= parent.spawn;
        out.shared_memory_write &= parent.shared_memory_write;
        out.schedule &= parent.schedule;
        out.skill_write &= parent.skill_write;
        out
    }
}

/// The forms a right takes on the command line.
pub const RIGHT_FORMS: &str = "tool:NAME, read:PATH, write:PATH, domain:HOST, secret:NAME, \
                               channel:ROOM, spawn:TEMPLATE, schedule, skill_write, \
                               shared_memory_write";

impl Capabilities {
    /// Widens `self` by one right written as `reef cap grant` takes it ([`RIGHT_FORMS`]);
    /// an error says what is wrong with it.
    pub fn grant(&mut self, right: &str) -> Result<(), String> {
        let flag = match right {
            "schedule" => Some(&mut self.schedule),
            "skill_write" => Some(&mut self.skill_write),
            "shared_memory_write" => Some(&mut self.shared_memory_write),
            _ => None,
        };
        if let Some(flag) = flag {
            *flag = true;
            return Ok(());
        }
        let Some((kind, pattern)) = right.split_once(':') else {
            return Err(format!(
                "`{right}` is not a right; rights are {RIGHT_FORMS}"
            ));
        };
        let pattern = pattern.trim();
        if pattern.is_empty() || pattern.chars().any(char::is_control) {
            return Err(format!("`{right}` names nothing after `{kind}:`"));
        }
        let which = match kind {
            "tool" => PatternList::Tools,
            "read" => PatternList::Read,
            "write" => PatternList::Write,
            "domain" => PatternList::Domains,
            "secret" => PatternList::Secrets,
            "channel" => PatternList::Channels,
            "spawn" => {
                self.spawn = true;
                PatternList::Templates
            }
            other => {
                return Err(format!(
                    "`{other}` is not a kind of right; rights are {RIGHT_FORMS}"
                ));
            }
        };
        let list = self.list_mut(which);
        if !list.iter().any(|held| which.covers(held, pattern)) {
            list.push(pattern.to_owned());
        }
        Ok(())
    }
}

/// Whether `value` matches `pattern`. `**` matches anything; `*` matches one or more
/// characters other than `/` (so `*` alone is a top-level file, or any tool name); anything
/// else matches itself.
pub fn pattern_matches(pattern: &str, value: &str) -> bool {
    /// One element of a pattern.
    #[derive(Clone, Copy, PartialEq)]
    enum Tok {
        Any,
        Segment,
        Byte(u8),
    }
    let p = pattern.as_bytes();
    let mut toks = Vec::with_capacity(p.len());
    let mut i = 0;
    while i < p.len() {
        if p[i..].starts_with(b"**") {
            toks.push(Tok::Any);
            i += 2;
        } else if p[i] == b'*' {
            toks.push(Tok::Segment);
            i += 1;
        } else {
            toks.push(Tok::Byte(p[i]));
            i += 1;
        }
    }
    // Which prefixes of the value each prefix of the pattern matches, one pattern element at
    // a time: linear in the value for each element, whatever the agent sends.
    let v = value.as_bytes();
    let mut row = vec![false; v.len() + 1];
    row[0] = true;
    for tok in toks {
        let mut next = vec![false; v.len() + 1];
        match tok {
            Tok::Any => {
                let mut reached = false;
                for j in 0..=v.len() {
                    reached |= row[j];
                    next[j] = reached;
                }
            }
            Tok::Segment => {
                // One or more bytes other than `/` after a matched prefix.
                let mut open = false;
                for j in 1..=v.len() {
                    if v[j - 1] == b'/' {
                        open = false;
                    } else {
                        open |= row[j - 1];
                    }
                    next[j] = open;
                }
            }
            Tok::Byte(c) => {
                for j in 1..=v.len() {
                    next[j] = row[j - 1] && v[j - 1] == c;
                }
            }
        }
        row = next;
    }
    row[v.len()]
}

/// The regular expression (anchored) that matches what [`pattern_matches`] matches.
pub fn pattern_regex(pattern: &str) -> String {
    let mut out = String::from("^");
    let mut rest = pattern;
    while !rest.is_empty() {
        if let Some(tail) = rest.strip_prefix("**") {
            out.push_str("(?s:.*)");
            rest = tail;
        } else if let Some(tail) = rest.strip_prefix('*') {
            out.push_str("[^/]+");
            rest = tail;
        } else {
            let end = rest.find('*').unwrap_or(rest.len());
            for c in rest[..end].chars() {
                if "\\.+?()|[]{}^$#&-~".contains(c) {
                    out.push('\\');
                }
                out.push(c);
            }
            rest = &rest[end..];
        }
    }
    out.push('$');
    out
}

/// Whether every value `child` matches is matched by `parent`, decided conservatively: a
/// pattern covers itself, `**` covers everything, a pattern without wildcards is covered by
/// any pattern that matches it, and `a/**` covers patterns that start with `a/`.
pub fn pattern_covers(parent: &str, child: &str) -> bool {
    if parent == ANY || parent == child {
        return true;
    }
    if !child.contains('*') {
        return pattern_matches(parent, child);
    }
    match parent.strip_suffix("**") {
        Some(prefix) if !prefix.contains('*') => child.starts_with(prefix),
        _ => false,
    }
}

/// A workspace path as rights see it: relative, `.` and empty names dropped, `..` applied
/// where it can be (a path that climbs out keeps its leading `..`, which no pattern but `**`
/// matches).
pub fn normalize_path(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    let absolute = path.starts_with('/');
    for name in path.split('/') {
        match name {
            "" | "." => {}
            ".." if parts.last().is_some_and(|p| *p != "..") => {
                parts.pop();
            }
            other => parts.push(other),
        }
    }
    let joined = parts.join("/");
    if absolute {
        format!("/{joined}")
    } else {
        joined
    }
}

/// What one call needs, checked against the agent's token before the call runs.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
pub enum Need {
    /// Calling a tool, by name.
    Tool(String),
    /// Reading a workspace path.
    Read(String),
    /// Writing a workspace path.
    Write(String),
    /// Reading everything beneath a workspace directory (listing or searching it).
    ReadTree(String),
    /// Writing beneath a workspace directory (making a skill's folder).
    WriteTree(String),
    /// Reading and writing anything in the workspace (what a shell can do).
    Workspace,
    /// Reaching a host.
    Domain(String),
    /// Spawning a child from a template.
    Spawn(String),
    /// Reading a memory namespace.
    MemoryRead(String),
    /// Writing a memory namespace.
    MemoryWrite(String),
    /// Using a secret, by name.
    Secret(String),
    /// Posting to a room.
    Channel(String),
    /// Scheduling a routine.
    Schedule,
    /// Writing a skill.
    SkillWrite,
}

impl Need {
    /// The right's kind, as a token states it.
    pub fn kind(&self) -> &'static str {
        match self {
            Need::Tool(_) => "tool",
            Need::Read(_) | Need::ReadTree(_) | Need::Workspace => "read",
            Need::Write(_) | Need::WriteTree(_) => "write",
            Need::Domain(_) => "domain",
            Need::Spawn(_) => "spawn",
            Need::MemoryRead(_) => "memory_read",
            Need::MemoryWrite(_) => "memory_write",
            Need::Secret(_) => "secret",
            Need::Channel(_) => "channel",
            Need::Schedule => "schedule",
            Need::SkillWrite => "skill_write",
        }
    }

    /// The value a right's pattern must match. The whole workspace is `/`, which only `**`
    /// matches among workspace patterns; so is a path that is absolute or climbs out of the
    /// workspace. A directory's tree is the directory with a trailing `/`, which `dir/**` and
    /// `**` match but `dir/*` does not.
    pub fn value(&self) -> String {
        match self {
            Need::Tool(v)
            | Need::Spawn(v)
            | Need::MemoryRead(v)
            | Need::MemoryWrite(v)
            | Need::Secret(v)
            | Need::Channel(v) => v.clone(),
            Need::Read(p) | Need::Write(p) => workspace_value(p, false),
            Need::ReadTree(p) | Need::WriteTree(p) => workspace_value(p, true),
            Need::Domain(host) => host.trim_end_matches('.').to_ascii_lowercase(),
            Need::Workspace => "/".to_owned(),
            Need::Schedule | Need::SkillWrite => String::new(),
        }
    }

    /// Every need, with the whole workspace spelled as a read and a write.
    pub fn expand(&self) -> Vec<(&'static str, String)> {
        match self {
            Need::Workspace => vec![("read", "/".to_owned()), ("write", "/".to_owned())],
            other => vec![(other.kind(), other.value())],
        }
    }
}

/// A workspace path as a right's pattern must match it (see [`Need::value`]).
fn workspace_value(path: &str, tree: bool) -> String {
    let path = normalize_path(path);
    if path.starts_with('/') || path == ".." || path.starts_with("../") {
        return "/".to_owned();
    }
    match (tree, path.is_empty()) {
        (true, true) => "/".to_owned(),
        (true, false) => format!("{path}/"),
        (false, _) => path,
    }
}

impl Need {
    fn shown(&self, path: &str) -> String {
        match self.value().as_str() {
            "/" if normalize_path(path).is_empty() => "the workspace".to_owned(),
            _ => normalize_path(path),
        }
    }
}

impl fmt::Display for Need {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Need::Tool(t) => write!(f, "call the tool `{t}`"),
            Need::Read(p) => write!(f, "read `{}`", normalize_path(p)),
            Need::Write(p) => write!(f, "write `{}`", normalize_path(p)),
            Need::ReadTree(p) => write!(f, "read everything in `{}`", self.shown(p)),
            Need::WriteTree(p) => write!(f, "write in `{}`", self.shown(p)),
            Need::Workspace => f.write_str("read and write the whole workspace"),
            Need::Domain(_) => write!(f, "reach the host `{}`", self.value()),
            Need::Spawn(t) => write!(f, "spawn from the template `{t}`"),
            Need::MemoryRead(ns) => write!(f, "read the memory namespace `{ns}`"),
            Need::MemoryWrite(ns) => write!(f, "write the memory namespace `{ns}`"),
            Need::Secret(s) => write!(f, "use the secret `{s}`"),
            Need::Channel(c) => write!(f, "post to `{c}`"),
            Need::Schedule => f.write_str("schedule routines"),
            Need::SkillWrite => f.write_str("write skills"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caps(tools: &[&str]) -> Capabilities {
        Capabilities {
            tools: tools.iter().map(|t| (*t).to_owned()).collect(),
            ..Capabilities::default()
        }
    }

    #[test]
    fn patterns_match_like_their_regular_expressions() {
        let cases = [
            ("**", "a/b/c.rs", true),
            ("**", "/", true),
            ("*", "read_file", true),
            ("*", "a/b", false),
            ("*", "", false),
            ("*", "/", false),
            ("notes/**", "notes/a/b.md", true),
            ("notes/**", "notesx/a", false),
            ("notes/**", "/", false),
            ("*/**", "/", false),
            ("**/*.rs", "src/main.rs", true),
            ("**/*.rs", "src/main.rsx", false),
            ("*.example.com", "api.example.com", true),
            ("*.example.com", "example.com", false),
            ("example.com", "example.com", true),
            ("a.b", "aXb", false),
            ("#ops", "#ops", true),
        ];
        for (pattern, value, expected) in cases {
            assert_eq!(
                pattern_matches(pattern, value),
                expected,
                "{pattern} ~ {value}"
            );
            let re = regex::Regex::new(&pattern_regex(pattern)).unwrap();
            assert_eq!(re.is_match(value), expected, "regex of {pattern} ~ {value}");
        }
    }

    #[test]
    fn matching_is_linear_in_what_the_agent_sends() {
        let long = format!("/{}x", "docs/".repeat(20_000));
        assert!(!pattern_matches("**/docs/**/docs/**/*.md", &long));
        assert!(pattern_matches("**/docs/**/x", &long));
        assert!(pattern_matches("**", "a\nb"));
        let re = regex::Regex::new(&pattern_regex("**")).unwrap();
        assert!(re.is_match("a\nb"));
    }

    #[test]
    fn a_tree_needs_more_than_its_top_level_and_absolute_paths_need_everything() {
        let tree = Need::ReadTree("notes".into()).value();
        assert_eq!(tree, "notes/");
        assert!(pattern_matches("notes/**", &tree) && pattern_matches("**", &tree));
        assert!(!pattern_matches("notes/*", &tree));
        assert!(!pattern_matches(
            "**/*",
            &Need::ReadTree("secret.txt".into()).value()
        ));
        assert_eq!(Need::ReadTree(String::new()).value(), "/");
        assert_eq!(
            Need::Read("/home/u/agents/notes/workspace/.env".into()).value(),
            "/"
        );
        assert_eq!(Need::Read("../outside".into()).value(), "/");
        assert!(!pattern_matches("**/notes/**", "/"));
        assert!(!pattern_matches("*/**", "/"));
    }

    #[test]
    fn paths_are_normalized_before_they_are_matched() {
        assert_eq!(normalize_path("./notes//a.md"), "notes/a.md");
        assert_eq!(normalize_path("notes/../secret.txt"), "secret.txt");
        assert_eq!(normalize_path("../../etc/passwd"), "../../etc/passwd");
        assert_eq!(normalize_path("/etc/passwd"), "/etc/passwd");
        let need = Need::Read("notes/../secret.txt".into());
        assert!(!pattern_matches("notes/**", &need.value()));
    }

    #[test]
    fn clamped_capabilities_are_always_within_the_parent() {
        let parent = Capabilities {
            read: vec!["notes/**".into()],
            domains: vec!["*.example.com".into()],
            shared_memory_write: true,
            ..caps(&["read_file", "shell"])
        };
        let wide = Capabilities {
            spawn: true,
            shared_memory_write: true,
            ..Capabilities::default()
        };
        let clamped = wide.clamped_to(&parent);
        assert_eq!(clamped.tools, ["read_file", "shell"]);
        assert_eq!(clamped.read, ["notes/**"]);
        assert_eq!(clamped.domains, ["*.example.com"]);
        assert!(!clamped.spawn && clamped.shared_memory_write);
        assert_eq!(clamped.within(&parent), Ok(()));
        let some = Capabilities {
            read: vec!["notes/a/**".into(), "src/**".into()],
            ..caps(&["shell", "http_fetch"])
        };
        let narrowed = some.clamped_to(&parent);
        assert_eq!(narrowed.tools, ["shell"]);
        assert_eq!(narrowed.read, ["notes/a/**"]);
        assert_eq!(
            wide.within(&parent).unwrap_err(),
            "tools `*` is not allowed to the parent"
        );
    }

    #[test]
    fn a_child_gets_no_capability_its_parent_lacks() {
        let parent = Capabilities {
            spawn: true,
            ..caps(&["shell", "read_file"])
        };
        let child = caps(&["read_file"]);
        assert_eq!(child.within(&parent), Ok(()));
        assert!(child.allows_tool("read_file") && !child.allows_tool("shell"));
        let all = Capabilities::default();
        assert!(all.within(&parent).unwrap_err().contains("`*`"));
        assert_eq!(child.within(&all), Ok(()));
        let writer = Capabilities {
            shared_memory_write: true,
            ..child.clone()
        };
        assert!(
            writer
                .within(&parent)
                .unwrap_err()
                .contains("shared_memory_write")
        );
        let secretive = Capabilities {
            secrets: vec!["GITHUB_TOKEN".into()],
            ..child
        };
        let parent_secrets = Capabilities {
            secrets: vec!["OTHER".into()],
            ..parent
        };
        assert_eq!(
            secretive.within(&parent_secrets).unwrap_err(),
            "secrets `GITHUB_TOKEN` is not allowed to the parent"
        );
    }

    #[test]
    fn a_grant_widens_by_one_right_and_names_a_bad_one() {
        let mut c = Capabilities {
            read: vec!["notes/**".into()],
            ..caps(&["read_file"])
        };
        c.grant("tool:shell").unwrap();
        c.grant("read:notes/a.md").unwrap();
        c.grant("spawn:worker").unwrap();
        c.grant("schedule").unwrap();
        assert_eq!(c.tools, ["read_file", "shell"]);
        assert_eq!(c.read, ["notes/**"]);
        assert!(c.spawn && c.schedule);
        assert_eq!(c.templates, [ANY]);
        assert!(c.grant("fly").unwrap_err().contains("is not a right"));
        assert!(
            c.grant("color:red")
                .unwrap_err()
                .contains("`color` is not a kind")
        );
        assert!(c.grant("tool:").unwrap_err().contains("names nothing"));
    }

    #[test]
    fn old_capabilities_without_the_new_lists_keep_every_right() {
        let old: Capabilities =
            serde_json::from_str(r#"{"tools":["shell"],"spawn":true}"#).unwrap();
        assert_eq!(old.read, [ANY]);
        assert_eq!(old.secrets, [ANY]);
        assert!(old.spawn && !old.schedule);
    }
}
