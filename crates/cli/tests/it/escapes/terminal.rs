//! TIOCSTI: a command that pushes characters into reef's terminal would have them run by the
//! user's shell once reef exits. Each case runs on a pseudo-terminal that is the controlling
//! terminal of reef (or of the unconfined control), then reads what is left queued on it.

use super::confined_home;
use reef_test_support::{MockReply, TestHome};
use serde_json::json;
use std::process::Command;

/// Pushes `echo PWNED` into the terminal through every descriptor it can find: `/dev/tty`,
/// stdin, stdout and stderr. Prints one line per attempt.
const PROBE: &str = r#"
import errno, fcntl, os, termios
def push(name, fd):
    try:
        for c in "echo PWNED\n":
            fcntl.ioctl(fd, termios.TIOCSTI, c.encode())
        print(name, "injected", flush=True)
    except OSError as e:
        print(name, errno.errorcode.get(e.errno, e.errno), flush=True)
try:
    push("tty", os.open("/dev/tty", os.O_RDWR))
except OSError as e:
    print("tty-open", errno.errorcode.get(e.errno, e.errno), flush=True)
for fd in (0, 1, 2):
    push("fd%d" % fd, fd)
"#;

/// Runs `argv` on a new pseudo-terminal (its controlling terminal, and its stdin, stdout and
/// stderr), then reads what is queued on the terminal's input once it has exited: what the
/// user's shell would run next. Returns (everything printed, the queued input).
fn on_a_terminal(home: &TestHome, argv: &[&str]) -> (String, String) {
    const DRIVER: &str = r#"
import os, pty, select, sys
pid, fd = pty.fork()
if pid == 0:
    os.execvp(sys.argv[1], sys.argv[1:])
out = b""
while True:
    try:
        data = os.read(fd, 4096)
    except OSError:
        break
    if not data:
        break
    out += data
os.waitpid(pid, 0)
sys.stdout.write(out.decode(errors="replace"))
"#;
    // The command runs under `sh`, which reads the terminal after it: like the user's shell.
    let script = r#""$@"; python3 -c 'import os,select; r,_,_=select.select([0],[],[],0.5); print("QUEUED:" + (os.read(0, 200).decode(errors="replace").strip() if r else ""))'"#;
    let out = Command::new("python3")
        .args(["-c", DRIVER, "sh", "-c", script, "sh"])
        .args(argv)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home.path())
        .env("REEF_HOME", home.reef_home())
        .env("MOCK_API_KEY", "k")
        .env("TERM", "dumb")
        .current_dir(home.workspace())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).replace('\r', "");
    let queued = text
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("QUEUED:"))
        .unwrap_or_else(|| panic!("the driver did not report the queue: {text}"))
        .to_owned();
    (text, queued)
}

#[test]
fn tiocsti_reaches_the_terminal_without_the_sandbox() {
    // Positive control: the probe works on this kernel when nothing confines it, so the
    // refusals below are the sandbox's.
    let home = TestHome::new();
    let (text, queued) = on_a_terminal(&home, &["python3", "-c", PROBE]);
    assert!(text.contains("tty injected"), "{text}");
    assert_eq!(queued, "echo PWNED", "{text}");
}

#[test]
fn reef_sandbox_run_keeps_the_terminal_out_of_reach() {
    let home = TestHome::new();
    let reef = env!("CARGO_BIN_EXE_reef");
    let (text, queued) = on_a_terminal(
        &home,
        &[reef, "sandbox", "run", "--", "python3", "-c", PROBE],
    );
    assert!(text.contains("tty-open ENOENT"), "{text}");
    for fd in ["fd0", "fd1", "fd2"] {
        assert!(text.contains(&format!("{fd} EPERM")), "{fd}: {text}");
    }
    assert!(!text.contains("injected"), "{text}");
    assert_eq!(queued, "", "characters reached the terminal: {text}");
}

#[test]
fn the_shell_tool_of_reef_run_keeps_the_terminal_out_of_reach() {
    let (mock, home) = confined_home(vec![
        MockReply::tool_call("shell", json!({"command": format!("python3 -c '{PROBE}'")})),
        MockReply::text("done"),
    ]);
    let reef = env!("CARGO_BIN_EXE_reef");
    let (text, queued) = on_a_terminal(&home, &[reef, "run", "probe the terminal"]);
    let result = &mock.requests()[1].tool_results()[0];
    assert!(result.contains("tty-open ENOENT"), "{result}");
    assert!(!result.contains("injected"), "{result}");
    assert_eq!(queued, "", "characters reached the terminal: {text}");
}
