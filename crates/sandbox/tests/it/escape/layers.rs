//! Escape suite, 9. The request's own layers: a workspace inside a hidden directory, hidden
//! paths reached through links, the start directory, protected workspace files, the kernel's
//! knobs in /proc, the terminal, and a kernel without Landlock.

use super::*;
use std::os::unix::fs::symlink;

/// `$REEF_HOME` with two agents' workspaces and an API token, as the daemon lays it out.
struct ReefHome {
    _root: TempDir,
    home: PathBuf,
    mine: PathBuf,
    other: PathBuf,
}

impl ReefHome {
    fn new() -> Self {
        let root = tempfile::tempdir().unwrap();
        let home = root.path().join(".reef");
        let mine = home.join("agents/alice/workspace");
        let other = home.join("agents/bob/workspace");
        std::fs::create_dir_all(&mine).unwrap();
        std::fs::create_dir_all(&other).unwrap();
        std::fs::write(home.join("api-token"), "reef-token-3e1f\n").unwrap();
        std::fs::write(other.join("diary.txt"), "bob's secret diary\n").unwrap();
        Self {
            _root: root,
            home,
            mine,
            other,
        }
    }

    fn policy(&self) -> SandboxPolicy {
        SandboxPolicy {
            hidden: vec![self.home.clone()],
            ..confined_policy()
        }
    }

    fn req(&self, command: &str) -> ExecRequest {
        let mut req = sh(command, &self.mine);
        req.env
            .push(("REEF_DIR".into(), self.home.to_str().unwrap().to_owned()));
        req.env
            .push(("OTHER".into(), self.other.to_str().unwrap().to_owned()));
        req
    }
}

