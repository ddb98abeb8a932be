//! Fetching a git registry: the `git` program run through reef's sandbox, with the network
//! narrowed to the registry's host (or none, for a repository on this machine, which is shown
//! to git read-only), only the https and file transports, and no submodules.

use crate::error::SkillError;
use reef_sandbox::{ExecRequest, NetworkMode, Sandbox, SandboxPolicy};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long one git command may take.
const GIT_TIMEOUT: Duration = Duration::from_secs(300);

/// A git repository to fetch skills from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GitSource {
    /// `https://…` or `file:///…`.
    pub url: String,
    /// A branch, tag or commit; `None` is the remote's default branch.
    pub rev: Option<String>,
}

/// Where a URL leads, for the sandbox's allowances.
enum Remote {
    Https { host: String },
    Local { path: PathBuf },
}

impl GitSource {
    fn remote(&self) -> Result<Remote, SkillError> {
        if let Some(rest) = self.url.strip_prefix("https://") {
            let host = rest
                .split(['/', '?', '#'])
                .next()
                .unwrap_or_default()
                .rsplit('@')
                .next()
                .unwrap_or_default();
            let host = host.split(':').next().unwrap_or_default().to_owned();
            if host.is_empty() {
                return Err(SkillError::BadUrl(format!("{} has no host", self.url)));
            }
            return Ok(Remote::Https { host });
        }
        if let Some(path) = self.url.strip_prefix("file://") {
            return Ok(Remote::Local {
                path: PathBuf::from(path),
            });
        }
        Err(SkillError::BadUrl(format!(
            "{} is not a git URL reef fetches: use https://… or a local repository path",
            self.url
        )))
    }
}

/// Clones `source` into `dest` (a new folder inside `work`) and checks out its revision;
/// returns the commit checked out.
pub(crate) async fn fetch(
    base: &SandboxPolicy,
    source: &GitSource,
    work: &Path,
    dest: &str,
) -> Result<String, SkillError> {
    let mut policy = base.clone();
    let mut read_only = Vec::new();
    match source.remote()? {
        Remote::Https { host } => {
            policy.network = NetworkMode::Allowlist;
            policy.allow_domains = vec![host];
        }
        Remote::Local { path } => {
            policy.network = NetworkMode::None;
            read_only.push(path);
        }
    }
    let sandbox = Sandbox::new(policy);
    let fail = |reason: String| SkillError::Fetch {
        url: source.url.clone(),
        reason,
    };
    let git = |args: &[&str]| {
        let mut all: Vec<String> = [
            "-c",
            "protocol.allow=never",
            "-c",
            "protocol.https.allow=always",
            "-c",
            "protocol.file.allow=always",
            "-c",
            "advice.detachedHead=false",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        all.extend(args.iter().map(|s| (*s).to_owned()));
        let mut req = ExecRequest::new("git", all, work.to_path_buf(), GIT_TIMEOUT);
        req.read_only.clone_from(&read_only);
        req.env = vec![
            ("GIT_CONFIG_NOSYSTEM".into(), "1".into()),
            ("GIT_TERMINAL_PROMPT".into(), "0".into()),
        ];
        req
    };
    let run = |req: ExecRequest| {
        let sandbox = &sandbox;
        async move {
            let what = req.args[8..].join(" ");
            let out = sandbox.run(req).await?;
            if out.success() {
                Ok(out.stdout)
            } else if out.timed_out {
                Err(fail(format!(
                    "`git {what}` took longer than {} s",
                    GIT_TIMEOUT.as_secs()
                )))
            } else {
                Err(fail(out.stderr.trim().to_owned()))
            }
        }
    };
    run(git(&[
        "clone",
        "--quiet",
        "--no-checkout",
        "--",
        &source.url,
        dest,
    ]))
    .await?;
    let checkout = match &source.rev {
        Some(rev) => git(&["-C", dest, "checkout", "--quiet", "--detach", rev, "--"]),
        None => git(&["-C", dest, "checkout", "--quiet"]),
    };
    run(checkout).await?;
    let commit = run(git(&["-C", dest, "rev-parse", "HEAD"])).await?;
    Ok(commit.trim().to_owned())
}
