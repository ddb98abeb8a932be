//! Files the agent controls, and reef's own code that reads or writes them: `MEMORY.md`,
//! saved tool outputs, the file tools, the `shell` start directory, masks, and the workspace
//! files the host acts on (`.git`).

use super::{confined_home, run_ok};
use crate::reef;
use reef_test_support::MockReply;
use serde_json::json;
use std::os::unix::fs::symlink;

const SECRET: &str = "host-secret-5b7e";

#[test]
fn a_memory_md_link_to_a_host_file_never_reaches_the_model() {
    let (mock, home) = confined_home(vec![MockReply::text("one"), MockReply::text("two")]);
    let secret = home.path().join("secret.txt");
    std::fs::write(&secret, SECRET).unwrap();
    symlink(&secret, home.workspace().join("MEMORY.md")).unwrap();
    run_ok(&home, "hello");
    let system = mock.requests()[0].system_text();
    assert!(
        !system.contains(SECRET),
        "the linked file reached the model: {system}"
    );
    assert!(system.contains("MEMORY.md"), "{system}");

    // Positive control: a regular MEMORY.md is put in the prompt.
    std::fs::remove_file(home.workspace().join("MEMORY.md")).unwrap();
    std::fs::write(home.workspace().join("MEMORY.md"), "regular note 41\n").unwrap();
    run_ok(&home, "hello again");
    let system = mock.requests()[1].system_text();
    assert!(system.contains("regular note 41"), "{system}");
}

#[test]
fn a_large_output_is_never_written_through_a_planted_link() {
    let outside = tempfile::tempdir().unwrap();
    let (mock, home) = confined_home(vec![
        MockReply::tool_call(
            "shell",
            json!({"command": format!("ln -s '{}' .reef && echo linked", outside.path().display())}),
        ),
        MockReply::tool_call("shell", json!({"command": "seq 1 3000"})),
        MockReply::text("done"),
    ]);
    reef(&home)
        .env("MOCK_API_KEY", "k")
        .args(["-c", "agent.inline_output_chars=200", "run", "count"])
        .assert()
        .success();
    let entries: Vec<_> = std::fs::read_dir(outside.path()).unwrap().collect();
    assert!(
        entries.is_empty(),
        "reef wrote outside the workspace: {entries:?}"
    );
    let results = mock.requests()[2].tool_results();
    assert!(results[0].contains("linked"), "{}", results[0]);
    // The model still gets a bounded output, and is told why it was not saved.
    assert!(
        results[1].contains("saving the full output failed") && results[1].len() < 2000,
        "{}",
        results[1]
    );
}

#[test]
fn a_large_output_is_saved_in_the_workspace_for_read_file() {
    // Positive control of the case above: without a planted link the output is saved, and the
    // model is given a workspace path that read_file can open.
    let (mock, home) = confined_home(vec![
        MockReply::tool_call("shell", json!({"command": "seq 1 3000"})),
        MockReply::text("done"),
    ]);
    reef(&home)
        .env("MOCK_API_KEY", "k")
        .args(["-c", "agent.inline_output_chars=200", "run", "count"])
        .assert()
        .success();
    let result = &mock.requests()[1].tool_results()[0];
    let path = result
        .split_whitespace()
        .find(|w| w.starts_with(".reef/tool-outputs/"))
        .unwrap_or_else(|| panic!("no saved path in {result}"));
    let saved = std::fs::read_to_string(home.workspace().join(path)).unwrap();
    assert!(saved.contains("\n2999\n3000"), "{saved}");
}

