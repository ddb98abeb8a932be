//! Creating files and directories: planted names and links stop it, nothing lands outside.

use crate::support::Fixture;
use reef_workspace::WorkspaceError;

#[test]
fn create_new_refuses_an_existing_file_and_a_planted_link() {
    let fx = Fixture::new();
    fx.write("taken.txt", "original");
    fx.link(fx.outside.join("planted.txt"), "planted.txt");
    fx.link(fx.outside.join("secret.txt"), "secret.txt");
    let ws = fx.ws();

    let fresh = ws.resolve("fresh.txt").unwrap();
    ws.create_new(&fresh, b"content").unwrap();
    assert_eq!(
        std::fs::read_to_string(fx.root.join("fresh.txt")).unwrap(),
        "content"
    );

    for name in ["fresh.txt", "taken.txt", "planted.txt", "secret.txt"] {
        let err = ws
            .create_new(&ws.resolve(name).unwrap(), b"new")
            .unwrap_err();
        assert!(
            matches!(err, WorkspaceError::Exists { .. }),
            "{name}: {err:?}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(fx.root.join("taken.txt")).unwrap(),
        "original"
    );
    assert!(
        !fx.outside.join("planted.txt").exists(),
        "created through the link"
    );
    fx.assert_outside_untouched();
}

#[test]
fn parent_creation_stops_at_a_symlinked_directory_and_creates_nothing_outside() {
    let fx = Fixture::new();
    std::fs::create_dir(fx.root.join("real")).unwrap();
    fx.link(&fx.outside, "real/link");
    let ws = fx.ws();

    let ok = ws.resolve("real/a/b/c").unwrap();
    ws.create_dir_all(&ok).unwrap();
    assert!(fx.root.join("real/a/b/c").is_dir());
    ws.create_dir_all(&ok).unwrap(); // existing directories are fine

    let through = ws.resolve("real/link/x/y").unwrap();
    let err = ws.create_dir_all(&through).unwrap_err();
    assert!(
        matches!(&err, WorkspaceError::Symlink { link, .. } if link == "real/link"),
        "{err:?}"
    );
    let file = ws.resolve("real/link/x/f.txt").unwrap();
    assert!(matches!(
        ws.write(&file, b"x"),
        Err(WorkspaceError::Symlink { .. })
    ));
    fx.assert_outside_untouched();

    fx.write("plain", "");
    let err = ws
        .create_dir_all(&ws.resolve("plain/sub").unwrap())
        .unwrap_err();
    assert!(
        matches!(err, WorkspaceError::NotDirectory { ref path } if path == "plain"),
        "{err:?}"
    );
}

#[test]
fn write_replaces_a_regular_file_and_refuses_directories() {
    let fx = Fixture::new();
    fx.write("f.txt", "a much longer original content");
    std::fs::create_dir(fx.root.join("d")).unwrap();
    let ws = fx.ws();
    ws.write(&ws.resolve("f.txt").unwrap(), b"short").unwrap();
    assert_eq!(
        std::fs::read_to_string(fx.root.join("f.txt")).unwrap(),
        "short"
    );
    ws.write(&ws.resolve("new.txt").unwrap(), b"created")
        .unwrap();
    assert_eq!(
        std::fs::read_to_string(fx.root.join("new.txt")).unwrap(),
        "created"
    );
    let err = ws.write(&ws.resolve("d").unwrap(), b"x").unwrap_err();
    assert!(matches!(err, WorkspaceError::IsDirectory { .. }), "{err:?}");
    let err = ws
        .write(&ws.resolve("missing/f.txt").unwrap(), b"x")
        .unwrap_err();
    assert!(matches!(err, WorkspaceError::NotFound { .. }), "{err:?}");
}
