//! The agent task suite of `reef bench agent`: its file format (the built-in
//! `data/agent-suite.toml`, or a user's), laying out a task's workspace, and checking what the
//! agent did against the task's expectations.

use crate::exit::Exit;
use reef_workspace::{Kind, Workspace, WorkspaceError};
use serde::Deserialize;
use std::collections::{BTreeMap, HashSet};
use std::path::{Component, Path};

/// The suite shipped with reef.
pub const BUILTIN: &str = include_str!("../../data/agent-suite.toml");

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SuiteFile {
    task: Vec<Task>,
}

/// One task: a prompt, the files it starts with, and how its result is checked.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Task {
    pub name: String,
    pub prompt: String,
    #[serde(default)]
    pub files: BTreeMap<String, String>,
    /// Words or numbers the final answer must contain (case-insensitive, whole words).
    #[serde(default)]
    pub answer: Vec<String>,
    /// Files that must hold exactly this (trailing whitespace ignored).
    #[serde(default)]
    pub expect: BTreeMap<String, String>,
    #[serde(default)]
    pub expect_contains: BTreeMap<String, String>,
    /// Files that must hold JSON equal to this.
    #[serde(default)]
    pub expect_json: BTreeMap<String, String>,
    #[serde(default)]
    pub dirs: Vec<String>,
    #[serde(default)]
    pub absent: Vec<String>,
}

/// Parses and checks a suite; errors name the file, the task and the field.
pub fn parse(text: &str, origin: &str) -> anyhow::Result<Vec<Task>> {
    let suite: SuiteFile = toml::from_str(text)
        .map_err(|e| Exit::usage(format!("{origin}: not a task suite: {e}")))?;
    if suite.task.is_empty() {
        return Err(Exit::usage(format!("{origin}: the suite has no [[task]]")));
    }
    let mut names = HashSet::new();
    for task in &suite.task {
        let bad = |field: &str, why: String| {
            Exit::usage(format!("{origin}: task `{}`: {field}: {why}", task.name))
        };
        if task.name.trim().is_empty() {
            return Err(Exit::usage(format!("{origin}: a task has an empty name")));
        }
        if !names.insert(task.name.clone()) {
            return Err(bad("name", "used by two tasks".into()));
        }
        if task.prompt.trim().is_empty() {
            return Err(bad("prompt", "is empty".into()));
        }
        let checks = task.answer.len()
            + task.expect.len()
            + task.expect_contains.len()
            + task.expect_json.len()
            + task.dirs.len()
            + task.absent.len();
        if checks == 0 {
            return Err(bad(
                "answer",
                "the task checks nothing (give answer, expect, expect_contains, expect_json, \
                 dirs or absent)"
                    .into(),
            ));
        }
        if let Some(word) = task.answer.iter().find(|w| w.trim().is_empty()) {
            return Err(bad("answer", format!("{word:?} is empty")));
        }
        for (field, paths) in [
            ("files", task.files.keys().collect::<Vec<_>>()),
            ("expect", task.expect.keys().collect()),
            ("expect_contains", task.expect_contains.keys().collect()),
            ("expect_json", task.expect_json.keys().collect()),
            ("dirs", task.dirs.iter().collect()),
            ("absent", task.absent.iter().collect()),
        ] {
            for path in paths {
                check_path(path).map_err(|why| bad(field, why))?;
            }
        }
        for (path, json) in &task.expect_json {
            serde_json::from_str::<serde_json::Value>(json)
                .map_err(|e| bad("expect_json", format!("{path}: not JSON: {e}")))?;
        }
    }
    Ok(suite.task)
}

/// A path inside the workspace: relative, without `..`.
fn check_path(path: &str) -> Result<(), String> {
    let p = Path::new(path);
    if path.is_empty() || !p.components().all(|c| matches!(c, Component::Normal(_))) {
        return Err(format!(
            "`{path}` must be a relative path inside the workspace, without `..`"
        ));
    }
    Ok(())
}

