//! `reef mcp add` and `reef mcp rm`: editing `[mcp.servers.NAME]` in `$REEF_HOME/reef.toml`
//! with toml_edit, so the file keeps its comments and layout. The edited file must load; if
//! it does not, the old one is put back and the error says why.

use crate::exit::Exit;
use crate::home;
use anyhow::Context as _;
use reef_config::Config;
use std::path::Path;
use toml_edit::{DocumentMut, InlineTable, Item, Table, Value, value};

/// What `reef mcp add` was given.
pub struct NewServer {
    pub url: Option<String>,
    pub bearer_secret: Option<String>,
    pub env: Vec<String>,
    pub templates: Vec<String>,
    pub command: Vec<String>,
}

pub fn add(
    config: &Config,
    overrides: &[String],
    name: &str,
    new: &NewServer,
) -> anyhow::Result<()> {
    if !reef_config::valid_server_name(name) {
        return Err(Exit::usage(format!(
            "`{name}` cannot name a server: use letters, digits, - and _ (not __), at most {} \
             characters",
            reef_config::MAX_SERVER_NAME
        )));
    }
    let mut table = Table::new();
    match (&new.url, new.command.split_first()) {
        (Some(url), None) => {
            table.insert("url", value(url.as_str()));
            if let Some(secret) = &new.bearer_secret {
                table.insert("bearer_token_secret", value(secret.as_str()));
            }
            if !new.env.is_empty() {
                return Err(Exit::usage("--env applies to a program, not to --url"));
            }
        }
        (None, Some((program, args))) => {
            table.insert("command", value(program.as_str()));
            let mut list = toml_edit::Array::new();
            for arg in args {
                list.push(arg.as_str());
            }
            table.insert("args", value(list));
            if !new.env.is_empty() {
                table.insert("env", value(env_table(&new.env)?));
            }
        }
        (Some(_), Some(_)) => {
            return Err(Exit::usage(
                "give either --url or a command after --, not both",
            ));
        }
        (None, None) => {
            return Err(Exit::usage(
                "give the server's command after -- (reef mcp add NAME -- COMMAND ARGS…) or \
                 --url URL",
            ));
        }
    }
    if !new.templates.is_empty() {
        let mut list = toml_edit::Array::new();
        for t in &new.templates {
            list.push(t.as_str());
        }
        table.insert("templates", value(list));
    }
    edit(config, overrides, |doc| {
        let servers = servers_table(doc)?;
        if servers.contains_key(name) {
            return Err(Exit::usage(format!(
                "an MCP server `{name}` is configured already; remove it first (reef mcp rm {name})"
            )));
        }
        servers.insert(name, Item::Table(table));
        Ok(())
    })
}

pub fn remove(config: &Config, overrides: &[String], name: &str) -> anyhow::Result<()> {
    edit(config, overrides, |doc| {
        let removed = doc
            .get_mut("mcp")
            .and_then(Item::as_table_like_mut)
            .and_then(|mcp| mcp.get_mut("servers"))
            .and_then(Item::as_table_like_mut)
            .and_then(|servers| servers.remove(name));
        match removed {
            Some(_) => Ok(()),
            None => Err(Exit::usage(format!(
                "no MCP server `{name}` in {} (a server configured elsewhere, e.g. in a \
                 project's reef.toml, is removed there)",
                config.home.join(reef_config::CONFIG_FILE).display()
            ))),
        }
    })
}

/// `KEY=VALUE` or `KEY=secret:NAME` as `{ KEY = "VALUE", KEY = { secret = "NAME" } }`.
fn env_table(pairs: &[String]) -> anyhow::Result<InlineTable> {
    let mut env = InlineTable::new();
    for pair in pairs {
        let (key, val) = pair
            .split_once('=')
            .ok_or_else(|| Exit::usage(format!("--env {pair:?} is not KEY=VALUE")))?;
        let item: Value = match val.strip_prefix("secret:") {
            Some(secret) => {
                let mut by_name = InlineTable::new();
                by_name.insert("secret", secret.into());
                Value::InlineTable(by_name)
            }
            None => val.into(),
        };
        env.insert(key, item);
    }
    Ok(env)
}

/// `[mcp.servers]`, made (as implicit tables, so no empty headers appear) when missing.
fn servers_table(doc: &mut DocumentMut) -> anyhow::Result<&mut Table> {
    let not_table = |key: &str| Exit::usage(format!("`{key}` in reef.toml is not a table"));
    let mcp = doc
        .entry("mcp")
        .or_insert_with(|| {
            let mut t = Table::new();
            t.set_implicit(true);
            Item::Table(t)
        })
        .as_table_mut()
        .ok_or_else(|| not_table("mcp"))?;
    mcp.entry("servers")
        .or_insert_with(|| {
            let mut t = Table::new();
            t.set_implicit(true);
            Item::Table(t)
        })
        .as_table_mut()
        .ok_or_else(|| not_table("mcp.servers"))
}

/// Applies `change` to the home's reef.toml and keeps it only if the configuration loads.
fn edit(
    config: &Config,
    overrides: &[String],
    change: impl FnOnce(&mut DocumentMut) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let path = config.home.join(reef_config::CONFIG_FILE);
    // A reef.toml that links elsewhere (a dotfiles repository) is edited where it lives.
    let path = std::fs::canonicalize(&path).unwrap_or(path);
    let old = match std::fs::read_to_string(&path) {
        Ok(text) => Some(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    let mut doc: DocumentMut = old
        .as_deref()
        .unwrap_or("")
        .parse()
        .with_context(|| format!("{} is not valid TOML", path.display()))?;
    change(&mut doc)?;
    write(&path, &doc.to_string())?;
    if let Err(err) = home::load_config(overrides) {
        match &old {
            Some(text) => write(&path, text)?,
            None => std::fs::remove_file(&path)
                .with_context(|| format!("cannot remove {}", path.display()))?,
        }
        return Err(Exit::usage(format!("the change was not saved: {err}")));
    }
    Ok(())
}

/// Writes `text` to `path` through a temporary file in the same directory.
fn write(path: &Path, text: &str) -> anyhow::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir)
        .with_context(|| format!("cannot write in {}", dir.display()))?;
    std::io::Write::write_all(&mut tmp, text.as_bytes())
        .with_context(|| format!("cannot write {}", path.display()))?;
    tmp.persist(path)
        .with_context(|| format!("cannot replace {}", path.display()))?;
    Ok(())
}
