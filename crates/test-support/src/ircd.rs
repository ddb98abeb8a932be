//! A real IRC server for tests: ngircd (Debian package `ngircd`) as an unprivileged process on
//! a free loopback port with its configuration in a temporary directory, and a raw-socket IRC
//! client that plays the people on it.

use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};

/// How long a test waits for a line it expects before it fails (a hang is a failure, not a
/// measurement).
const EXPECT_WAIT: Duration = Duration::from_secs(60);

/// A running ngircd; killed on drop.
pub struct Ngircd {
    program: PathBuf,
    dir: tempfile::TempDir,
    port: u16,
    /// With [`Ngircd::start_tls`]: the TLS port and the PEM of the CA that signed its
    /// certificate (for `127.0.0.1`).
    tls: Option<(u16, String)>,
    child: Option<Child>,
}

impl Ngircd {
    /// Starts ngircd on a free loopback port and waits until it accepts connections.
    ///
    /// # Panics
    /// When ngircd is not installed (the message gives the install line) or does not start.
    pub fn start() -> Ngircd {
        Ngircd::launch_with(false)
    }

    /// Like [`Ngircd::start`], with a TLS port too, its certificate for `127.0.0.1` signed by
    /// a CA made for the test with the `openssl` command.
    ///
    /// # Panics
    /// As `start`, and when `openssl` is missing or fails.
    pub fn start_tls() -> Ngircd {
        Ngircd::launch_with(true)
    }

    fn launch_with(tls: bool) -> Ngircd {
        let program = find_ngircd();
        let dir = tempfile::tempdir().must("temporary directory");
        // ngircd drops to an unprivileged user before it reads its certificate.
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))
            .must("open the temporary directory to ngircd's user");
        let port = free_port();
        let tls = tls.then(|| (free_port(), make_certificates(dir.path())));
        let mut text = config_text(port);
        if let Some((tls_port, _)) = &tls {
            let d = dir.path().display();
            text.push_str(&format!(
                "[SSL]\nCertFile = {d}/cert.pem\nKeyFile = {d}/key.pem\nPorts = {tls_port}\n"
            ));
        }
        let config = dir.path().join("ngircd.conf");
        std::fs::write(&config, text).must("write the ngircd configuration");
        let mut server = Ngircd {
            program,
            dir,
            port,
            tls,
            child: None,
        };
        server.launch();
        server
    }

    /// The TLS port and the CA's PEM, for a server from [`Ngircd::start_tls`].
    pub fn tls(&self) -> Option<(u16, &str)> {
        self.tls.as_ref().map(|(port, pem)| (*port, pem.as_str()))
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// `host:port`, as `[channels.NAME] server` takes it.
    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// What the server logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("ngircd.log")).unwrap_or_default()
    }

    /// Kills the server (every connection drops) and waits for it to end.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again on the same port.
    pub fn restart(&mut self) {
        self.kill();
        self.launch();
    }

    fn launch(&mut self) {
        let log = std::fs::File::create(self.dir.path().join("ngircd.log")).must("log file");
        let child = Command::new(&self.program)
            .arg("--nodaemon")
            .arg("--config")
            .arg(self.dir.path().join("ngircd.conf"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().must("log file"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", self.program.display()));
        self.child = Some(child);
        // Ready means a client gets through registration: a listening port alone is not
        // (a connection made just after ngircd binds its port can be reset).
        for _ in 0..200 {
            if welcomes(self.port) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!(
            "ngircd did not listen on port {}:\n{}",
            self.port,
            self.log()
        );
    }
}

impl Drop for Ngircd {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A test environment that cannot do what a test needs fails the test, saying what.
trait Must<T> {
    fn must(self, what: &str) -> T;
}

impl<T, E: std::fmt::Display> Must<T> for Result<T, E> {
    fn must(self, what: &str) -> T {
        match self {
            Ok(value) => value,
            Err(err) => panic!("{what}: {err}"),
        }
    }
}

/// A CA and a certificate for `127.0.0.1` signed by it, in `dir` (`cert.pem`, `key.pem`,
/// readable by ngircd's user); returns the CA's PEM.
fn make_certificates(dir: &std::path::Path) -> String {
    let openssl = |args: &[&str]| {
        let out = Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .output()
            .must("run openssl (apt-get install -y openssl)");
        assert!(
            out.status.success(),
            "openssl {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    std::fs::write(
        dir.join("leaf.ext"),
        "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n",
    )
    .must("write the certificate extensions");
    openssl(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "2",
        "-subj",
        "/CN=reef test CA",
    ]);
    openssl(&[
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "key.pem",
        "-out",
        "leaf.csr",
        "-subj",
        "/CN=127.0.0.1",
    ]);
    openssl(&[
        "x509",
        "-req",
        "-in",
        "leaf.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "cert.pem",
        "-days",
        "2",
        "-extfile",
        "leaf.ext",
    ]);
    for file in ["cert.pem", "key.pem"] {
        std::fs::set_permissions(dir.join(file), std::fs::Permissions::from_mode(0o644))
            .must("let ngircd's user read the certificate");
    }
    std::fs::read_to_string(dir.join("ca.pem")).must("read the CA certificate")
}

fn find_ngircd() -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/usr/local/sbin")])
        .map(|dir| dir.join("ngircd"))
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!("ngircd is not installed; install it with: apt-get install -y ngircd")
        })
}

/// Whether a client that registers on `port` is welcomed (the end of the MOTD, or no MOTD).
fn welcomes(port: u16) -> bool {
    use std::io::{BufRead as _, Write as _};
    let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    if stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .is_err()
        || stream
            .write_all(b"NICK reefprobe\r\nUSER reefprobe 0 * :readiness probe\r\n")
            .is_err()
    {
        return false;
    }
    let Ok(read) = stream.try_clone() else {
        return false;
    };
    for line in std::io::BufReader::new(read).lines() {
        let Ok(line) = line else {
            return false;
        };
        let command = line.split(' ').nth(1).unwrap_or_default();
        if command == "376" || command == "422" {
            return stream.write_all(b"QUIT\r\n").is_ok();
        }
    }
    false
}

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").must("bind a loopback port");
    listener.local_addr().must("local address").port()
}