/// Writes the task's files into the (empty) workspace.
pub fn lay_out(task: &Task, workspace: &Path) -> std::io::Result<()> {
    for (path, content) in &task.files {
        let file = workspace.join(path);
        if let Some(parent) = file.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(file, content)?;
    }
    Ok(())
}

/// What is wrong with the result, one line per failed check; empty when it passed.
pub fn check(task: &Task, workspace: &Path, answer: &str) -> Vec<String> {
    let mut failed = Vec::new();
    for word in &task.answer {
        if !has_word(answer, word) {
            failed.push(format!("the answer does not say `{word}`"));
        }
    }
    // The agent had the workspace: what it left is looked at without following a link.
    let ws = match Workspace::open(workspace) {
        Ok(ws) => ws,
        Err(err) => return vec![format!("the workspace cannot be opened: {err}")],
    };
    let read = |path: &str| {
        ws.resolve(path)
            .and_then(|rel| ws.read(&rel, CHECK_CAP))
            .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
    };
    let unreadable = |path: &str, err: WorkspaceError| match err {
        WorkspaceError::NotFound { .. } => format!("{path} is missing"),
        other => format!("{path} cannot be read: {other}"),
    };
    for (path, want) in &task.expect {
        match read(path) {
            Ok(got) if got.trim_end() == want.trim_end() => {}
            Ok(got) => failed.push(format!("{path} holds {:?}, not {want:?}", clip(&got))),
            Err(err) => failed.push(unreadable(path, err)),
        }
    }
    for (path, want) in &task.expect_contains {
        match read(path) {
            Ok(got) if got.contains(want.as_str()) => {}
            Ok(_) => failed.push(format!("{path} does not contain {want:?}")),
            Err(err) => failed.push(unreadable(path, err)),
        }
    }
    for (path, want) in &task.expect_json {
        let want: serde_json::Value = serde_json::from_str(want).unwrap_or_default();
        match read(path).map(|t| serde_json::from_str::<serde_json::Value>(&t)) {
            Ok(Ok(got)) if got == want => {}
            Ok(Ok(got)) => failed.push(format!("{path} holds {got}, not {want}")),
            Ok(Err(_)) => failed.push(format!("{path} is not JSON")),
            Err(err) => failed.push(unreadable(path, err)),
        }
    }
    let metadata = |path: &str| ws.resolve(path).and_then(|rel| ws.metadata(&rel));
    for dir in &task.dirs {
        if !metadata(dir).is_ok_and(|m| m.kind == Kind::Dir) {
            failed.push(format!("directory {dir} is missing"));
        }
    }
    for path in &task.absent {
        if !matches!(metadata(path), Err(WorkspaceError::NotFound { .. })) {
            failed.push(format!("{path} still exists"));
        }
    }
    failed
}

/// The most of a file a check reads.
const CHECK_CAP: u64 = 1 << 20;

/// Whether `text` contains `word` (case-insensitive) with no letter or digit on either side.
fn has_word(text: &str, word: &str) -> bool {
    let text = text.to_lowercase();
    let word = word.to_lowercase();
    let mut from = 0;
    while let Some(at) = text[from..].find(&word) {
        let start = from + at;
        let end = start + word.len();
        let before = text[..start].chars().next_back();
        let after = text[end..].chars().next();
        let edge = |c: Option<char>| c.is_none_or(|c| !c.is_alphanumeric());
        if edge(before) && edge(after) {
            return true;
        }
        from = start + word.chars().next().map_or(1, char::len_utf8);
    }
    false
}

