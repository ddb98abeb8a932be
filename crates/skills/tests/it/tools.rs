//! The tools skills bring, run as an agent runs them: through the real default sandbox, with
//! reef's home hidden and the skill folders shown read-only.

use crate::{PDF_SKILL, ctx, sandbox, simple, tool, write_skill};
use reef_core::{Capabilities, ToolError};
use reef_skills::{SkillSet, SkillSettings};
use serde_json::json;
use std::path::{Path, PathBuf};

struct Env {
    _dir: tempfile::TempDir,
    ws: PathBuf,
    home: PathBuf,
}

fn env() -> Env {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    let home = dir.path().join("home");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(home.join("reef.db"), "the store").unwrap();
    Env {
        ws,
        home,
        _dir: dir,
    }
}

fn set(home: &Path, capabilities: Capabilities) -> SkillSet {
    SkillSet::new(
        home.to_path_buf(),
        Vec::new(),
        SkillSettings::default(),
        // reef's home is hidden from commands, as in the daemon.
        sandbox(vec![home.to_path_buf()]),
    )
    .with_capabilities(capabilities)
}

#[tokio::test]
async fn skill_loads_instructions_and_files_confined_to_the_folder() {
    let e = env();
    std::fs::write(e.home.join("secret.txt"), "sk-do-not-show").unwrap();
    let folder = write_skill(
        &e.home.join("skills"),
        "pdf",
        PDF_SKILL,
        &[
            ("scripts/extract.py", "print('text')\n"),
            ("references/forms.md", "# Forms\nFill field by field.\n"),
            ("references/deep/nested.md", "Nested reference.\n"),
            ("assets/logo.bin", "\0\x01binary"),
        ],
    );
    std::os::unix::fs::symlink(e.home.join("secret.txt"), folder.join("references/link.md"))
        .unwrap();
    let loaded = set(&e.home, Capabilities::default()).load(&e.ws);
    let skill = tool(&loaded, "skill");
    let c = ctx(&e.ws, loaded.folders.clone());

    let text = skill.call(&c, json!({"name": "pdf"})).await.unwrap();
    assert!(text.starts_with("# Skill `pdf` (home (skills/))"), "{text}");
    assert!(
        text.contains(&format!("Folder: {} (read-only)", folder.display())),
        "{text}"
    );
    assert!(text.contains("references/deep/nested.md"), "{text}");
    assert!(
        text.contains(&format!("python3 {}/scripts/extract.py", folder.display())),
        "{text}"
    );
    assert!(
        text.ends_with("For forms, read references/forms.md first."),
        "{text}"
    );

    let nested = skill
        .call(
            &c,
            json!({"name": "pdf", "file": "references/deep/nested.md"}),
        )
        .await
        .unwrap();
    assert_eq!(nested, "Nested reference.\n");
    let binary = skill
        .call(&c, json!({"name": "pdf", "file": "assets/logo.bin"}))
        .await
        .unwrap();
    assert!(binary.contains("binary file"), "{binary}");
    for escape in [
        "../secret.txt",
        "references/../../secret.txt",
        "/etc/passwd",
        "references/link.md",
    ] {
        let err = skill
            .call(&c, json!({"name": "pdf", "file": escape}))
            .await
            .expect_err(escape);
        let msg = err.to_string();
        assert!(!msg.contains("sk-do-not-show"), "{escape}: {msg}");
        assert!(
            matches!(err, ToolError::InvalidArguments(_)),
            "{escape}: {msg}"
        );
    }
    let unknown = skill.call(&c, json!({"name": "nope"})).await.unwrap_err();
    assert!(
        unknown.to_string().contains("the skills are: pdf"),
        "{unknown}"
    );
}

#[tokio::test]
async fn a_skill_script_runs_in_the_sandbox_with_its_folder_read_only() {
    let e = env();
    let folder = write_skill(
        &e.home.join("skills"),
        "stamp",
        &simple("stamp", "Stamp files."),
        &[(
            "scripts/stamp.sh",
            "echo \"stamped $1\" > \"$1.stamp\"\n\
             if touch \"$(dirname \"$0\")/written\" 2>/dev/null; then echo folder-writable; else echo folder-read-only; fi\n\
             cat \"$(dirname \"$0\")/../../../reef.db\" 2>/dev/null || echo store-hidden\n",
        )],
    );
    std::fs::write(e.ws.join("a.txt"), "a").unwrap();
    let loaded = set(&e.home, Capabilities::default()).load(&e.ws);
    assert_eq!(loaded.folders, std::slice::from_ref(&folder));
    // The agent runs the script with its ordinary shell tool.
    let shell = reef_tools::builtin_registry(
        sandbox(vec![e.home.clone()]),
        reef_tools::BuiltinConfig::default(),
    )
    .get("shell")
    .unwrap();
    let command = format!("sh {}/scripts/stamp.sh a.txt", folder.display());
    let out = shell
        .call(
            &ctx(&e.ws, loaded.folders.clone()),
            json!({"command": command}),
        )
        .await
        .unwrap();
    assert!(out.starts_with("exit_code: 0"), "{out}");
    assert!(out.contains("folder-read-only"), "{out}");
    assert!(out.contains("store-hidden"), "{out}");
    assert!(!out.contains("the store"), "{out}");
    assert_eq!(
        std::fs::read_to_string(e.ws.join("a.txt.stamp")).unwrap(),
        "stamped a.txt\n"
    );
    assert!(!folder.join("scripts/written").exists());

    // Without the folder in the call's read-only list the script is not there.
    let hidden = shell
        .call(&ctx(&e.ws, Vec::new()), json!({"command": command}))
        .await
        .unwrap();
    assert!(!hidden.starts_with("exit_code: 0"), "{hidden}");
}