fn config_text(port: u16) -> String {
    // No connection limit per address (every agent is a connection from 127.0.0.1), long
    // nicks, no DNS or ident lookups that would slow registration down.
    format!(
        "[Global]\n\
         Name = irc.reef.test\n\
         Info = reef test server\n\
         AdminInfo1 = reef tests\n\
         AdminInfo2 = loopback\n\
         AdminEMail = tests@reef.invalid\n\
         Listen = 127.0.0.1\n\
         Ports = {port}\n\
         MotdPhrase = \"reef test server\"\n\
         [Limits]\n\
         MaxConnectionsIP = 0\n\
         MaxNickLength = 30\n\
         MaxJoins = 0\n\
         [Options]\n\
         PAM = no\n\
         DNS = no\n\
         Ident = no\n"
    )
}

/// One line as the test client received it.
#[derive(Clone, Debug)]
pub struct IrcLine {
    pub raw: String,
    /// The sender's nick, if a user sent it.
    pub nick: Option<String>,
    pub command: String,
    pub params: Vec<String>,
}

impl IrcLine {
    fn parse(raw: &str) -> IrcLine {
        let mut rest = raw;
        let mut nick = None;
        if let Some(prefixed) = rest.strip_prefix(':') {
            let (prefix, r) = prefixed.split_once(' ').unwrap_or((prefixed, ""));
            if prefix.contains('!') {
                nick = prefix.split('!').next().map(str::to_owned);
            }
            rest = r;
        }
        let (command, mut rest) = rest.split_once(' ').unwrap_or((rest, ""));
        let mut params = Vec::new();
        while !rest.is_empty() {
            if let Some(trailing) = rest.strip_prefix(':') {
                params.push(trailing.to_owned());
                break;
            }
            let (p, r) = rest.split_once(' ').unwrap_or((rest, ""));
            params.push(p.to_owned());
            rest = r;
        }
        IrcLine {
            raw: raw.to_owned(),
            nick,
            command: command.to_owned(),
            params,
        }
    }

    /// For a PRIVMSG: its target and text.
    pub fn privmsg(&self) -> Option<(&str, &str)> {
        (self.command == "PRIVMSG" && self.params.len() == 2)
            .then(|| (self.params[0].as_str(), self.params[1].as_str()))
    }
}

/// A person on the test server, over a raw socket.
pub struct IrcClient {
    pub nick: String,
    read: BufReader<OwnedReadHalf>,
    write: OwnedWriteHalf,
    /// Every line received so far, PINGs answered.
    pub seen: Vec<IrcLine>,
}

impl IrcClient {
    /// Connects as `nick` and waits for the end of the MOTD.
    ///
    /// # Panics
    /// When the server cannot be reached or does not welcome the nick.
    pub async fn connect(port: u16, nick: &str) -> IrcClient {
        let stream = TcpStream::connect(("127.0.0.1", port))
            .await
            .must("connect to the test IRC server");
        let (read, write) = stream.into_split();
        let mut client = IrcClient {
            nick: nick.to_owned(),
            read: BufReader::new(read),
            write,
            seen: Vec::new(),
        };
        client.send(&format!("NICK {nick}")).await;
        client.send(&format!("USER {nick} 0 * :test {nick}")).await;
        client
            .expect(|l| l.command == "376" || l.command == "422")
            .await;
        client
    }

