//! The operator's shell inside an agent's sandbox: offered only when `[dashboard] terminal`
//! is on, started in the agent's workspace under the agent's own policy, and recorded as two
//! events: `terminal.opened`, then `terminal.closed` with what was typed and the end of what
//! was shown.

use crate::error::RuntimeError;
use crate::kernel::Runtime;
use reef_core::AgentId;
use reef_sandbox::{ExecRequest, TermSize, Terminal};
use serde_json::json;
use std::collections::VecDeque;
use std::io;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Bytes of typed input kept for the record (the first ones).
pub const TYPED_KEPT: usize = 16 * 1024;
/// Bytes of output kept for the record (the last ones).
pub const SHOWN_KEPT: usize = 16 * 1024;
/// How long a shell whose output ended gets to be reaped before it is killed.
const EXIT_GRACE: Duration = Duration::from_secs(2);

/// An open terminal. [`TerminalSession::close`] ends it and records how it went; dropped
/// without closing, its processes are killed and the record still written.
pub struct TerminalSession {
    term: Terminal,
    rt: Runtime,
    agent: AgentId,
    id: String,
    by: String,
    started: Instant,
    record: Mutex<Record>,
    closed: bool,
}

/// What the session saw, for its closing event.
#[derive(Default)]
struct Record {
    typed: Vec<u8>,
    typed_bytes: u64,
    shown: VecDeque<u8>,
    shown_bytes: u64,
    /// The shell's output ended: it has exited.
    ended: bool,
}

impl Runtime {
    /// Opens a shell in the sandbox of agent `name` (its workspace, its template's policy),
    /// for `by` (who asked, as the record names them). Refused unless `[dashboard] terminal`
    /// is on.
    pub async fn open_terminal(
        &self,
        name: &str,
        by: &str,
        size: TermSize,
    ) -> Result<TerminalSession, RuntimeError> {
        if !self.config().dashboard.terminal {
            return Err(RuntimeError::Denied(
                "the terminal is off; set `terminal = true` under `[dashboard]` in reef.toml"
                    .into(),
            ));
        }
        let agent = self.agent(name).await?;
        let sandbox = crate::worker::agent_sandbox(self, &agent);
        let req = shell_request(&agent.name, agent.workspace.clone().into());
        let program = req.program.clone();
        let term = sandbox.terminal(req, size).await.map_err(|e| match e {
            // The `none` backend: a policy answer, not a fault.
            reef_sandbox::SandboxError::Unsupported(why) => RuntimeError::Denied(why),
            e => RuntimeError::Setup(format!("cannot start the terminal: {e}")),
        })?;
        let id = format!("term_{}", uuid::Uuid::now_v7().simple());
        self.record_event(
            "terminal.opened",
            Some(&agent.id),
            json!({
                "terminal": id,
                "by": by,
                "program": program,
                "cols": size.cols,
                "rows": size.rows,
                "backend": sandbox.policy().backend.as_str(),
            }),
        )
        .await?;
        Ok(TerminalSession {
            term,
            rt: self.clone(),
            agent: agent.id,
            id,
            by: by.to_owned(),
            started: Instant::now(),
            record: Mutex::default(),
            closed: false,
        })
    }
}

/// An interactive shell without start files (the workspace's own `.bashrc` is the agent's):
/// bash when the host has it, else sh, with a prompt that names the agent.
fn shell_request(agent: &str, workspace: std::path::PathBuf) -> ExecRequest {
    let bash = std::path::Path::new("/bin/bash").exists();
    let (program, args, prompt) = if bash {
        (
            "/bin/bash",
            vec!["--noprofile", "--norc", "-i"],
            format!("{agent}@sandbox:\\w\\$ "),
        )
    } else {
        ("/bin/sh", vec!["-i"], format!("{agent}@sandbox$ "))
    };
    let mut req = ExecRequest::new(
        program,
        args.into_iter().map(str::to_owned).collect(),
        workspace,
        Duration::MAX,
    );
    req.env.push(("TERM".into(), "xterm-256color".into()));
    req.env.push(("PS1".into(), prompt));
    // HOME is the workspace, which the agent writes: the operator's history must not land
    // there, and key bindings planted there must not rewrite what the operator types.
    req.env.push(("HISTFILE".into(), "/dev/null".into()));
    req.env.push(("INPUTRC".into(), "/dev/null".into()));
    req
}

impl TerminalSession {
    /// The session's id, as its events name it.
    pub fn id(&self) -> &str {
        &self.id
    }