fn clip(text: &str) -> String {
    let mut out: String = text.chars().take(80).collect();
    if out.len() < text.len() {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_builtin_suite_parses_and_has_at_least_thirty_tasks() {
        let tasks = parse(BUILTIN, "built-in suite").unwrap();
        assert!(tasks.len() >= 30, "{}", tasks.len());
    }

    #[test]
    fn answers_match_whole_words_only() {
        assert!(has_word("data.csv has 13 lines.", "13"));
        assert!(has_word("It is in C.TXT", "c.txt"));
        assert!(!has_word("113 lines", "13"));
        assert!(!has_word("134", "13"));
        assert!(!has_word("know", "no"));
        assert!(has_word("No, it does not.", "no"));
        assert!(has_word("3\n", "3"));
    }

    #[test]
    fn bad_suites_name_the_task_and_field() {
        let cases = [
            (
                "[[task]]\nname = \"a\"\nprompt = \"p\"\n",
                "task `a`: answer",
            ),
            (
                "[[task]]\nname = \"a\"\nprompt = \"p\"\nabsent = [\"../x\"]\n",
                "task `a`: absent: `../x`",
            ),
            (
                "[[task]]\nname = \"a\"\nprompt = \"p\"\nfiles = { \"/etc/x\" = \"\" }\nanswer = [\"1\"]\n",
                "task `a`: files: `/etc/x`",
            ),
            (
                "[[task]]\nname = \"a\"\nprompt = \"p\"\nanswer = [\"1\"]\n[[task]]\nname = \"a\"\nprompt = \"q\"\nanswer = [\"2\"]\n",
                "task `a`: name: used by two tasks",
            ),
            (
                "[[task]]\nname = \"a\"\nprompt = \"p\"\nanwser = [\"1\"]\n",
                "unknown field",
            ),
        ];
        for (text, want) in cases {
            let err = parse(text, "s.toml").unwrap_err().to_string();
            assert!(err.contains(want), "{err}");
        }
    }

    #[test]
    fn checks_report_every_difference() {
        let tasks = parse(
            "[[task]]\nname = \"t\"\nprompt = \"p\"\nanswer = [\"7\"]\n\
             expect = { \"a.txt\" = \"x\" }\nexpect_json = { \"j.json\" = '{\"k\": 1}' }\n\
             dirs = [\"d\"]\nabsent = [\"gone\"]\n",
            "s",
        )
        .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path();
        assert_eq!(check(&tasks[0], ws, "six").len(), 4);
        std::fs::write(ws.join("a.txt"), "x\n").unwrap();
        std::fs::write(ws.join("j.json"), "{ \"k\" : 1 }").unwrap();
        std::fs::create_dir(ws.join("d")).unwrap();
        std::fs::write(ws.join("gone"), "").unwrap();
        assert_eq!(check(&tasks[0], ws, "it is 7"), vec!["gone still exists"]);
        std::fs::remove_file(ws.join("gone")).unwrap();
        assert!(check(&tasks[0], ws, "it is 7").is_empty());
    }

    #[test]
    fn checks_do_not_follow_links_the_agent_left() {
        let tasks = parse(
            "[[task]]\nname = \"t\"\nprompt = \"p\"\nexpect = { \"a.txt\" = \"secret\" }\n\
             dirs = [\"d\"]\n",
            "s",
        )
        .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("key"), "secret").unwrap();
        let ws = dir.path();
        std::os::unix::fs::symlink(outside.path().join("key"), ws.join("a.txt")).unwrap();
        std::os::unix::fs::symlink(outside.path(), ws.join("d")).unwrap();
        // Positive control: through the links, both checks would pass.
        assert_eq!(std::fs::read_to_string(ws.join("a.txt")).unwrap(), "secret");
        assert!(ws.join("d").is_dir());
        let failed = check(&tasks[0], ws, "");
        assert_eq!(failed.len(), 2, "{failed:?}");
        assert!(failed[0].starts_with("a.txt cannot be read"), "{failed:?}");
        assert!(
            !failed[0].contains("holds"),
            "the link's target is not quoted"
        );
        assert_eq!(failed[1], "directory d is missing");
    }

    #[test]
    fn the_held_out_suite_parses() {
        let text = include_str!("../../data/agent-suite-heldout.toml");
        let tasks = parse(text, "held-out suite").unwrap();
        assert_eq!(tasks.len(), 20);
        let builtin: HashSet<String> = parse(BUILTIN, "built-in suite")
            .unwrap()
            .into_iter()
            .map(|t| t.prompt)
            .collect();
        assert!(tasks.iter().all(|t| !builtin.contains(&t.prompt)));
    }
}
