//! Opening a URL in the operator's own browser (`reef dashboard`): the one process reef starts
//! on the host unconfined, because it is the person's browser, not an agent's program.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Opens `url` with `$BROWSER`, or `xdg-open` in a graphical session. `Ok(false)` when this
/// machine has no browser to open (a server over SSH): the caller prints the link instead.
pub fn open_in_browser(url: &str) -> std::io::Result<bool> {
    let program = match std::env::var_os("BROWSER").filter(|b| !b.is_empty()) {
        Some(browser) => PathBuf::from(browser),
        None => {
            let graphical = ["DISPLAY", "WAYLAND_DISPLAY"]
                .iter()
                .any(|v| std::env::var_os(v).is_some_and(|v| !v.is_empty()));
            match which("xdg-open") {
                Some(open) if graphical => open,
                _ => return Ok(false),
            }
        }
    };
    Command::new(program)
        .arg(url)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    Ok(true)
}

fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}