    fn record(&self) -> std::sync::MutexGuard<'_, Record> {
        self.record.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Reads what the shell showed; `Ok(0)` once it has exited.
    pub async fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.term.read(buf).await?;
        let mut record = self.record();
        record.ended |= n == 0;
        record.shown_bytes += n as u64;
        record.shown.extend(&buf[..n]);
        let excess = record.shown.len().saturating_sub(SHOWN_KEPT);
        record.shown.drain(..excess);
        Ok(n)
    }

    /// Types some of `data` into the shell, waiting until it takes any; returns how much it
    /// took (a shell that does not read cannot stall the caller's other work).
    pub async fn write(&self, data: &[u8]) -> io::Result<usize> {
        let n = self.term.write(data).await?;
        let mut record = self.record();
        record.typed_bytes += n as u64;
        let room = TYPED_KEPT.saturating_sub(record.typed.len());
        record.typed.extend_from_slice(&data[..n.min(room)]);
        Ok(n)
    }

    /// Changes the terminal's size.
    pub fn resize(&self, size: TermSize) -> io::Result<()> {
        self.term.resize(size)
    }

    /// Ends the session (`why`: how it ended, for the record): a shell still running is
    /// killed with everything it started, then `terminal.closed` is recorded. Returns the shell's exit
    /// code (`None` when it was killed).
    pub async fn close(mut self, why: &str) -> Result<Option<i32>, RuntimeError> {
        self.closed = true;
        // A shell still running is ended now; one whose output ended is only reaped.
        if !self.record().ended {
            self.term.kill();
        }
        let status = match tokio::time::timeout(EXIT_GRACE, self.term.wait()).await {
            Ok(status) => status.ok(),
            Err(_) => {
                self.term.kill();
                self.term.wait().await.ok()
            }
        };
        let data = self.closing_data(why, status);
        self.rt
            .record_event("terminal.closed", Some(&self.agent), data)
            .await?;
        Ok(status.and_then(|s| s.code()))
    }

    fn closing_data(
        &self,
        why: &str,
        status: Option<std::process::ExitStatus>,
    ) -> serde_json::Value {
        use std::os::unix::process::ExitStatusExt;
        let record = self.record();
        let shown: Vec<u8> = record.shown.iter().copied().collect();
        json!({
            "terminal": self.id,
            "by": self.by,
            "ended": why,
            "exit_code": status.and_then(|s| s.code()),
            "signal": status.and_then(|s| s.signal()),
            "seconds": self.started.elapsed().as_secs(),
            "typed": plain_text(&record.typed),
            "typed_bytes": record.typed_bytes,
            "shown_tail": plain_text(&shown),
            "shown_bytes": record.shown_bytes,
        })
    }
}

impl Drop for TerminalSession {
    fn drop(&mut self) {
        if self.closed {
            return;
        }
        self.term.kill();
        let status = self.term.try_status();
        let data = self.closing_data("dropped", status);
        let (rt, agent) = (self.rt.clone(), self.agent.clone());
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(async move {
                if let Err(err) = rt.record_event("terminal.closed", Some(&agent), data).await {
                    tracing::warn!(%err, "cannot record the end of a terminal session");
                }
            });
        }
    }
}

/// Terminal bytes as plain text for the record: escape sequences (colours, cursor moves,
/// titles, arrow keys) dropped, a carriage return read as a line end, other control
/// characters dropped, so the record stays readable and no larger than what was kept.
pub(crate) fn plain_text(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\u{1b}' => match chars.next() {
                // CSI: parameters up to a final byte in @..~.
                Some('[') => {
                    for c in chars.by_ref() {
                        if ('@'..='~').contains(&c) {
                            break;
                        }
                    }
                }
                // OSC (a title, a link): up to BEL or ESC \.
                Some(']') => {
                    while let Some(c) = chars.next() {
                        if c == '\u{7}' || (c == '\u{1b}' && chars.next_if_eq(&'\\').is_some()) {
                            break;
                        }
                    }
                }
                // A two-character sequence (ESC O A for an arrow key, ESC = …).
                Some('O') => {
                    chars.next();
                }
                _ => {}
            },
            '\r' => {
                if chars.peek() != Some(&'\n') {
                    out.push('\n');
                }
            }
            '\n' | '\t' => out.push(c),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::plain_text;

    #[test]
    fn the_record_keeps_text_and_drops_escape_sequences() {
        let shown = b"\x1b]0;ada@sandbox\x07\x1b[01;32mada@sandbox\x1b[00m:~$ ls\r\nnotes.txt\r\n\x1b[?2004l";
        assert_eq!(plain_text(shown), "ada@sandbox:~$ ls\nnotes.txt\n");
        // Typed keys: Enter is a carriage return, an arrow key an escape sequence.
        assert_eq!(plain_text(b"ls\x1bOA\x1b[B -l\r"), "ls -l\n");
        assert_eq!(plain_text("héllo\tworld".as_bytes()), "héllo\tworld");
    }
}