    /// Sends one raw line (CR LF added).
    pub async fn send(&mut self, line: &str) {
        self.write
            .write_all(format!("{line}\r\n").as_bytes())
            .await
            .must("write to the test IRC server");
    }

    /// Sends raw bytes as they are (for malformed input).
    pub async fn send_bytes(&mut self, bytes: &[u8]) {
        self.write
            .write_all(bytes)
            .await
            .must("write to the test IRC server");
    }

    /// Joins `room` and waits until the server confirms.
    pub async fn join(&mut self, room: &str) {
        self.send(&format!("JOIN {room}")).await;
        let nick = self.nick.clone();
        self.expect(|l| {
            l.command == "JOIN" && l.nick.as_deref() == Some(&nick) && l.params[0] == room
        })
        .await;
    }

    pub async fn say(&mut self, target: &str, text: &str) {
        self.send(&format!("PRIVMSG {target} :{text}")).await;
    }

    /// Reads until a line matches, answering PINGs; returns it.
    ///
    /// # Panics
    /// When no such line arrives within a minute, or the connection ends.
    pub async fn expect(&mut self, want: impl Fn(&IrcLine) -> bool) -> IrcLine {
        match tokio::time::timeout(EXPECT_WAIT, self.read_until(want)).await {
            Ok(line) => line,
            Err(_) => panic!(
                "{}: the expected line did not come; last lines:\n{}",
                self.nick,
                self.tail(30)
            ),
        }
    }

    /// Reads until a line matches or `wait` passes (for checking that something does *not*
    /// come); the lines read stay in `seen`.
    pub async fn watch(
        &mut self,
        wait: Duration,
        want: impl Fn(&IrcLine) -> bool,
    ) -> Option<IrcLine> {
        tokio::time::timeout(wait, self.read_until(want)).await.ok()
    }

    /// Reads until every one of `wants` has matched a line, in whatever order the lines
    /// come (two senders, such as a departing agent's QUIT and the overseer's reply, race);
    /// returns the matching lines in the order of `wants`.
    ///
    /// # Panics
    /// When a wanted line does not arrive within a minute, or the connection ends.
    pub async fn expect_each(&mut self, wants: &[&dyn Fn(&IrcLine) -> bool]) -> Vec<IrcLine> {
        let mut found: Vec<Option<IrcLine>> = vec![None; wants.len()];
        while found.iter().any(Option::is_none) {
            let open = |l: &IrcLine| {
                wants
                    .iter()
                    .zip(&found)
                    .any(|(want, seen)| seen.is_none() && want(l))
            };
            let line = self.expect(open).await;
            for (want, seen) in wants.iter().zip(found.iter_mut()) {
                if seen.is_none() && want(&line) {
                    *seen = Some(line);
                    break;
                }
            }
        }
        found.into_iter().flatten().collect()
    }

    /// The PRIVMSG text `from` sends to `target`, waiting for it.
    pub async fn expect_message(&mut self, from: &str, target: &str, contains: &str) -> String {
        let line = self
            .expect(|l| {
                l.nick.as_deref() == Some(from)
                    && l.privmsg()
                        .is_some_and(|(t, text)| t == target && text.contains(contains))
            })
            .await;
        line.params[1].clone()
    }

    /// The last `n` lines received, one per line.
    pub fn tail(&self, n: usize) -> String {
        let start = self.seen.len().saturating_sub(n);
        self.seen[start..]
            .iter()
            .map(|l| l.raw.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    }

    async fn read_until(&mut self, want: impl Fn(&IrcLine) -> bool) -> IrcLine {
        loop {
            let mut buf = Vec::new();
            let n = self
                .read
                .read_until(b'\n', &mut buf)
                .await
                .must("read from the test IRC server");
            assert!(
                n > 0,
                "{}: the server closed the connection\n{}",
                self.nick,
                self.tail(30)
            );
            let raw = String::from_utf8_lossy(&buf)
                .trim_end_matches(['\r', '\n'])
                .to_owned();
            let line = IrcLine::parse(&raw);
            if line.command == "PING" {
                let token = line.params.first().cloned().unwrap_or_default();
                self.send(&format!("PONG :{token}")).await;
            }
            self.seen.push(line.clone());
            if want(&line) {
                return line;
            }
        }
    }
}
