//! Hidden (secret) paths inside the workspace are refused or left out, like in the sandbox.

use crate::support::Fixture;
use reef_workspace::{WalkOptions, Workspace, WorkspaceError};
use std::ops::ControlFlow;

#[test]
fn a_hidden_directory_inside_the_workspace_is_refused_and_left_out() {
    let fx = Fixture::new();
    fx.write(".ssh/id_rsa", "PRIVATE KEY");
    fx.write("notes.txt", "ok");
    let ws = fx.ws().with_hidden(&[fx.root.join(".ssh")]);
    // Positive control: without the hidden list, the key is an ordinary file.
    let plain = fx.ws();
    assert_eq!(
        plain
            .read(&plain.resolve(".ssh/id_rsa").unwrap(), 100)
            .unwrap(),
        b"PRIVATE KEY"
    );

    for given in [".ssh", ".ssh/id_rsa", "./.ssh/new", "x/../.ssh/id_rsa"] {
        let err = ws.resolve(given).unwrap_err();
        assert!(
            matches!(err, WorkspaceError::Hidden { .. }),
            "{given}: {err:?}"
        );
        assert!(err.to_string().contains("holds credentials"), "{err}");
    }
    let names: Vec<String> = ws
        .list(&ws.resolve(".").unwrap())
        .unwrap()
        .iter()
        .map(|e| e.path.display())
        .collect();
    assert_eq!(names, ["notes.txt"]);
    let (first, more) = ws.list_first(&ws.resolve(".").unwrap(), 10).unwrap();
    assert_eq!((first.len(), more), (1, 0), "{first:?}");
    let mut walked = Vec::new();
    ws.walk(&ws.resolve(".").unwrap(), &WalkOptions::default(), |e| {
        walked.push(e.path.display());
        ControlFlow::Continue(())
    })
    .unwrap();
    assert_eq!(walked, ["notes.txt"]);
}

#[test]
fn a_hidden_directory_holding_the_whole_workspace_does_not_hide_it() {
    let fx = Fixture::new();
    fx.write("f.txt", "ok");
    let ws =
        Workspace::open(&fx.root)
            .unwrap()
            .with_hidden(&[fx.root.parent().unwrap().to_path_buf()]);
    assert_eq!(ws.read(&ws.resolve("f.txt").unwrap(), 100).unwrap(), b"ok");
}

#[test]
fn a_workspace_that_is_itself_hidden_opens_nothing() {
    let fx = Fixture::new();
    fx.write("api-token", "token");
    let ws = fx.ws().with_hidden(std::slice::from_ref(&fx.root));
    for given in ["api-token", ".", "sub/new"] {
        let err = ws.resolve(given).unwrap_err();
        assert!(
            matches!(err, WorkspaceError::Hidden { .. }),
            "{given}: {err:?}"
        );
    }
    // Positive control: the same directory, not hidden.
    let plain = fx.ws();
    assert_eq!(
        plain
            .read(&plain.resolve("api-token").unwrap(), 10)
            .unwrap(),
        b"token"
    );
}

#[test]
fn a_capped_listing_returns_the_first_names_and_counts_the_rest() {
    let fx = Fixture::new();
    for i in 0..25 {
        fx.write(&format!("f{i:02}.txt"), "x");
    }
    fx.write(".ssh/id_rsa", "PRIVATE KEY");
    let ws = fx.ws().with_hidden(&[fx.root.join(".ssh")]);
    let root = ws.resolve(".").unwrap();
    let (first, more) = ws.list_first(&root, 10).unwrap();
    let names: Vec<String> = first.iter().map(|e| e.path.display()).collect();
    let expected: Vec<String> = (0..10).map(|i| format!("f{i:02}.txt")).collect();
    assert_eq!(names, expected);
    // The hidden folder counts neither as shown nor as more.
    assert_eq!(more, 15);
    assert_eq!(ws.list(&root).unwrap()[..10], first[..]);
    let (all, none) = ws.list_first(&root, 100).unwrap();
    assert_eq!((all.len(), none), (25, 0));
}