#[test]
fn file_tools_refuse_links_out_and_hidden_paths_in_a_home_workspace() {
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("target.txt");
    std::fs::write(&target, SECRET).unwrap();
    let (mock, home) = confined_home(vec![
        MockReply::tool_call("read_file", json!({"path": ".ssh/id_rsa"})),
        MockReply::tool_call("list_dir", json!({"path": ".ssh"})),
        MockReply::tool_call("read_file", json!({"path": ".reef/reef.toml"})),
        MockReply::tool_call("read_file", json!({"path": "link.txt"})),
        MockReply::tool_call(
            "write_file",
            json!({"path": "link.txt", "content": "pwned"}),
        ),
        MockReply::tool_call("read_file", json!({"path": "notes.txt"})),
        MockReply::text("done"),
    ]);
    std::fs::create_dir_all(home.path().join(".ssh")).unwrap();
    std::fs::write(home.path().join(".ssh/id_rsa"), SECRET).unwrap();
    std::fs::write(home.path().join("notes.txt"), "plain notes\n").unwrap();
    symlink(&target, home.path().join("link.txt")).unwrap();
    // The workspace is the user's home (the current directory of `reef run`).
    reef(&home)
        .current_dir(home.path())
        .env("MOCK_API_KEY", "k")
        .args(["run", "look around"])
        .assert()
        .success();
    let results = mock.requests()[6].tool_results();
    for (i, what) in [(0, ".ssh/id_rsa"), (1, ".ssh"), (2, ".reef/reef.toml")] {
        assert!(
            results[i].contains("denied") && results[i].contains("hidden"),
            "{what}: {}",
            results[i]
        );
    }
    for i in [3, 4] {
        assert!(
            results[i].contains("denied") && results[i].contains("symbolic link"),
            "{}",
            results[i]
        );
    }
    assert!(results.iter().all(|r| !r.contains(SECRET)), "{results:?}");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), SECRET);
    // Positive control: an ordinary file of the same workspace.
    // read_file's text reaches the model fenced as a file's.
    assert!(
        results[5].starts_with("<untrusted source=\"file read_file ")
            && results[5].contains(">\nplain notes\n\n</untrusted"),
        "{}",
        results[5]
    );
}

#[test]
fn masks_follow_links_in_reef_sandbox_run() {
    let home = reef_test_support::TestHome::new();
    let dotfiles = home.path().join("dotfiles/aws");
    std::fs::create_dir_all(&dotfiles).unwrap();
    std::fs::write(dotfiles.join("credentials"), SECRET).unwrap();
    std::fs::write(home.path().join("dotfiles/vimrc"), "set nu\n").unwrap();
    symlink("dotfiles/aws", home.path().join(".aws")).unwrap();
    std::fs::write(home.reef_home().join("reef.toml"), "# config\n").unwrap();
    for file in [
        ".aws/credentials",
        "dotfiles/aws/credentials",
        ".reef/reef.toml",
    ] {
        // Observed: "cat: .aws/credentials: Permission denied".
        let out = reef(&home)
            .current_dir(home.path())
            .args(["sandbox", "run", "--", "cat", file])
            .assert()
            .failure();
        let o = out.get_output();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(
            stderr.contains("Permission denied") || stderr.contains("No such file"),
            "{file}: {stderr}"
        );
        assert!(!String::from_utf8_lossy(&o.stdout).contains(SECRET));
    }
    // Positive control: the rest of the same directory.
    reef(&home)
        .current_dir(home.path())
        .args(["sandbox", "run", "--", "cat", "dotfiles/vimrc"])
        .assert()
        .success()
        .stdout("set nu\n");
}

#[test]
fn a_shell_start_directory_through_a_link_is_refused() {
    let outside = tempfile::tempdir().unwrap();
    let (mock, home) = confined_home(vec![
        MockReply::tool_call(
            "shell",
            json!({"command": "touch here && pwd", "cwd": "sub"}),
        ),
        MockReply::tool_call(
            "shell",
            json!({"command": "touch here && pwd", "cwd": "real"}),
        ),
        MockReply::text("done"),
    ]);
    symlink(outside.path(), home.workspace().join("sub")).unwrap();
    std::fs::create_dir(home.workspace().join("real")).unwrap();
    run_ok(&home, "go");
    let results = mock.requests()[2].tool_results();
    assert!(
        results[0].contains("denied") && results[0].contains("symbolic link"),
        "{}",
        results[0]
    );
    assert!(
        !outside.path().join("here").exists(),
        "ran in the outside directory"
    );
    // Positive control: a real subdirectory.
    assert!(results[1].starts_with("exit_code: 0"), "{}", results[1]);
    assert!(home.workspace().join("real/here").exists());
}

