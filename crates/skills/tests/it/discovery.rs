//! Finding skills: precedence, links refused, invalid folders listed with their reason,
//! selection by pattern, and the prompt's bounded list.

use crate::{PDF_SKILL, policy, sandbox, simple, write_skill};
use reef_skills::{Installer, Origin, Roots, SkillSet, SkillSettings, Source, State, discover};
use std::path::Path;

fn roots(ws: &Path, home: &Path) -> Roots {
    Roots {
        workspace: Some(ws.to_path_buf()),
        home: home.to_path_buf(),
    }
}

fn state_of<'a>(catalog: &'a reef_skills::Catalog, name: &str, origin: &str) -> &'a State {
    &catalog
        .found
        .iter()
        .find(|f| f.name == name && f.origin.kind() == origin)
        .unwrap_or_else(|| panic!("{name} from {origin} not found: {:?}", catalog.found))
        .state
}

#[tokio::test]
async fn workspace_beats_home_beats_installed_and_the_list_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let (ws, home, src) = (
        dir.path().join("ws"),
        dir.path().join("home"),
        dir.path().join("src"),
    );
    write_skill(
        &ws.join("skills"),
        "deploy",
        &simple("deploy", "From the workspace."),
        &[],
    );
    write_skill(
        &home.join("skills"),
        "deploy",
        &simple("deploy", "From the home."),
        &[],
    );
    write_skill(
        &home.join("skills"),
        "lint",
        &simple("lint", "Lint from the home."),
        &[],
    );
    write_skill(&src, "deploy", &simple("deploy", "Installed."), &[]);
    write_skill(&src, "lint", &simple("lint", "Installed lint."), &[]);
    write_skill(&src, "report", &simple("report", "Installed report."), &[]);
    write_skill(
        &ws.join(".agents/skills"),
        "report",
        &simple("report", "Agents dir."),
        &[],
    );
    let installer = Installer::new(home.clone(), policy(Vec::new()));
    let report = installer.add(&Source::Path(src), None).await.unwrap();
    assert_eq!(report.installed.len(), 3);

    let catalog = discover(&roots(&ws, &home));
    let active: Vec<(String, String)> = catalog
        .active()
        .map(|s| (s.name().to_owned(), s.manifest.description.clone()))
        .collect();
    assert_eq!(
        active,
        [
            ("deploy".to_owned(), "From the workspace.".to_owned()),
            ("report".to_owned(), "Agents dir.".to_owned()),
            ("lint".to_owned(), "Lint from the home.".to_owned()),
        ]
    );
    match state_of(&catalog, "deploy", "home") {
        State::Shadowed { by, .. } => assert_eq!(*by, Origin::Workspace { dir: "skills" }),
        other => panic!("{other:?}"),
    }
    match state_of(&catalog, "lint", "installed") {
        State::Shadowed { by, .. } => assert_eq!(*by, Origin::Home),
        other => panic!("{other:?}"),
    }
    let installed = catalog
        .found
        .iter()
        .find(|f| f.name == "report" && f.origin.kind() == "installed")
        .unwrap();
    assert!(
        installed.origin.to_string().starts_with("installed from /"),
        "{}",
        installed.origin
    );
}

