//! FIFOs and files larger than they claim: nothing blocks, nothing reads past the cap.

use crate::support::Fixture;
use reef_workspace::{Kind, Workspace, WorkspaceError};
use std::os::unix::fs::FileTypeExt;
use std::sync::mpsc;
use std::time::Duration;

#[test]
fn a_fifo_is_refused_without_blocking() {
    let fx = Fixture::new();
    let fifo = fx.root.join("pipe");
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &fifo,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    assert!(
        std::fs::symlink_metadata(&fifo)
            .unwrap()
            .file_type()
            .is_fifo()
    );
    let root = fx.root.clone();
    let (tx, rx) = mpsc::channel();
    // A thread, so a blocking open fails the test instead of hanging it.
    std::thread::spawn(move || {
        let ws = Workspace::open(&root).unwrap();
        let rel = ws.resolve("pipe").unwrap();
        let results = [
            ws.read(&rel, 100).map(drop),
            ws.open_for_edit(&rel, 100).map(drop),
            ws.write(&rel, b"x"),
        ];
        let kind = ws.metadata(&rel).map(|m| m.kind);
        tx.send((results, kind)).unwrap();
    });
    let (results, kind) = rx
        .recv_timeout(Duration::from_secs(5))
        .expect("opening a FIFO blocked");
    for res in results {
        assert!(
            matches!(res, Err(WorkspaceError::NotRegular { .. })),
            "{res:?}"
        );
    }
    assert_eq!(kind.unwrap(), Kind::Other);
}

#[test]
fn a_read_stops_at_the_cap_even_when_the_size_lied() {
    // A procfs file claims 0 bytes and holds more, like a file that grew after fstat: the
    // read itself must stop at cap + 1 bytes and refuse.
    let ws = Workspace::open(std::path::Path::new("/proc/self")).unwrap();
    let rel = ws.resolve("status").unwrap();
    assert_eq!(ws.metadata(&rel).unwrap().len, 0, "the size lies");
    let whole = ws.read(&rel, 1 << 20).unwrap();
    assert!(
        whole.len() > 100,
        "positive control: it holds more than the cap"
    );
    let err = ws.read(&rel, 100).unwrap_err();
    assert!(
        matches!(
            err,
            WorkspaceError::TooLarge {
                size: 101,
                cap: 100,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(matches!(
        ws.open_for_edit(&rel, 100),
        Err(WorkspaceError::TooLarge { .. })
    ));
}

#[test]
fn a_file_over_the_cap_is_refused_by_its_size() {
    let fx = Fixture::new();
    fx.write("big.txt", &"x".repeat(101));
    fx.write("fits.txt", &"x".repeat(100));
    let ws = fx.ws();
    assert_eq!(
        ws.read(&ws.resolve("fits.txt").unwrap(), 100)
            .unwrap()
            .len(),
        100
    );
    let err = ws.read(&ws.resolve("big.txt").unwrap(), 100).unwrap_err();
    assert!(
        matches!(
            err,
            WorkspaceError::TooLarge {
                size: 101,
                cap: 100,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(
        err.to_string()
            .contains("big.txt is 101 bytes, over the 100-byte"),
        "{err}"
    );
}

#[test]
fn an_edit_writes_back_through_the_descriptor_it_read() {
    let fx = Fixture::new();
    fx.write("f.txt", "old old");
    let ws = fx.ws();
    let file = ws
        .open_for_edit(&ws.resolve("f.txt").unwrap(), 100)
        .unwrap();
    assert_eq!(file.contents(), b"old old");
    // Swapping the name for a link after the open changes nothing: the open file is written.
    std::fs::rename(fx.root.join("f.txt"), fx.root.join("moved.txt")).unwrap();
    fx.link(fx.outside.join("secret.txt"), "f.txt");
    file.replace(b"new").unwrap();
    assert_eq!(
        std::fs::read_to_string(fx.root.join("moved.txt")).unwrap(),
        "new"
    );
    fx.assert_outside_untouched();
}
