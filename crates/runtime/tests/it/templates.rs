//! Templates: the built-ins, overriding and adding them from a directory, and errors that
//! name the file and the key.

use reef_config::{NetworkModeName, SandboxConfig};
use reef_runtime::{TemplateSource, Templates};
use std::path::Path;

fn write(dir: &Path, name: &str, text: &str) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join(name), text).unwrap();
}

#[test]
fn the_six_builtins_load_and_only_the_manager_may_spawn() {
    let templates = Templates::builtin().unwrap();
    assert_eq!(
        templates.names(),
        [
            "coder",
            "creative",
            "manager",
            "quick",
            "researcher",
            "worker"
        ]
    );
    for t in templates.iter() {
        assert_eq!(t.source, TemplateSource::Builtin);
        assert!(
            !t.persona.is_empty() && !t.description.is_empty(),
            "{}",
            t.name
        );
        assert_eq!(t.capabilities.spawn, t.name == "manager", "{}", t.name);
        assert!(
            t.budget.tokens.is_some() && t.budget.rounds.is_some(),
            "{}",
            t.name
        );
        // A worker spawned by the manager with its template's budget fits inside the manager's.
        let manager = templates.get("manager").unwrap();
        assert_eq!(t.budget.within(&manager.budget), Ok(()), "{}", t.name);
    }
    let researcher = templates.get("researcher").unwrap();
    assert!(!researcher.capabilities.allows_tool("shell"));
    assert!(researcher.capabilities.allows_tool("http_fetch"));
    let quick = templates.get("quick").unwrap();
    assert_eq!(quick.sandbox.memory_bytes, Some(512 * 1024 * 1024));
    // Writing skills: the coder only (one spawned by the manager is clamped to its parent).
    for t in templates.iter() {
        let writes = t.name == "coder";
        assert_eq!(t.capabilities.skill_write, writes, "{}", t.name);
        assert!(t.skills.is_empty(), "{}: every skill by default", t.name);
    }
}

#[test]
fn a_template_selects_skills_by_pattern() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "docs.toml",
        "description = \"d\"\npersona = \"p\"\nskills = [\"pdf\", \"git-*\"]\n",
    );
    let templates = Templates::load(dir.path()).unwrap();
    assert_eq!(templates.get("docs").unwrap().skills, ["pdf", "git-*"]);
}

#[test]
fn files_replace_builtins_and_add_new_templates() {
    let dir = tempfile::tempdir().unwrap();
    let tdir = dir.path().join("templates");
    write(
        &tdir,
        "worker.toml",
        "description = \"my worker\"\npersona = \"Be terse.\"\nmodel = \"local\"\n\
         [capabilities]\ntools = [\"read_file\"]\n[budget]\nrounds = 3\n\
         [sandbox]\nnetwork = \"allowlist\"\nallow_domains = [\"pypi.org\"]\nmemory = \"1G\"\n",
    );
    write(
        &tdir,
        "auditor.toml",
        "description = \"audits\"\npersona = \"Check things.\"\n",
    );
    write(&tdir, "notes.txt", "not a template");
    let templates = Templates::load(&tdir).unwrap();
    assert_eq!(templates.names().len(), 7);
    let worker = templates.get("worker").unwrap();
    assert_eq!(
        worker.source,
        TemplateSource::File(tdir.join("worker.toml"))
    );
    assert_eq!(
        (worker.persona.as_str(), worker.model.as_deref()),
        ("Be terse.", Some("local"))
    );
    assert_eq!(worker.capabilities.tools, ["read_file"]);
    assert_eq!(worker.budget.rounds, Some(3));
    // The template's sandbox is laid over the configured one.
    let sandbox = worker.sandbox.apply(&SandboxConfig::default());
    assert_eq!(sandbox.network, NetworkModeName::Allowlist);
    assert_eq!(sandbox.allow_domains, ["pypi.org"]);
    assert_eq!(sandbox.memory_bytes, 1024 * 1024 * 1024);
    assert_eq!(
        sandbox.max_processes,
        SandboxConfig::default().max_processes
    );
    // A template without [capabilities] gets every tool, but no spawning.
    let auditor = templates.get("auditor").unwrap();
    assert!(auditor.capabilities.allows_tool("shell") && !auditor.capabilities.spawn);
    // A missing directory means built-ins only.
    assert_eq!(
        Templates::load(&dir.path().join("absent"))
            .unwrap()
            .names()
            .len(),
        6
    );
}

#[test]
fn bad_templates_name_the_file_and_the_key() {
    for (file, text, needles) in [
        (
            "w.toml",
            "description = \"d\"\npersona = \"p\"\n[budget]\nrounds = \"many\"\n",
            &["w.toml", "budget.rounds"][..],
        ),
        (
            "w.toml",
            "description = \"d\"\npersona = \"p\"\nflavour = \"x\"\n",
            &["w.toml", "flavour"][..],
        ),
        (
            "w.toml",
            "description = \"d\"\npersona = \"p\"\n[sandbox]\nmemory = \"lots\"\n",
            &["sandbox.memory", "lots"][..],
        ),
        (
            "w.toml",
            "description = \"d\"\npersona = \"p\"\n[capabilities]\ntools = []\n",
            &["capabilities.tools", "[\"*\"]"][..],
        ),
        (
            "w.toml",
            "description = \"d\"\npersona = \"  \"\n",
            &["persona"][..],
        ),
        (
            "w.toml",
            "description = \"d\"\npersona = \"p\"\nskills = [\"PDF tools\"]\n",
            &["key `skills`", "\"PDF tools\" is not a skill name pattern"][..],
        ),
        (
            "w.toml",
            "description = \"d\"\npersona = \"p\"\nmcp = [\"a__b\"]\n",
            &["key `mcp`", "\"a__b\" cannot name an MCP server"][..],
        ),
        (
            "Bad Name.toml",
            "description = \"d\"\npersona = \"p\"\n",
            &["Bad Name", "a-z"][..],
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), file, text);
        let err = Templates::load(dir.path()).unwrap_err().to_string();
        for needle in needles {
            assert!(err.contains(needle), "{text}: {err}");
        }
    }
}
