//! `reef serve`: the daemon. Writes `$REEF_HOME/reef.pid` (refusing to start next to a live
//! daemon) and `$REEF_HOME/reef.addr` (where clients connect: `ADDR`, or `https://ADDR` with
//! `[daemon.tls]`), creates the API token and the TLS certificate if asked, starts
//! the runtime, the channels, the HTTP API and the QUIC gateway (`$REEF_HOME/quic.addr`), and on SIGTERM or Ctrl-C closes the channels (agents QUIT) and interrupts running turns (their
//! messages go back to the inboxes, the transcripts keep what was done) before exiting.

use crate::home;
use anyhow::Context as _;
use reef_runtime::{Runtime, RuntimeOptions, Templates};
use std::path::{Path, PathBuf};

pub async fn serve(
    overrides: &[String],
    args: crate::daemon_args::ServeArgs,
) -> anyhow::Result<u8> {
    let mut overrides = overrides.to_vec();
    if args.cluster {
        overrides.push("cluster.enabled=true".into());
    }
    let config = home::load_config(&overrides)?;
    // Asked once, before the daemon detaches from the terminal.
    crate::passphrase::unlock_if_used(&config.vault)?;
    let home_dir = config.home.clone();
    std::fs::create_dir_all(&home_dir)
        .with_context(|| format!("cannot create {}", home_dir.display()))?;
    let pid = PidFile::acquire(&home_dir.join("reef.pid"))?;
    let templates = Templates::load(&home_dir.join("templates"))?;
    let token = reef_server::load_or_create_token(&home_dir.join("api-token"))
        .with_context(|| format!("cannot use the API token in {}", home_dir.display()))?;
    let listen = args.listen.unwrap_or(config.daemon.listen);
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("cannot listen on {listen} (daemon.listen)"))?;
    let addr = listener.local_addr()?;
    // The names a self-signed certificate is made for (the HTTP API and the QUIC gateway
    // share it).
    let mut names = vec![addr.ip().to_string()];
    names.extend(config.daemon.hosts.iter().map(|h| host_name(h).to_owned()));
    if let Some(quic) = &config.gateway.quic {
        names.push(quic.listen.ip().to_string());
    }
    let tls = match &config.daemon.tls {
        Some(source) => {
            let setup = reef_server::tls::load(source, &home_dir, &names)
                .context("cannot set up TLS for the HTTP API ([daemon.tls])")?;
            Some(setup)
        }
        None => None,
    };
    let (runtime, recovery) = Runtime::start(RuntimeOptions {
        config,
        templates,
        helper: Some(crate::cmd::sandbox::helper()?),
        model_override: None,
        clock: None,
    })
    .await?;
    if let Some(warning) = runtime.sandbox_warning() {
        eprintln!("reef: warning: {warning}");
    }
    if recovery.released > 0 {
        eprintln!(
            "reef: {} message(s) were in progress when reef last stopped; they run again",
            recovery.released
        );
    }
    // Before the address file: clients (and tests) take that file as "the daemon is up".
    let quic = start_quic(&runtime, &token, &home_dir, &names)?;
    let addr_file = home_dir.join("reef.addr");
    // Clients read the scheme from it: `https://ADDR` when the API speaks TLS.
    let url = match &tls {
        Some(_) => format!("https://{addr}"),
        None => format!("http://{addr}"),
    };
    let written = match &tls {
        Some(_) => url.clone(),
        None => addr.to_string(),
    };
    std::fs::write(&addr_file, format!("{written}\n"))
        .with_context(|| format!("cannot write {}", addr_file.display()))?;
    eprintln!(
        "reef: serving on {url} (token in {})",
        home_dir.join("api-token").display()
    );
    match &tls {
        Some(tls) => eprintln!(
            "reef: TLS certificate {}{} SHA-256 fingerprint {}",
            tls.cert_path.display(),
            if tls.created { " (made now)," } else { "," },
            tls.fingerprint
        ),
        None if !addr.ip().is_loopback() => eprintln!(
            "reef: warning: the API listens on {addr}, beyond this machine, without TLS: tokens \
             cross the network in the clear; set [daemon.tls] self_signed = true or a cert and key"
        ),
        None => {}
    }
    let gateway = reef_gateway::Gateway::start(&runtime).await;
    for channel in runtime.channels() {
        eprintln!(
            "reef: channel {} ({} {}) {}",
            channel.name, channel.kind, channel.target, channel.state
        );
    }
    let router = reef_server::router(runtime.clone(), &token, addr);
    let stopper = runtime.clone();
    let served = reef_server::serve(listener, router, tls.as_ref(), async move {
        wait_for_signal().await;
        eprintln!("reef: shutting down: agents leave their channels, running turns stop");
        // Remote conversations end first; nothing answers them any more.
        if let Some((stop, task)) = quic {
            stop.send_replace(true);
            if let Err(err) = task.await {
                eprintln!("reef: the QUIC gateway failed: {err}");
            }
        }
        gateway.shutdown().await;
        stopper.shutdown().await;
    })
    .await;
    let _ = std::fs::remove_file(&addr_file);
    // Gone already when the gateway was not configured.
    let _absent = std::fs::remove_file(home_dir.join("quic.addr"));
    drop(pid);
    served.context("the HTTP server failed")?;
    eprintln!("reef: stopped");
    Ok(crate::exit::OK)
}

