//! Command rules: dangerous commands need approval wherever they hide in a line, and allow
//! rules cover one simple command, never a whole line.

use reef_security::{CommandDecision, CommandRules};

fn needs(rules: &CommandRules, line: &str) -> Option<String> {
    match rules.decide(line) {
        CommandDecision::Allow => None,
        CommandDecision::NeedsApproval { pattern, .. } => Some(pattern),
    }
}

#[test]
fn dangerous_commands_are_found_in_every_spelling() {
    let rules = CommandRules::defaults();
    for (line, pattern) in [
        ("rm -rf build", "rm -rf"),
        ("rm -fr build", "rm -rf"),
        ("rm -r -f build", "rm -rf"),
        ("rm --recursive --force build", "rm -rf"),
        ("/bin/rm -Rf /", "rm -rf"),
        ("sudo rm -rf /", "rm -rf"),
        ("sudo -u root rm -rf /", "rm -rf"),
        ("env X=1 rm -rf x", "rm -rf"),
        ("FOO=bar rm -rf x", "rm -rf"),
        ("echo ok; rm -rf x", "rm -rf"),
        ("true && rm -rf x", "rm -rf"),
        ("ls | xargs echo; echo $(rm -rf x)", "rm -rf"),
        ("echo `rm -rf x`", "rm -rf"),
        ("(cd x && git reset --hard HEAD~1)", "git reset --hard"),
        ("git push --force origin main", "git push --force"),
        ("mkfs.ext4 /dev/sda1", "mkfs"),
        ("dd if=/dev/zero of=/dev/sda", "dd"),
    ] {
        assert_eq!(needs(&rules, line).as_deref(), Some(pattern), "{line}");
    }
    for line in [
        "rm file.txt",
        "rm -r build",
        "echo 'rm -rf /'",
        "git reset --soft HEAD~1",
        "git status",
        "grep -rf patterns.txt src",
        "ls -la",
        "",
    ] {
        assert_eq!(needs(&rules, line), None, "{line}");
    }
}

#[test]
fn allow_rules_cover_single_commands_not_whole_lines() {
    let rules = CommandRules::new(
        &["rm -rf", "git reset --hard"],
        &["shell(git *)", "rm -rf target"],
    )
    .unwrap();
    assert_eq!(needs(&rules, "git reset --hard"), None);
    assert_eq!(needs(&rules, "rm -rf target"), None);
    // The allowed command does not launder the one after it.
    assert_eq!(
        rules.decide("git status; rm -rf /"),
        CommandDecision::NeedsApproval {
            pattern: "rm -rf".into(),
            command: "rm -rf /".into()
        }
    );
    assert_eq!(
        needs(&rules, "rm -rf target/../..").as_deref(),
        Some("rm -rf")
    );
    assert!(CommandRules::new(&[""], &[]).is_err());
    assert!(CommandRules::new(&["rm -rf"], &["shell()"]).is_err());
}
