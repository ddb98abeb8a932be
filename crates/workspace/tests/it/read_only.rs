//! Read-only paths: readable, but no write, creation, edit or directory beneath them.

use crate::support::Fixture;
use reef_workspace::WorkspaceError;

#[test]
fn read_only_paths_can_be_read_but_not_changed() {
    let fx = Fixture::new();
    fx.write(".git/config", "[core]\n");
    fx.write("reef.toml", "[agent]\n");
    let ws = fx
        .ws()
        .with_read_only(&["reef.toml", ".git/hooks", ".git/config"]);
    let rel = |p: &str| ws.resolve(p).unwrap();
    assert_eq!(ws.read(&rel(".git/config"), 100).unwrap(), b"[core]\n");
    let refused = [
        ws.write(&rel("reef.toml"), b"x"),
        ws.write(&rel(".git/config"), b"x"),
        ws.create_new(&rel(".git/hooks/pre-commit"), b"x"),
        ws.create_dir_all(&rel(".git/hooks/sub")),
        ws.open_for_edit(&rel(".git/config"), 100).map(drop),
    ];
    for result in refused {
        assert!(
            matches!(result, Err(WorkspaceError::ReadOnly { .. })),
            "{result:?}"
        );
    }
    assert_eq!(fx.read(".git/config"), "[core]\n");
    assert!(!fx.root.join(".git/hooks").exists());
    // Positive control: the rest of `.git` and the workspace.
    ws.write(&rel(".git/description"), b"repo").unwrap();
    ws.write(&rel("reef.toml.bak"), b"copy").unwrap();
    assert_eq!(fx.read(".git/description"), "repo");
}