/// Binds and starts the QUIC gateway when `[gateway.quic]` is set, writing its address to
/// `$REEF_HOME/quic.addr`; returns what stops it.
fn start_quic(
    runtime: &Runtime,
    token: &str,
    home_dir: &Path,
    names: &[String],
) -> anyhow::Result<
    Option<(
        tokio::sync::watch::Sender<bool>,
        tokio::task::JoinHandle<()>,
    )>,
> {
    let bound = reef_server::quic::QuicGateway::bind(runtime, token, home_dir, names)
        .context("cannot start the QUIC gateway ([gateway.quic])")?;
    let Some(gateway) = bound else {
        return Ok(None);
    };
    let quic_file = home_dir.join("quic.addr");
    std::fs::write(&quic_file, format!("{}\n", gateway.addr))
        .with_context(|| format!("cannot write {}", quic_file.display()))?;
    eprintln!(
        "reef: QUIC gateway on {} (certificate {}{} SHA-256 fingerprint {}); connect with          `reef connect HOST:{} --fingerprint {} --agent NAME`",
        gateway.addr,
        gateway.cert_path.display(),
        if gateway.created { ", made now," } else { "," },
        gateway.fingerprint,
        gateway.addr.port(),
        gateway.fingerprint
    );
    let (stop, mut stopped) = tokio::sync::watch::channel(false);
    let task = tokio::spawn(gateway.serve(async move {
        // Either a stop or the daemon dropping the sender: stop both ways.
        let _either = stopped.changed().await;
    }));
    Ok(Some((stop, task)))
}

/// The name of a `daemon.hosts` entry without its port.
fn host_name(host: &str) -> &str {
    match host.rsplit_once(':') {
        Some((name, _)) if host.starts_with('[') && name.ends_with(']') => name,
        Some((name, _)) if !name.contains(':') => name,
        _ => host,
    }
}

async fn wait_for_signal() {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(term) => term,
        Err(err) => {
            eprintln!("reef: cannot listen for SIGTERM ({err}); stop with Ctrl-C");
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}

/// `reef.pid`, removed when dropped. A file naming a live process stops a second daemon; one
/// left by a killed daemon is taken over.
pub(crate) struct PidFile(PathBuf);

impl PidFile {
    pub(crate) fn acquire(path: &Path) -> anyhow::Result<PidFile> {
        if let Ok(text) = std::fs::read_to_string(path)
            && let Ok(pid) = text.trim().parse::<u32>()
            && pid != std::process::id()
            && Path::new(&format!("/proc/{pid}")).exists()
            && std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains("reef"))
        {
            return Err(crate::exit::Exit::usage(format!(
                "a reef daemon is already running for this home (pid {pid}, {}); stop it first",
                path.display()
            )));
        }
        std::fs::write(path, format!("{}\n", std::process::id()))
            .with_context(|| format!("cannot write {}", path.display()))?;
        Ok(PidFile(path.to_path_buf()))
    }
}

impl Drop for PidFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}
