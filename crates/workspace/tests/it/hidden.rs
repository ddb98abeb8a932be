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
