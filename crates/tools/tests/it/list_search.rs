//! `list_dir` and `search_files`.

use crate::support::{env, failed, invalid};
use serde_json::json;

#[tokio::test]
async fn list_dir_flat_shows_dirs_and_sizes_sorted() {
    let env = env();
    env.write("b.txt", "12345");
    env.write("a/inner.txt", "x");
    env.write(".hidden", "");
    let out = env.ok("list_dir", json!({})).await;
    assert_eq!(out, ".hidden (0 bytes)\na/\nb.txt (5 bytes)\n");
}

#[tokio::test]
async fn list_dir_recursive_respects_gitignore() {
    let env = env();
    env.write(".gitignore", "target/\n*.log\n");
    env.write("src/main.rs", "fn main() {}");
    env.write("target/debug/out", "bin");
    env.write("app.log", "log");
    env.write(".git/HEAD", "ref");
    let out = env.ok("list_dir", json!({"recursive": true})).await;
    assert_eq!(
        out, ".gitignore (14 bytes)\nsrc/\nsrc/main.rs (12 bytes)\n",
        "{out}"
    );
}

#[tokio::test]
async fn list_dir_caps_entries() {
    let env = env();
    for i in 0..5 {
        env.write(&format!("f{i}"), "");
    }
    let out = env.ok("list_dir", json!({"max_entries": 2})).await;
    assert!(out.starts_with("f0 (0 bytes)\nf1 (0 bytes)\n"), "{out}");
    assert!(out.contains("3 more entries"), "{out}");
    let out = env
        .ok("list_dir", json!({"max_entries": 2, "recursive": true}))
        .await;
    assert!(out.contains("listing stopped after 2 entries"), "{out}");
}

#[tokio::test]
async fn list_dir_of_a_file_fails() {
    let env = env();
    env.write("f.txt", "");
    let msg = failed(env.call("list_dir", json!({"path": "f.txt"})).await);
    assert!(msg.contains("not a directory"), "{msg}");
}

#[tokio::test]
async fn search_finds_lines_with_paths_and_numbers() {
    let env = env();
    env.write(
        "src/lib.rs",
        "pub fn alpha() {}\nfn beta() {}\npub fn gamma() {}\n",
    );
    env.write("README.md", "alpha docs\n");
    let out = env
        .ok("search_files", json!({"pattern": "pub fn \\w+"}))
        .await;
    assert_eq!(
        out,
        "src/lib.rs:1: pub fn alpha() {}\nsrc/lib.rs:3: pub fn gamma() {}\n"
    );
}

#[tokio::test]
async fn search_respects_gitignore_and_skips_hidden() {
    let env = env();
    env.write(".gitignore", "ignored/\n");
    env.write("kept.txt", "needle\n");
    env.write("ignored/file.txt", "needle\n");
    env.write(".hidden/file.txt", "needle\n");
    env.write(".ignore", "also.txt\n");
    env.write("also.txt", "needle\n");
    let out = env.ok("search_files", json!({"pattern": "needle"})).await;
    assert_eq!(out, "kept.txt:1: needle\n");
}

#[tokio::test]
async fn search_glob_path_case_and_limit() {
    let env = env();
    env.write("a.rs", "Needle\n");
    env.write("b.txt", "needle\n");
    env.write("sub/c.rs", "needle\nneedle\nneedle\n");
    let out = env
        .ok("search_files", json!({"pattern": "needle", "glob": "*.rs"}))
        .await;
    assert_eq!(
        out,
        "sub/c.rs:1: needle\nsub/c.rs:2: needle\nsub/c.rs:3: needle\n"
    );
    let out = env
        .ok(
            "search_files",
            json!({"pattern": "needle", "glob": "*.rs", "case_insensitive": true, "max_results": 2}),
        )
        .await;
    assert!(
        out.starts_with("a.rs:1: Needle\nsub/c.rs:1: needle\n"),
        "{out}"
    );
    assert!(out.contains("stopped after 2 results"), "{out}");
    let out = env
        .ok("search_files", json!({"pattern": "needle", "path": "sub"}))
        .await;
    assert!(out.starts_with("sub/c.rs:1: needle\n"), "{out}");
    let out = env.ok("search_files", json!({"pattern": "absent"})).await;
    assert!(out.starts_with("no matches"), "{out}");
}

#[tokio::test]
async fn search_invalid_regex_names_the_pattern() {
    let env = env();
    let msg = invalid(
        env.call("search_files", json!({"pattern": "fn (unclosed"}))
            .await,
    );
    assert!(msg.contains("\"fn (unclosed\""), "{msg}");
}