#[test]
fn links_and_broken_skills_are_listed_invalid_and_the_rest_load() {
    let dir = tempfile::tempdir().unwrap();
    let (ws, home) = (dir.path().join("ws"), dir.path().join("home"));
    let skills = ws.join("skills");
    std::fs::create_dir_all(&skills).unwrap();
    std::fs::write(dir.path().join("api-token"), "sk-secret-value").unwrap();
    // A skill folder that is a link to a folder outside the workspace.
    let outside = write_skill(dir.path(), "outside", &simple("outside", "Outside."), &[]);
    std::os::unix::fs::symlink(&outside, skills.join("outside")).unwrap();
    // A SKILL.md that is a link to a secret.
    std::fs::create_dir_all(skills.join("leak")).unwrap();
    std::os::unix::fs::symlink(dir.path().join("api-token"), skills.join("leak/SKILL.md")).unwrap();
    // A SKILL.md that is a folder, one that is not UTF-8, and a folder without one.
    std::fs::create_dir_all(skills.join("odd/SKILL.md")).unwrap();
    std::fs::create_dir_all(skills.join("latin")).unwrap();
    std::fs::write(
        skills.join("latin/SKILL.md"),
        b"---\nname: latin\ndescription: caf\xe9\n---\n",
    )
    .unwrap();
    std::fs::create_dir_all(skills.join("empty")).unwrap();
    write_skill(&skills, "wrong", &simple("right", "Name differs."), &[]);
    write_skill(&skills, "good", &simple("good", "Fine."), &[]);
    std::fs::write(skills.join("README.md"), "not a skill").unwrap();

    let catalog = discover(&roots(&ws, &home));
    let names: Vec<&str> = catalog.active().map(|s| s.name()).collect();
    assert_eq!(names, ["good"]);
    let reason = |name: &str| match state_of(&catalog, name, "workspace") {
        State::Invalid { reason } => reason.clone(),
        other => panic!("{name}: {other:?}"),
    };
    assert!(
        reason("outside").contains("symbolic link"),
        "{}",
        reason("outside")
    );
    assert!(
        reason("leak").contains("symbolic link"),
        "{}",
        reason("leak")
    );
    assert!(reason("odd").contains("directory"), "{}", reason("odd"));
    assert!(reason("latin").contains("not UTF-8"), "{}", reason("latin"));
    assert!(reason("empty").contains("SKILL.md"), "{}", reason("empty"));
    assert!(
        reason("wrong").contains("must equal the folder name"),
        "{}",
        reason("wrong")
    );
    let all = format!("{:?}", catalog.found);
    assert!(!all.contains("sk-secret-value"), "{all}");
    assert_eq!(catalog.found.len(), 7, "README.md is not a skill: {all}");
}

#[test]
fn a_linked_skills_folder_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (ws, home) = (dir.path().join("ws"), dir.path().join("home"));
    std::fs::create_dir_all(&ws).unwrap();
    let elsewhere = dir.path().join("elsewhere");
    write_skill(&elsewhere, "x", &simple("x", "X."), &[]);
    std::os::unix::fs::symlink(&elsewhere, ws.join("skills")).unwrap();
    let catalog = discover(&roots(&ws, &home));
    assert_eq!(catalog.active().count(), 0);
    match &catalog.found[0].state {
        State::Invalid { reason } => assert!(reason.contains("symbolic link"), "{reason}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_template_selects_skills_by_pattern_and_the_prompt_lists_names_only_within_its_budget() {
    let dir = tempfile::tempdir().unwrap();
    let (ws, home) = (dir.path().join("ws"), dir.path().join("home"));
    std::fs::create_dir_all(&ws).unwrap();
    write_skill(
        &home.join("skills"),
        "pdf",
        PDF_SKILL,
        &[("references/forms.md", "Forms.")],
    );
    for name in ["git-release", "git-bisect", "docx"] {
        write_skill(
            &home.join("skills"),
            name,
            &simple(name, &format!("About {name}.")),
            &[],
        );
    }
    let set = |select: &[&str], max: usize| {
        SkillSet::new(
            home.clone(),
            select.iter().map(|s| (*s).to_owned()).collect(),
            SkillSettings {
                prompt_max_chars: max,
                ..SkillSettings::default()
            },
            sandbox(Vec::new()),
        )
    };
    let loaded = set(&["pdf", "git-*"], 4000).load(&ws);
    let names: Vec<&str> = loaded.catalog.active().map(|s| s.name()).collect();
    assert_eq!(names, ["git-bisect", "git-release", "pdf"]);
    let prompt = loaded.prompt.unwrap();
    assert!(
        prompt.contains("- pdf: Comprehensive PDF manipulation toolkit"),
        "{prompt}"
    );
    assert!(!prompt.contains("docx"), "{prompt}");
    assert!(
        !prompt.contains("Run `scripts/extract.py"),
        "instructions stay out: {prompt}"
    );
    let tools: Vec<String> = loaded.tools.iter().map(|t| t.spec().name).collect();
    assert_eq!(tools, ["skill"], "no skill_create without skill_write");

    let tight = set(&[], 330).load(&ws).prompt.unwrap();
    assert!(tight.chars().count() <= 330, "{tight}");
    assert!(
        tight.contains("more (skills.prompt_max_chars is reached)"),
        "{tight}"
    );
}
