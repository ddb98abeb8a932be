//! The fallback resolver against `openat2`: the same verdict for every path and operation.

use super::{Resolver, open_beneath, walk_beneath};
use crate::{RelPath, Workspace, WorkspaceError};
use rustix::fd::AsFd;
use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;
use std::os::unix::fs::symlink;
use std::path::Path;

/// A workspace with every kind of trap in it, and a directory outside it.
struct Tree {
    _tmp: tempfile::TempDir,
    root: std::path::PathBuf,
    outside: std::path::PathBuf,
}

fn tree() -> Tree {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("ws");
    let outside = tmp.path().join("outside");
    std::fs::create_dir_all(root.join("dir/sub")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("secret.txt"), "SECRET").unwrap();
    std::fs::write(root.join("file.txt"), "hello").unwrap();
    std::fs::write(root.join("dir/inner.txt"), "inner").unwrap();
    symlink("file.txt", root.join("link_file")).unwrap();
    symlink(outside.join("secret.txt"), root.join("link_out")).unwrap();
    symlink(&outside, root.join("link_dir")).unwrap();
    symlink("..", root.join("dir/up")).unwrap();
    symlink(root.join("nowhere"), root.join("dangling")).unwrap();
    rustix::fs::mknodat(
        rustix::fs::CWD,
        root.join("fifo"),
        rustix::fs::FileType::Fifo,
        Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    Tree {
        _tmp: tmp,
        root,
        outside,
    }
}

const PATHS: &[&str] = &[
    ".",
    "file.txt",
    "dir",
    "dir/inner.txt",
    "dir/sub",
    "link_file",
    "link_out",
    "link_dir",
    "link_dir/secret.txt",
    "dir/up",
    "dir/up/file.txt",
    "dangling",
    "dangling/x",
    "fifo",
    "missing",
    "missing/x",
    "file.txt/x",
];

fn show<T>(res: Result<T, WorkspaceError>, ok: impl Fn(T) -> String) -> String {
    match res {
        Ok(v) => format!("ok {}", ok(v)),
        Err(e) => format!("err {e}"),
    }
}

/// What each read-only operation says about each path.
fn read_verdicts(ws: &Workspace) -> Vec<String> {
    let mut out = Vec::new();
    for given in PATHS {
        let rel = ws.resolve(given).unwrap();
        out.push(format!(
            "{given}: read {}; meta {}; list {}; walk {}",
            show(ws.read(&rel, 100), |b| String::from_utf8_lossy(&b)
                .into_owned()),
            show(ws.metadata(&rel), |m| format!("{m:?}")),
            show(ws.list(&rel), |l| format!("{}", l.len())),
            show(
                ws.walk(&rel, &crate::WalkOptions::default(), |_| {
                    std::ops::ControlFlow::Continue(())
                }),
                |end| format!("{end:?}")
            ),
        ));
    }
    out
}

/// What each writing operation says about each path, and what it left behind.
fn write_verdicts(resolver: Resolver) -> Vec<String> {
    let mut out = Vec::new();
    for given in PATHS {
        let t = tree();
        let ws = Workspace::open(&t.root).unwrap().using(resolver);
        let rel = ws.resolve(given).unwrap();
        let child = ws.resolve(&format!("{given}/new/deeper")).unwrap();
        out.push(format!(
            "{given}: write {}; new {}; edit {}; mkdir {}; outside {:?}",
            show(ws.write(&rel, b"w"), |()| String::new()),
            show(ws.create_new(&rel, b"n"), |()| String::new()),
            show(ws.open_for_edit(&rel, 100), |f| format!(
                "{}",
                f.contents().len()
            )),
            show(ws.create_dir_all(&child), |()| String::new()),
            std::fs::read_dir(&t.outside).unwrap().count(),
        ));
        assert_eq!(
            std::fs::read_to_string(t.outside.join("secret.txt")).unwrap(),
            "SECRET",
            "{given} changed a file outside"
        );
    }
    out
}

fn openat2_present(t: &Tree) -> bool {
    let ws = Workspace::open(&t.root).unwrap();
    if ws.resolver == Resolver::Walk {
        eprintln!("SKIPPED: this kernel has no openat2; only the fallback was tested");
        return false;
    }
    true
}

#[test]
fn both_resolvers_give_the_same_verdicts_on_reads() {
    let t = tree();
    if !openat2_present(&t) {
        return;
    }
    let with = read_verdicts(&Workspace::open(&t.root).unwrap().using(Resolver::Openat2));
    let without = read_verdicts(&Workspace::open(&t.root).unwrap().using(Resolver::Walk));
    assert_eq!(with, without);
    // The verdicts are the right ones, not merely equal.
    let find = |p: &str| {
        with.iter()
            .find(|v| v.starts_with(&format!("{p}: ")))
            .unwrap()
    };
    assert!(
        find("file.txt").contains("read ok hello"),
        "{}",
        find("file.txt")
    );
    assert!(find("dir/inner.txt").contains("read ok inner"));
    for link in ["link_file", "link_out", "dangling"] {
        assert!(
            find(link).contains(&format!(
                "read err {link} goes through the symbolic link {link}"
            )),
            "{}",
            find(link)
        );
        assert!(find(link).contains("kind: Symlink"), "{}", find(link));
    }
    for (path, link) in [
        ("link_dir/secret.txt", "link_dir"),
        ("dir/up/file.txt", "dir/up"),
        ("dangling/x", "dangling"),
    ] {
        assert!(
            find(path).contains(&format!(
                "read err {path} goes through the symbolic link {link}"
            )),
            "{}",
            find(path)
        );
    }
    assert!(!with.iter().any(|v| v.contains("SECRET")), "{with:#?}");
    assert!(
        find("fifo").contains("read err fifo is not a regular file"),
        "{}",
        find("fifo")
    );
    assert!(find("missing/x").contains("read err missing/x does not exist"));
    assert!(
        find("file.txt/x").contains("read err file.txt is not a directory"),
        "{}",
        find("file.txt/x")
    );
    assert!(find("dir").contains("read err dir is a directory"));
    assert!(find("dir").contains("list ok 3"), "{}", find("dir"));
}

#[test]
fn both_resolvers_give_the_same_verdicts_on_writes() {
    if !openat2_present(&tree()) {
        return;
    }
    let with = write_verdicts(Resolver::Openat2);
    let without = write_verdicts(Resolver::Walk);
    assert_eq!(with, without);
    let find = |p: &str| {
        with.iter()
            .find(|v| v.starts_with(&format!("{p}: ")))
            .unwrap()
    };
    let missing = find("missing");
    for part in ["write ok", "new err missing already exists", "edit ok 1"] {
        assert!(missing.contains(part), "{missing}");
    }
    assert!(find("dir/sub").contains("mkdir ok"), "{}", find("dir/sub"));
    for link in ["link_out", "link_dir", "dangling"] {
        assert!(
            find(link).contains(&format!(
                "write err {link} goes through the symbolic link {link}"
            )),
            "{}",
            find(link)
        );
        assert!(
            find(link).contains(&format!("new err {link} already exists")),
            "{}",
            find(link)
        );
        assert!(find(link).contains("mkdir err"), "{}", find(link));
        assert!(find(link).ends_with("outside 1"), "{}", find(link));
    }
}

#[test]
fn the_fallback_refuses_a_link_in_any_component_by_itself() {
    let t = tree();
    let root = rustix::fs::open(&t.root, OFlags::PATH | OFlags::DIRECTORY, Mode::empty()).unwrap();
    let flags = OFlags::RDONLY;
    // The positive control: a plain path opens.
    assert!(
        walk_beneath(
            root.as_fd(),
            Path::new("dir/inner.txt"),
            flags,
            Mode::empty()
        )
        .is_ok()
    );
    for path in [
        "link_dir/secret.txt",
        "link_out",
        "dir/up/file.txt",
        "dangling",
    ] {
        let err = walk_beneath(root.as_fd(), Path::new(path), flags, Mode::empty()).unwrap_err();
        assert!(
            matches!(err, Errno::LOOP | Errno::NOTDIR),
            "{path}: {err:?}"
        );
    }
    let err = walk_beneath(
        root.as_fd(),
        Path::new("../outside/secret.txt"),
        flags,
        Mode::empty(),
    );
    assert_eq!(err.unwrap_err(), Errno::XDEV);
    let err = open_beneath(
        root.as_fd(),
        Path::new("link_out"),
        flags,
        Mode::empty(),
        Resolver::Openat2,
    );
    assert!(err.is_err());
}

#[test]
fn classify_names_the_link_whichever_resolver_failed() {
    let t = tree();
    let ws = Workspace::open(&t.root).unwrap();
    let rel = RelPath::from_plain("link_dir/secret.txt".into());
    for errno in [Errno::LOOP, Errno::NOTDIR] {
        let err = ws.classify(&rel, errno);
        assert!(
            matches!(&err, WorkspaceError::Symlink { link, .. } if link == "link_dir"),
            "{err:?}"
        );
    }
}
