//! Recursive walks: links are listed, never entered; ignore files from the root down apply.

use crate::support::{Fixture, SECRET};
use reef_workspace::{Kind, RelPath, WalkEnd, WalkOptions, Workspace};
use std::ops::ControlFlow;

fn walk(ws: &Workspace, base: &str, options: &WalkOptions) -> (Vec<String>, WalkEnd) {
    let mut seen = Vec::new();
    let end = ws
        .walk(&ws.resolve(base).unwrap(), options, |e| {
            let mark = match e.kind {
                Kind::Dir => "/",
                Kind::Symlink => "@",
                _ => "",
            };
            seen.push(format!("{}{mark}", e.path.display()));
            ControlFlow::Continue(())
        })
        .unwrap();
    (seen, end)
}

#[test]
fn the_walk_does_not_descend_into_a_symlinked_directory() {
    let fx = Fixture::new();
    std::fs::create_dir(fx.outside.join("deep")).unwrap();
    std::fs::write(fx.outside.join("deep/more.txt"), SECRET).unwrap();
    fx.write("src/a.txt", "a");
    fx.link(&fx.outside, "src/escape");
    fx.link(fx.outside.join("secret.txt"), "token");
    let ws = fx.ws();
    let (seen, end) = walk(&ws, ".", &WalkOptions::default());
    assert_eq!(end, WalkEnd::Complete);
    assert_eq!(seen, ["src/", "src/a.txt", "src/escape@", "token@"]);
    // Positive control: through the link there is something to find.
    assert!(fx.root.join("src/escape/deep/more.txt").exists());
}

#[test]
fn nested_ignore_files_apply_deepest_first_with_whitelists() {
    let fx = Fixture::new();
    fx.write(".gitignore", "*.log\nbuild/\n*.tmp\n");
    fx.write(".ignore", "!keep.tmp\n");
    fx.write("keep.tmp", "");
    fx.write("drop.tmp", "");
    fx.write("top.log", "");
    fx.write("build/out.bin", "");
    fx.write("src/main.rs", "");
    fx.write("src/.gitignore", "!wanted.log\ngenerated/\n");
    fx.write("src/wanted.log", "");
    fx.write("src/other.log", "");
    fx.write("src/generated/x.rs", "");
    fx.write("src/deep/.gitignore", "*.log\n");
    fx.write("src/deep/wanted.log", "");
    fx.write(".git/HEAD", "ref");
    fx.write(".hidden/file", "");
    let ws = fx.ws();

    let options = WalkOptions {
        skip_git: true,
        ..WalkOptions::default()
    };
    let (seen, _) = walk(&ws, ".", &options);
    assert_eq!(
        seen,
        [
            ".gitignore",
            ".hidden/",
            ".hidden/file",
            ".ignore",
            "keep.tmp",
            "src/",
            "src/.gitignore",
            "src/deep/",
            "src/deep/.gitignore",
            "src/main.rs",
            "src/wanted.log",
        ]
    );

    // From a subdirectory, the rules of the directories above it still apply.
    let (seen, _) = walk(&ws, "src", &WalkOptions::default());
    assert_eq!(
        seen,
        [
            "src/.gitignore",
            "src/deep/",
            "src/deep/.gitignore",
            "src/main.rs",
            "src/wanted.log",
        ]
    );

    // Hidden names, .git, big files and a limit.
    let options = WalkOptions {
        skip_hidden: true,
        skip_git: true,
        max_file_size: Some(0),
        limit: Some(2),
    };
    fx.write("src/big.rs", "not empty");
    let (seen, end) = walk(&ws, "src", &options);
    assert_eq!(seen, ["src/deep/", "src/main.rs"]);
    assert_eq!(end, WalkEnd::Limited);
}

#[test]
fn an_ignore_file_that_is_a_link_is_not_read() {
    let fx = Fixture::new();
    std::fs::write(fx.outside.join("rules"), "*.txt\n").unwrap();
    fx.link(fx.outside.join("rules"), ".gitignore");
    fx.write("a.txt", "");
    let ws = fx.ws();
    let (seen, _) = walk(&ws, ".", &WalkOptions::default());
    assert_eq!(seen, [".gitignore@", "a.txt"]);
    // Positive control: the same rules in a regular file do apply.
    std::fs::remove_file(fx.root.join(".gitignore")).unwrap();
    fx.write(".gitignore", "*.txt\n");
    let (seen, _) = walk(&ws, ".", &WalkOptions::default());
    assert_eq!(seen, [".gitignore"]);
}

#[test]
fn a_visitor_can_stop_the_walk_and_a_file_base_is_visited_alone() {
    let fx = Fixture::new();
    fx.write("a/1", "");
    fx.write("a/2", "");
    let ws = fx.ws();
    let mut count = 0;
    let end = ws
        .walk(&RelPath::root(), &WalkOptions::default(), |_| {
            count += 1;
            if count == 2 {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        })
        .unwrap();
    assert_eq!((end, count), (WalkEnd::Stopped, 2));
    let (seen, end) = walk(&ws, "a/2", &WalkOptions::default());
    assert_eq!((seen, end), (vec!["a/2".to_owned()], WalkEnd::Complete));
}
