//! Links, `..` and absolute paths: nothing outside the root is reached.

use crate::support::{Fixture, SECRET};
use reef_workspace::{Kind, WorkspaceError};

#[test]
fn a_symlinked_file_is_refused_and_not_read() {
    let fx = Fixture::new();
    fx.write("plain.txt", "plain");
    fx.link(fx.outside.join("secret.txt"), "token");
    let ws = fx.ws();
    // Positive control: the secret is readable by this process, and plain files work.
    assert_eq!(
        std::fs::read_to_string(fx.root.join("token")).unwrap(),
        SECRET
    );
    assert_eq!(
        ws.read(&ws.resolve("plain.txt").unwrap(), 100).unwrap(),
        b"plain"
    );

    let rel = ws.resolve("token").unwrap();
    let err = ws.read(&rel, 100).unwrap_err();
    assert!(
        matches!(&err, WorkspaceError::Symlink { path, link } if path == "token" && link == "token"),
        "{err:?}"
    );
    assert!(err.to_string().contains("symbolic link token"), "{err}");
    assert!(!err.to_string().contains(SECRET));
    assert!(matches!(
        ws.open_for_edit(&rel, 100),
        Err(WorkspaceError::Symlink { .. })
    ));
    assert!(matches!(
        ws.write(&rel, b"overwritten"),
        Err(WorkspaceError::Symlink { .. })
    ));
    assert_eq!(ws.metadata(&rel).unwrap().kind, Kind::Symlink);
    fx.assert_outside_untouched();
}

#[test]
fn a_symlinked_parent_directory_is_refused_for_every_operation() {
    let fx = Fixture::new();
    fx.link(&fx.outside, "out");
    fx.write("in/ok.txt", "ok");
    let ws = fx.ws();
    assert_eq!(ws.list(&ws.resolve("in").unwrap()).unwrap().len(), 1);

    let secret = ws.resolve("out/secret.txt").unwrap();
    let is_link = |err: WorkspaceError| {
        assert!(
            matches!(&err, WorkspaceError::Symlink { link, .. } if link == "out"),
            "{err:?}"
        );
    };
    is_link(ws.read(&secret, 100).unwrap_err());
    is_link(ws.write(&secret, b"x").unwrap_err());
    is_link(ws.metadata(&secret).unwrap_err());
    is_link(ws.list(&ws.resolve("out").unwrap()).unwrap_err());
    let new = ws.resolve("out/new.txt").unwrap();
    is_link(ws.write(&new, b"x").unwrap_err());
    is_link(ws.create_new(&new, b"x").unwrap_err());
    is_link(
        ws.create_dir_all(&ws.resolve("out/a/b").unwrap())
            .unwrap_err(),
    );
    fx.assert_outside_untouched();
}

#[test]
fn dotdot_cannot_climb_out_but_may_move_around_inside() {
    let fx = Fixture::new();
    fx.write("a/f.txt", "inside");
    let ws = fx.ws();
    for given in [
        "..",
        "../outside/secret.txt",
        "a/../../outside/secret.txt",
        "./../x",
    ] {
        let err = ws.resolve(given).unwrap_err();
        assert!(
            matches!(err, WorkspaceError::Outside { .. }),
            "{given}: {err:?}"
        );
        assert!(
            err.to_string()
                .contains(&format!("path {given} is outside the workspace"))
        );
    }
    let rel = ws.resolve("a/./../a/f.txt").unwrap();
    assert_eq!(rel.display(), "a/f.txt");
    assert_eq!(ws.read(&rel, 100).unwrap(), b"inside");
    assert_eq!(ws.resolve("a/..").unwrap().display(), ".");
}

#[test]
fn absolute_paths_work_only_under_the_root() {
    let fx = Fixture::new();
    fx.write("f.txt", "inside");
    let ws = fx.ws();
    let inside = fx.root.join("f.txt");
    let rel = ws.resolve(inside.to_str().unwrap()).unwrap();
    assert_eq!(rel.display(), "f.txt");
    assert_eq!(ws.read(&rel, 100).unwrap(), b"inside");
    let outside = fx.outside.join("secret.txt");
    for given in [outside.to_str().unwrap(), "/etc/passwd", "/"] {
        assert!(
            matches!(ws.resolve(given), Err(WorkspaceError::Outside { .. })),
            "{given}"
        );
    }
    let sneaky = format!("{}/../outside/secret.txt", fx.root.display());
    assert!(matches!(
        ws.resolve(&sneaky),
        Err(WorkspaceError::Outside { .. })
    ));
}

#[test]
fn the_root_itself_may_be_reached_through_a_link() {
    // The root is trusted (reef chose it); only what lies beneath it is the agent's.
    let fx = Fixture::new();
    fx.write("f.txt", "inside");
    let alias = fx.outside.join("alias");
    std::os::unix::fs::symlink(&fx.root, &alias).unwrap();
    let ws = reef_workspace::Workspace::open(&alias).unwrap();
    assert_eq!(ws.root(), fx.root.canonicalize().unwrap());
    let via_alias = ws.resolve(alias.join("f.txt").to_str().unwrap()).unwrap();
    assert_eq!(ws.read(&via_alias, 100).unwrap(), b"inside");
    assert!(matches!(
        reef_workspace::Workspace::open(&fx.root.join("missing")),
        Err(WorkspaceError::Unavailable { .. })
    ));
}

#[test]
fn empty_and_nul_paths_are_bad_input() {
    let fx = Fixture::new();
    let ws = fx.ws();
    assert!(matches!(
        ws.resolve(""),
        Err(WorkspaceError::InvalidPath { .. })
    ));
    assert!(matches!(
        ws.resolve("a\0b"),
        Err(WorkspaceError::InvalidPath { .. })
    ));
}