#[tokio::test]
async fn a_workspace_inside_the_hidden_reef_home_works_and_shows_nothing_else() {
    let home = ReefHome::new();
    // Positive control: the agent's own workspace is there, writable and readable.
    let out = run_with(
        home.policy(),
        home.req("echo kept > note.txt && cat note.txt && pwd"),
    )
    .await;
    assert_succeeds(&out, "write and read back in a workspace inside $REEF_HOME");
    assert_eq!(out.stdout.lines().next(), Some("kept"));
    assert_eq!(
        std::fs::read_to_string(home.mine.join("note.txt")).unwrap(),
        "kept\n"
    );

    // Observed: "cat: …/.reef/api-token: No such file or directory".
    let out = run_with(home.policy(), home.req(r#"cat "$REEF_DIR/api-token""#)).await;
    assert_fails_with(&out, "cat $REEF_HOME/api-token", MISSING_OR_DENIED);
    assert!(!out.stdout.contains("reef-token"), "{}", show(&out));

    // Observed: "cat: …/agents/bob/workspace/diary.txt: No such file or directory".
    let out = run_with(home.policy(), home.req(r#"cat "$OTHER/diary.txt""#)).await;
    assert_fails_with(&out, "cat another agent's file", MISSING_OR_DENIED);

    // Observed: "ls: cannot open directory '…/.reef': Permission denied".
    let out = run_with(
        home.policy(),
        home.req(r#"ls -A "$REEF_DIR" "$REEF_DIR/agents""#),
    )
    .await;
    assert_sandbox_built(&out, "ls $REEF_HOME");
    assert!(
        !out.stdout.contains("api-token") && !out.stdout.contains("bob"),
        "the rest of $REEF_HOME is listed: {}",
        show(&out)
    );

    // The mask itself cannot be written to.
    let out = run_with(home.policy(), home.req(r#"echo x > "$REEF_DIR/planted""#)).await;
    assert_fails_with(&out, "write into $REEF_HOME", MISSING_OR_DENIED);
    assert!(!home.home.join("planted").exists());
}

#[tokio::test]
async fn a_hidden_path_that_is_a_link_hides_its_target_too() {
    let fx = Fixture::new();
    // The workspace is a home whose ~/.aws is a link into ~/dotfiles.
    let dotfiles = fx.ws.join("dotfiles/aws");
    std::fs::create_dir_all(&dotfiles).unwrap();
    std::fs::write(dotfiles.join("credentials"), "aws-secret-8c1d\n").unwrap();
    std::fs::write(fx.ws.join("dotfiles/vimrc"), "set nu\n").unwrap();
    symlink("dotfiles/aws", fx.ws.join(".aws")).unwrap();
    let policy = SandboxPolicy {
        hidden: reef_sandbox::home_secrets(&fx.ws),
        ..confined_policy()
    };
    for path in [".aws/credentials", "dotfiles/aws/credentials"] {
        // Observed: "cat: .aws/credentials: Permission denied".
        let out = run_with(policy.clone(), fx.req(&format!("cat {path}"))).await;
        assert_fails_with(&out, &format!("cat {path}"), MISSING_OR_DENIED);
        assert!(!out.stdout.contains("aws-secret"), "{}", show(&out));
    }
    // Positive control: the rest of the dotfiles are readable.
    let out = run_with(policy, fx.req("cat dotfiles/vimrc")).await;
    assert_succeeds(&out, "cat dotfiles/vimrc");
}

#[tokio::test]
async fn the_start_directory_is_entered_inside_the_sandbox() {
    let fx = Fixture::new();
    std::fs::create_dir(fx.ws.join("sub")).unwrap();
    // Positive control: a real subdirectory is the start directory; HOME stays the workspace.
    let out = run_with(
        confined_policy(),
        fx.req("pwd -P; echo $HOME; echo x > here.txt")
            .in_dir("sub"),
    )
    .await;
    assert_succeeds(&out, "start in sub");
    let ws = fx.ws.canonicalize().unwrap();
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines[0], ws.join("sub").to_str().unwrap());
    assert_eq!(lines[1], fx.ws.to_str().unwrap());
    assert!(fx.ws.join("sub/here.txt").exists());

    // A start directory swapped for a link to the outside: the link is followed inside the
    // sandbox, where the outside does not exist; nothing outside is mounted or written.
    std::fs::remove_dir_all(fx.ws.join("sub")).unwrap();
    symlink(&fx.outside, fx.ws.join("sub")).unwrap();
    let out = run_with(
        confined_policy(),
        fx.req("echo x > pwned.txt").in_dir("sub"),
    )
    .await;
    assert!(
        !out.success(),
        "ran in the outside directory; {}",
        show(&out)
    );
    assert!(
        out.stderr.contains("chdir") && out.stderr.contains("No such file"),
        "{}",
        show(&out)
    );
    assert!(!fx.outside.join("pwned.txt").exists(), "wrote outside");

    // `..` is refused before anything runs.
    let err = Sandbox::new(confined_policy())
        .run(fx.req("true").in_dir("../outside"))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("without `.` or `..`"), "{err}");
}

#[tokio::test]
async fn a_racing_link_never_mounts_the_outside() {
    let fx = Fixture::new();
    std::fs::create_dir(fx.ws.join("sub")).unwrap();
    // A second command keeps swapping `sub` between a directory and a link to the outside
    // while commands start in `sub`.
    let swapper = fx.req(&format!(
        "i=0; while [ $i -lt 400 ]; do rm -rf sub; ln -s {} sub; rm -f sub; mkdir sub; \
         i=$((i+1)); done",
        fx.outside.display()
    ));
    let sandbox = Sandbox::new(confined_policy());
    let racer = sandbox.run(swapper);
    let attempts = async {
        let mut outs = Vec::new();
        for _ in 0..20 {
            // `sub` may be missing when reef checks it: then nothing runs at all.
            if let Ok(out) = sandbox
                .run(fx.req("echo raced > raced.txt").in_dir("sub"))
                .await
            {
                outs.push(out);
            }
        }
        outs
    };
    let (raced, outs) = tokio::join!(racer, attempts);
    assert_succeeds(&raced.unwrap(), "the swapping command");
    assert!(
        outs.iter()
            .all(|o| o.exit_code != Some(125) || o.stderr.contains("chdir")),
        "a set-up step other than entering the directory failed: {:?}",
        outs.iter().map(show).collect::<Vec<_>>()
    );
    assert!(
        !fx.outside.join("raced.txt").exists(),
        "a command wrote into the outside directory"
    );
}

#[tokio::test]
async fn files_the_host_acts_on_are_read_only_inside() {
    let fx = Fixture::new();
    std::fs::create_dir_all(fx.ws.join(".git")).unwrap();
    std::fs::write(fx.ws.join(".git/config"), "[core]\n").unwrap();
    std::fs::write(fx.ws.join(".git/description"), "repo\n").unwrap();
    std::fs::write(fx.ws.join("reef.toml"), "[agent]\nmax_rounds = 5\n").unwrap();
    for (what, command) in [
        ("reef.toml", "echo '[sandbox]' >> reef.toml"),
        (
            ".git/config",
            "echo '[core] fsmonitor = evil' >> .git/config",
        ),
        (".git/hooks", "echo evil > .git/hooks/pre-commit"),
        ("rename .git", "mv .git .git-old"),
        ("replace reef.toml", "rm -f reef.toml"),
    ] {
        // Observed: "sh: 1: cannot create reef.toml: Read-only file system",
        // "mv: cannot move '.git' to '.git-old': Device or resource busy".
        let out = fx.run(command).await;
        assert_fails_with(
            &out,
            what,
            &[
                "Read-only file system",
                "Device or resource busy",
                "Permission denied",
            ],
        );
    }
    assert_eq!(
        std::fs::read_to_string(fx.ws.join(".git/config")).unwrap(),
        "[core]\n"
    );
    assert!(!fx.ws.join(".git/hooks/pre-commit").exists());
    assert!(fx.ws.join(".git/hooks").is_dir(), "hooks/ was created");
    assert!(fx.ws.join("reef.toml").exists());
    // Positive control: the rest of .git and of the workspace stay writable.
    let out = fx
        .run("echo changed > .git/description && echo y > other.toml")
        .await;
    assert_succeeds(&out, "write .git/description");
    assert_eq!(
        std::fs::read_to_string(fx.ws.join(".git/description")).unwrap(),
        "changed\n"
    );
}

#[tokio::test]
async fn kernel_settings_in_proc_are_read_only() {
    let fx = Fixture::new();
    // Positive control: /proc/sys is there and readable.
    let out = fx.run("cat /proc/sys/kernel/osrelease").await;
    assert_succeeds(&out, "read /proc/sys");
    // Observed: "sh: 1: cannot create /proc/sys/kernel/core_pattern: Read-only file system".
    let out = fx
        .run("echo '|/tmp/x' > /proc/sys/kernel/core_pattern")
        .await;
    assert_fails_with(&out, "write core_pattern", &["Read-only file system"]);
    if Path::new("/proc/sysrq-trigger").exists() {
        let out = fx.run("echo h > /proc/sysrq-trigger").await;
        assert_fails_with(&out, "write sysrq-trigger", &["Read-only file system"]);
    }
}

/// Python that opens the terminal, then tries TIOCSTI on it and on stdin: prints one line per
/// attempt with the errno name.
const TIOCSTI: &str = r#"
import errno, fcntl, os, termios
def attempt(name, fd):
    try:
        fcntl.ioctl(fd, termios.TIOCSTI, b"x")
        print(name, "injected")
    except OSError as e:
        print(name, errno.errorcode.get(e.errno, e.errno))
try:
    attempt("tty", os.open("/dev/tty", os.O_RDWR))
except OSError as e:
    print("tty open", errno.errorcode.get(e.errno, e.errno))
attempt("stdout", 1)
r, w = os.pipe()
attempt("pipe", r)
"#;

#[tokio::test]
async fn the_terminal_is_out_of_reach() {
    let fx = Fixture::new();
    let mut req = fx.req("");
    req.program = "python3".into();
    req.args = vec!["-c".into(), TIOCSTI.into()];
    let out = run_with(confined_policy(), req).await;
    assert_succeeds(&out, "the TIOCSTI probe");
    let lines: Vec<&str> = out.stdout.lines().collect();
    // No /dev/tty inside, and no controlling terminal anyway.
    assert_eq!(lines[0], "tty open ENOENT", "{}", show(&out));
    // seccomp answers TIOCSTI with EPERM before the kernel looks at the descriptor (a pipe
    // would otherwise say ENOTTY).
    assert_eq!(lines[1], "stdout EPERM", "{}", show(&out));
    assert_eq!(lines[2], "pipe EPERM", "{}", show(&out));
    // Positive control: without the sandbox the same probe reaches the ioctl (ENOTTY on a
    // pipe), so EPERM above is the filter's doing.
    let mut req = fx.req("");
    req.program = "python3".into();
    req.args = vec!["-c".into(), TIOCSTI.into()];
    let out = run_with(SandboxPolicy::default(), req).await;
    assert!(out.stdout.contains("pipe ENOTTY"), "{}", show(&out));
}

#[tokio::test]
async fn a_kernel_without_landlock_makes_the_backend_fail() {
    // The helper runs under a seccomp filter that answers Landlock's system calls with ENOSYS.
    let policy = SandboxPolicy {
        helper: Some(reef_sandbox::HelperCommand {
            program: reef_test_support::without_landlock(),
            args: vec![env!("CARGO_BIN_EXE_reef-sandbox-exec").to_owned()],
        }),
        ..confined_policy()
    };
    let err = Sandbox::new(policy).self_test().await.unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("landlock is not enforced") && text.contains("seccomp filter"),
        "{text}"
    );
    // Positive control: the same helper without the filter works.
    Sandbox::new(confined_policy()).self_test().await.unwrap();
}

#[tokio::test]
async fn a_hidden_path_cannot_be_carried_out_from_under_its_mask() {
    let fx = Fixture::new();
    // The workspace is a home with ~/.config/gcloud, hidden two levels down.
    std::fs::create_dir_all(fx.ws.join(".config/gcloud")).unwrap();
    std::fs::write(
        fx.ws.join(".config/gcloud/credentials.db"),
        "gcloud-secret-4d2\n",
    )
    .unwrap();
    std::fs::write(fx.ws.join(".config/editor.conf"), "tabs\n").unwrap();
    let policy = SandboxPolicy {
        hidden: reef_sandbox::home_secrets(&fx.ws),
        ..confined_policy()
    };
    // Observed: "mv: cannot move '.config' to '.c': Device or resource busy".
    let out = run_with(policy.clone(), fx.req("mv .config .c")).await;
    assert_fails_with(&out, "mv .config .c", &["busy"]);
    let out = run_with(
        policy.clone(),
        fx.req("cat .c/gcloud/credentials.db; cat .config/gcloud/credentials.db"),
    )
    .await;
    assert_sandbox_built(&out, "cat the credentials");
    assert!(!out.stdout.contains("gcloud-secret"), "{}", show(&out));
    assert!(fx.ws.join(".config/gcloud/credentials.db").exists());
    // Positive control: the rest of ~/.config is the command's.
    let out = run_with(
        policy,
        fx.req("cat .config/editor.conf && echo x > .config/new"),
    )
    .await;
    assert_succeeds(&out, "use the rest of .config");
}

#[tokio::test]
async fn a_workspace_that_is_a_hidden_directory_is_refused() {
    let fx = Fixture::new();
    let policy = SandboxPolicy {
        hidden: vec![fx.ws.clone()],
        ..confined_policy()
    };
    let err = Sandbox::new(policy).run(fx.req("ls")).await.unwrap_err();
    assert!(err.to_string().contains("reef hides from agents"), "{err}");
    // Positive control: the same workspace without the mask.
    assert_succeeds(&fx.run("ls").await, "ls");
}