#[test]
fn git_hooks_and_config_stay_as_the_user_left_them() {
    let (mock, home) = confined_home(vec![
        MockReply::tool_call(
            "shell",
            json!({"command": "echo evil > .git/hooks/pre-commit"}),
        ),
        MockReply::tool_call(
            "shell",
            json!({"command": "echo '[core] fsmonitor = evil' >> .git/config"}),
        ),
        MockReply::tool_call(
            "write_file",
            json!({"path": ".git/hooks/post-checkout", "content": "#!/bin/sh\nevil\n"}),
        ),
        MockReply::tool_call(
            "edit_file",
            json!({"path": ".git/config", "old_string": "[core]", "new_string": "[core]\nhooksPath = /tmp"}),
        ),
        MockReply::tool_call("write_file", json!({"path": "src.txt", "content": "code"})),
        MockReply::text("done"),
    ]);
    let git = home.workspace().join(".git");
    std::fs::create_dir_all(git.join("hooks")).unwrap();
    std::fs::write(git.join("config"), "[core]\n\tbare = false\n").unwrap();
    run_ok(&home, "change things");
    let results = mock.requests()[5].tool_results();
    for (i, r) in results[..4].iter().enumerate() {
        assert!(
            r.contains("Read-only file system") || r.contains("denied"),
            "attempt {i}: {r}"
        );
    }
    assert_eq!(std::fs::read_dir(git.join("hooks")).unwrap().count(), 0);
    assert_eq!(
        std::fs::read_to_string(git.join("config")).unwrap(),
        "[core]\n\tbare = false\n"
    );
    // Positive control: the rest of the workspace is the agent's.
    assert!(results[4].starts_with("wrote"), "{}", results[4]);
    assert_eq!(
        std::fs::read_to_string(home.workspace().join("src.txt")).unwrap(),
        "code"
    );
}

#[test]
fn calls_racing_a_link_never_run_outside_the_workspace() {
    // One round of concurrent calls: one keeps swapping `sub` between a directory and a link to
    // the outside while the others start in `sub`. Each is checked for links when it starts,
    // then mounted at the workspace and entered inside the sandbox, so a swap in between can
    // only make it fail.
    let outside = tempfile::tempdir().unwrap();
    let swapper = format!(
        "i=0; while [ $i -lt 300 ]; do rm -rf sub; ln -s '{}' sub; rm -f sub; mkdir sub; \
         i=$((i+1)); done; echo swapped",
        outside.path().display()
    );
    let mut calls = vec![("shell".to_owned(), json!({"command": swapper}))];
    for i in 0..12 {
        calls.push((
            "shell".to_owned(),
            json!({"command": format!("touch raced-{i} && pwd -P"), "cwd": "sub"}),
        ));
    }
    let (mock, home) = confined_home(vec![MockReply::ToolCalls(calls), MockReply::text("done")]);
    std::fs::create_dir(home.workspace().join("sub")).unwrap();
    run_ok(&home, "race");
    let results = mock.requests()[1].tool_results();
    assert_eq!(results.len(), 13, "{results:?}");
    assert!(results[0].contains("swapped"), "{}", results[0]);
    let escaped: Vec<_> = std::fs::read_dir(outside.path()).unwrap().collect();
    assert!(
        escaped.is_empty(),
        "a call ran in the outside directory: {escaped:?} {results:?}"
    );
    let workspace = home.workspace().canonicalize().unwrap();
    for r in &results[1..] {
        assert!(
            !r.contains(&outside.path().display().to_string())
                || r.contains("symbolic link")
                || r.contains("not a directory"),
            "{r}"
        );
        if r.starts_with("exit_code: 0") {
            assert!(
                r.contains(&workspace.join("sub").display().to_string()),
                "{r}"
            );
        }
    }
}