#[tokio::test]
async fn a_skill_with_parameters_is_its_own_tool_run_in_the_sandbox() {
    let e = env();
    let folder = write_skill(
        &e.home.join("skills"),
        "weather",
        "---\nname: weather\ndescription: Weather for a city.\nparameters:\n  city:\n    type: string\n    description: City name\n  days:\n    type: integer\n    default: 2\n---\nUse it.\n",
        &[(
            "run.sh",
            "read -r json\n\
             echo \"stdin=$json\"\n\
             echo \"city=$REEF_ARG_CITY days=$REEF_ARG_DAYS\"\n\
             echo \"pwd=$(pwd)\"\n\
             touch \"$REEF_SKILL_DIR/x\" 2>/dev/null && echo folder-writable || echo folder-read-only\n\
             [ \"$REEF_ARG_CITY\" = Nowhere ] && { echo 'no such city' >&2; exit 3; }\n\
             exit 0\n",
        )],
    );
    let loaded = set(&e.home, Capabilities::default()).load(&e.ws);
    let weather = tool(&loaded, "weather");
    let spec = weather.spec();
    assert_eq!(spec.description, "Weather for a city.");
    assert_eq!(spec.parameters["required"], json!(["city"]));
    assert_eq!(
        spec.parameters["properties"]["days"],
        json!({"type": "integer", "default": 2})
    );

    let out = weather
        .call(&ctx(&e.ws, Vec::new()), json!({"city": "Oslo"}))
        .await
        .unwrap();
    assert!(out.contains(r#"stdin={"city":"Oslo","days":2}"#), "{out}");
    assert!(out.contains("city=Oslo days=2"), "{out}");
    assert!(
        out.contains(&format!("pwd={}", e.ws.canonicalize().unwrap().display())),
        "{out}"
    );
    assert!(out.contains("folder-read-only"), "{out}");
    assert!(!folder.join("x").exists());

    let err = weather
        .call(&ctx(&e.ws, Vec::new()), json!({"city": "Nowhere"}))
        .await
        .unwrap_err();
    assert!(matches!(err, ToolError::Failed(_)));
    assert!(
        err.to_string()
            .contains("exited with code 3:\nno such city"),
        "{err}"
    );
    let bad = weather
        .call(&ctx(&e.ws, Vec::new()), json!({"city": 7}))
        .await
        .unwrap_err();
    assert_eq!(
        bad.to_string(),
        "invalid arguments: `city` must be of type string"
    );
    let missing = weather
        .call(&ctx(&e.ws, Vec::new()), json!({}))
        .await
        .unwrap_err();
    assert_eq!(missing.to_string(), "invalid arguments: `city` is required");
}

#[tokio::test]
async fn skill_create_writes_a_valid_skill_that_loads_next_time() {
    let e = env();
    let writer = Capabilities {
        skill_write: true,
        ..Capabilities::default()
    };
    let set = set(&e.home, writer);
    let before = set.load(&e.ws);
    let create = tool(&before, "skill_create");
    assert!(before.catalog.active().next().is_none());
    let c = ctx(&e.ws, Vec::new());
    let out = create
        .call(
            &c,
            json!({
                "name": "csv-report",
                "description": "Summarise a CSV file: rows, columns: and totals.",
                "instructions": "Run scripts/report.sh FILE.",
                "files": {"scripts/report.sh": "wc -l \"$1\"\n"}
            }),
        )
        .await
        .unwrap();
    assert!(out.contains("Created the skill `csv-report`"), "{out}");
    let after = set.load(&e.ws);
    let skill = after.catalog.get("csv-report").unwrap();
    assert_eq!(
        skill.manifest.description,
        "Summarise a CSV file: rows, columns: and totals."
    );
    assert_eq!(skill.origin.kind(), "workspace");

    for (args, want) in [
        (
            json!({"name": "Bad Name", "description": "d", "instructions": "i"}),
            "must be 1-64",
        ),
        (
            json!({"name": "csv-report", "description": "d", "instructions": "i"}),
            "already exists",
        ),
        (
            json!({"name": "x", "description": "", "instructions": "i"}),
            "must not be empty",
        ),
        (
            json!({"name": "y", "description": "d", "instructions": "i", "files": {"../../escape.sh": "x"}}),
            "relative path inside the skill",
        ),
        (
            json!({"name": "z", "description": "d", "instructions": "i", "files": {"SKILL.md": "x"}}),
            "other than SKILL.md",
        ),
    ] {
        let err = create
            .call(&c, args.clone())
            .await
            .expect_err(&args.to_string());
        assert!(err.to_string().contains(want), "{args}: {err}");
    }
    assert!(!e.ws.parent().unwrap().join("escape.sh").exists());
    assert!(
        !e.ws.join("skills/y").exists(),
        "nothing is written for a refused call"
    );
}
