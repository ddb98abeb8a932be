//! One connection to an IRC server, for one nick: TCP (or TLS) connect, registration (CAP
//! and SASL PLAIN when asked, a suffixed nick when the wanted one is taken), then a reader
//! task that answers PING and hands every other line up, and a writer task that sends lines
//! under flood control, PONG and QUIT ahead of the queue.

use super::flood::Flood;
use super::{Casemapping, Message};
use reef_core::ChannelError;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// Longest line read; a longer one is cut and the rest skipped (IRC lines are 512 bytes,
/// IRCv3 tags add up to 8 KiB).
const READ_MAX_BYTES: usize = 8192;
/// How long connecting and registering may take.
const REGISTER_TIMEOUT: Duration = Duration::from_secs(30);
/// After this much silence the reader pings the server; after twice this, it gives up.
const IDLE: Duration = Duration::from_secs(120);
/// Lines waiting for flood control before a sender waits.
const QUEUE_LINES: usize = 512;
/// How many suffixed nicks are tried when the wanted one is taken.
const NICK_TRIES: u32 = 9;

/// Where and as whom to connect.
pub(crate) struct Registration<'a> {
    pub host: &'a str,
    pub port: u16,
    pub tls: Option<Arc<rustls::ClientConfig>>,
    pub nick: &'a str,
    pub realname: &'a str,
    /// SASL PLAIN with the nick as the account.
    pub sasl_password: Option<&'a str>,
    pub flood_burst: u32,
    pub flood_interval: Duration,
}

/// What a connection's reader hands up, tagged with the connection's id.
#[derive(Debug)]
pub(crate) enum ConnEvent {
    /// A line other than PING; `lossy` when invalid UTF-8 was replaced in it.
    Line { message: Message, lossy: bool },
    /// The connection ended, and why.
    Closed(String),
}

/// A registered connection.
pub(crate) struct Conn {
    pub id: u64,
    /// The nick the server gave (may carry a suffix).
    pub nick: String,
    pub casemapping: Casemapping,
    lines: mpsc::Sender<String>,
    urgent: mpsc::UnboundedSender<String>,
    queued: Arc<AtomicUsize>,
    reader: JoinHandle<()>,
    writer: JoinHandle<()>,
}

trait Stream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Stream for T {}

impl Conn {
    /// Connects and registers; every later line goes to `events` as `(id, event)`.
    pub async fn open(
        reg: &Registration<'_>,
        id: u64,
        events: mpsc::Sender<(u64, ConnEvent)>,
    ) -> Result<Conn, ChannelError> {
        let deadline = tokio::time::Instant::now() + REGISTER_TIMEOUT;
        let stream = tokio::time::timeout_at(deadline, connect(reg))
            .await
            .map_err(|_| {
                ChannelError::Connection(format!(
                    "no connection to {}:{} within {}s",
                    reg.host,
                    reg.port,
                    REGISTER_TIMEOUT.as_secs()
                ))
            })??;
        let (read, mut write) = tokio::io::split(stream);
        let mut read = BufReader::new(read);
        let registered = tokio::time::timeout_at(deadline, register(reg, &mut read, &mut write))
            .await
            .map_err(|_| {
                ChannelError::Connection(format!(
                    "{}:{} did not finish registering {} within {}s{}",
                    reg.host,
                    reg.port,
                    reg.nick,
                    REGISTER_TIMEOUT.as_secs(),
                    if reg.tls.is_none() {
                        " (is it a TLS port? set tls = true)"
                    } else {
                        ""
                    }
                ))
            })??;
        let (lines_tx, lines_rx) = mpsc::channel(QUEUE_LINES);
        let (urgent_tx, urgent_rx) = mpsc::unbounded_channel();
        let queued = Arc::new(AtomicUsize::new(0));
        let flood = Flood::new(reg.flood_burst, reg.flood_interval, Instant::now());
        let writer = tokio::spawn(write_loop(
            write,
            lines_rx,
            urgent_rx,
            flood,
            Arc::clone(&queued),
        ));
        let reader = tokio::spawn(read_loop(read, id, events, urgent_tx.clone()));
        Ok(Conn {
            id,
            nick: registered.nick,
            casemapping: registered.casemapping,
            lines: lines_tx,
            urgent: urgent_tx,
            queued,
            reader,
            writer,
        })
    }

    /// Queues one line behind flood control; waits while the queue is full.
    pub async fn send(&self, message: &Message) -> Result<(), ChannelError> {
        self.queued.fetch_add(1, Ordering::Relaxed);
        if self.lines.send(message.to_line()).await.is_err() {
            self.queued.fetch_sub(1, Ordering::Relaxed);
            return Err(ChannelError::Connection(format!(
                "the connection of {} is closed",
                self.nick
            )));
        }
        Ok(())
    }

    /// Lines waiting for flood control.
    pub fn queued(&self) -> usize {
        self.queued.load(Ordering::Relaxed)
    }

    /// Sends `QUIT :reason` ahead of the queue and lets the writer end; the reader stops.
    pub async fn quit(mut self, reason: &str, wait: Duration) {
        let quit = Message::new("QUIT", &[reason])
            .or_else(|_| Message::new("QUIT", &["leaving"]))
            .map(|m| m.to_line())
            .unwrap_or_else(|_| "QUIT".to_owned());
        // Nothing to do when the writer is gone: the connection is closed already. The
        // writer ends after sending QUIT.
        let _sent = self.urgent.send(quit);
        if tokio::time::timeout(wait, &mut self.writer).await.is_err() {
            tracing::debug!(nick = %self.nick, "the server did not take QUIT in time");
        }
        self.reader.abort();
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.reader.abort();
        self.writer.abort();
    }
}

async fn connect(reg: &Registration<'_>) -> Result<Box<dyn Stream>, ChannelError> {
    let tcp = TcpStream::connect((reg.host, reg.port))
        .await
        .map_err(|e| {
            ChannelError::Connection(format!("cannot connect to {}:{}: {e}", reg.host, reg.port))
        })?;
    // Lines are small and interactive.
    if let Err(err) = tcp.set_nodelay(true) {
        tracing::debug!(%err, "cannot set TCP_NODELAY");
    }
    let Some(tls) = &reg.tls else {
        return Ok(Box::new(tcp));
    };
    let name = rustls::pki_types::ServerName::try_from(reg.host.to_owned()).map_err(|e| {
        ChannelError::Invalid(format!("`{}` is not a TLS server name: {e}", reg.host))
    })?;
    let stream = tokio_rustls::TlsConnector::from(Arc::clone(tls))
        .connect(name, tcp)
        .await
        .map_err(|e| {
            ChannelError::Connection(format!(
                "TLS handshake with {}:{} failed: {e} (for a plain port, set tls = false)",
                reg.host, reg.port
            ))
        })?;
    Ok(Box::new(stream))
}

struct Registered {
    nick: String,
    casemapping: Casemapping,
}

/// Registers: `CAP REQ :sasl` and `AUTHENTICATE` when a password is given, `NICK` and `USER`,
/// a new nick for every 433, and reads on to the end of the MOTD for `ISUPPORT`.
async fn register<R, W>(
    reg: &Registration<'_>,
    read: &mut BufReader<R>,
    write: &mut W,
) -> Result<Registered, ChannelError>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut nicks = Nicks::new(reg.nick);
    let mut nick = nicks.next().unwrap_or_else(|| reg.nick.to_owned());
    if reg.sasl_password.is_some() {
        send_raw(write, "CAP REQ :sasl").await?;
    }
    send(write, &message("NICK", &[&nick])?).await?;
    send(write, &message("USER", &[&nick, "0", "*", reg.realname])?).await?;
    let mut welcomed = false;
    let mut casemapping = Casemapping::default();
    let mut lines = Lines::default();
    loop {
        let Some((line, _)) = lines.next(read).await? else {
            return Err(ChannelError::Connection(
                "the server closed the connection while registering".to_owned(),
            ));
        };
        let text = line.params().last().map_or("", String::as_str);
        match line.command() {
            "PING" => send(write, &message_pong(&line)?).await?,
            "CAP" if line.param(1) == "ACK" => send_raw(write, "AUTHENTICATE PLAIN").await?,
            "CAP" if line.param(1) == "NAK" => {
                return Err(ChannelError::Refused(
                    "the server does not offer SASL; remove sasl_secret or use NickServ".into(),
                ));
            }
            "AUTHENTICATE" if line.param(0) == "+" => {
                let password = reg.sasl_password.unwrap_or_default();
                for chunk in sasl_plain(&nick, password) {
                    send_raw(write, &format!("AUTHENTICATE {chunk}")).await?;
                }
            }
            "903" => send_raw(write, "CAP END").await?,
            "902" | "904" | "905" | "906" => {
                return Err(ChannelError::Refused(format!(
                    "SASL login as {nick} failed: {text}"
                )));
            }
            "433" | "436" if !welcomed => {
                nick = nicks.next().ok_or_else(|| {
                    ChannelError::Refused(format!(
                        "the nick {} and {NICK_TRIES} suffixed ones are taken",
                        reg.nick
                    ))
                })?;
                send(write, &message("NICK", &[&nick])?).await?;
            }
            "432" if !welcomed => {
                nick = nicks.shorten().ok_or_else(|| {
                    ChannelError::Refused(format!("the server refuses the nick {nick}: {text}"))
                })?;
                send(write, &message("NICK", &[&nick])?).await?;
            }
            "001" => {
                welcomed = true;
                nick = line.param(0).to_owned();
            }
            "005" => {
                for token in line.params() {
                    if let Some(value) = token.strip_prefix("CASEMAPPING=") {
                        casemapping = Casemapping::from_isupport(value);
                    }
                }
            }
            "376" | "422" if welcomed => return Ok(Registered { nick, casemapping }),
            "464" | "465" | "ERROR" => {
                return Err(ChannelError::Refused(format!(
                    "the server refused {nick}: {text}"
                )));
            }
            _ => {}
        }
    }
}

/// The nicks to try: the wanted one, then with 2, 3, … appended; `shorten` cuts to nine
/// characters (RFC 1459's limit) for a server that refuses long nicks.
struct Nicks {
    base: String,
    tried: u32,
}

impl Nicks {
    fn new(wanted: &str) -> Self {
        Self {
            base: wanted.to_owned(),
            tried: 0,
        }
    }

    fn next(&mut self) -> Option<String> {
        self.tried += 1;
        match self.tried {
            1 => Some(self.base.clone()),
            n if n <= NICK_TRIES + 1 => Some(format!("{}{n}", self.base)),
            _ => None,
        }
    }

    fn shorten(&mut self) -> Option<String> {
        if self.base.chars().count() <= 8 {
            return None;
        }
        self.base = self.base.chars().take(8).collect();
        self.tried = 0;
        self.next()
    }
}

/// The SASL PLAIN response (`nick\0nick\0password`) in base64, in 400-byte chunks; a `+`
/// follows a response that is an exact multiple of 400 bytes.
fn sasl_plain(nick: &str, password: &str) -> Vec<String> {
    use base64::Engine;
    let encoded = base64::engine::general_purpose::STANDARD
        .encode(format!("{nick}\0{nick}\0{password}").as_bytes());
    let mut chunks: Vec<String> = encoded
        .as_bytes()
        .chunks(400)
        .map(|c| String::from_utf8_lossy(c).into_owned())
        .collect();
    if encoded.len() % 400 == 0 {
        chunks.push("+".to_owned());
    }
    chunks
}

fn message(command: &str, params: &[&str]) -> Result<Message, ChannelError> {
    Message::new(command, params).map_err(|e| ChannelError::Invalid(format!("{command}: {e}")))
}

fn message_pong(ping: &Message) -> Result<Message, ChannelError> {
    message("PONG", &[ping.param(0)])
}

async fn send<W: AsyncWrite + Unpin>(write: &mut W, message: &Message) -> Result<(), ChannelError> {
    send_raw(write, &message.to_line()).await
}

async fn send_raw<W: AsyncWrite + Unpin>(write: &mut W, line: &str) -> Result<(), ChannelError> {
    let mut bytes = Vec::with_capacity(line.len() + 2);
    bytes.extend_from_slice(line.as_bytes());
    bytes.extend_from_slice(b"\r\n");
    write
        .write_all(&bytes)
        .await
        .map_err(|e| ChannelError::Connection(format!("cannot write to the server: {e}")))?;
    write
        .flush()
        .await
        .map_err(|e| ChannelError::Connection(format!("cannot write to the server: {e}")))
}

/// Reads lines and parses them; lines that are not IRC are skipped, and so is a line over
/// [`READ_MAX_BYTES`]. Cancel-safe: the bytes of a line a cancelled call had read stay in
/// the buffer and the next call goes on from them, so a timeout never splits a line in two.
#[derive(Default)]
struct Lines {
    buf: Vec<u8>,
    /// Inside an overlong line: drop everything to its end.
    skipping: bool,
}

impl Lines {
    /// The next line, `None` at the end of the stream; the flag says invalid UTF-8 was
    /// replaced.
    async fn next<R: AsyncRead + Unpin>(
        &mut self,
        read: &mut BufReader<R>,
    ) -> Result<Option<(Message, bool)>, ChannelError> {
        loop {
            let room = READ_MAX_BYTES.saturating_sub(self.buf.len()).max(1);
            let n = (&mut *read)
                .take(room as u64)
                .read_until(b'\n', &mut self.buf)
                .await
                .map_err(|e| {
                    ChannelError::Connection(format!("cannot read from the server: {e}"))
                })?;
            if n == 0 {
                return Ok(None);
            }
            if self.buf.last() != Some(&b'\n') {
                if self.buf.len() >= READ_MAX_BYTES {
                    self.buf.clear();
                    self.skipping = true;
                }
                continue;
            }
            let mut line = std::mem::take(&mut self.buf);
            if std::mem::take(&mut self.skipping) {
                continue;
            }
            while matches!(line.last(), Some(b'\n' | b'\r')) {
                line.pop();
            }
            let text = String::from_utf8_lossy(&line);
            let lossy = matches!(text, std::borrow::Cow::Owned(_));
            match Message::parse(&text) {
                Ok(message) => return Ok(Some((message, lossy))),
                Err(err) => tracing::debug!(%err, line = %text, "skipped a line that is not IRC"),
            }
        }
    }
}

async fn read_loop<R: AsyncRead + Unpin>(
    mut read: BufReader<R>,
    id: u64,
    events: mpsc::Sender<(u64, ConnEvent)>,
    urgent: mpsc::UnboundedSender<String>,
) {
    let mut lines = Lines::default();
    let mut pinged = false;
    let reason = loop {
        let line = match tokio::time::timeout(IDLE, lines.next(&mut read)).await {
            Err(_) if pinged => {
                break format!("no word from the server for {}s", 2 * IDLE.as_secs());
            }
            Err(_) => {
                pinged = true;
                if urgent.send("PING :reef".to_owned()).is_err() {
                    break "the writer stopped".to_owned();
                }
                continue;
            }
            Ok(Err(err)) => break err.to_string(),
            Ok(Ok(None)) => break "the server closed the connection".to_owned(),
            Ok(Ok(Some(line))) => line,
        };
        pinged = false;
        let (message, lossy) = line;
        match message.command() {
            "PING" => {
                if let Ok(pong) = message_pong(&message)
                    && urgent.send(pong.to_line()).is_err()
                {
                    break "the writer stopped".to_owned();
                }
            }
            "PONG" => {}
            _ => {
                if events
                    .send((id, ConnEvent::Line { message, lossy }))
                    .await
                    .is_err()
                {
                    return;
                }
            }
        }
    };
    // The channel may be gone already; then nobody needs to know.
    let _closed = events.send((id, ConnEvent::Closed(reason))).await;
}

async fn write_loop<W: AsyncWrite + Unpin>(
    mut write: W,
    mut lines: mpsc::Receiver<String>,
    mut urgent: mpsc::UnboundedReceiver<String>,
    mut flood: Flood,
    queued: Arc<AtomicUsize>,
) {
    loop {
        let line = tokio::select! {
            biased;
            Some(line) = urgent.recv() => line,
            Some(line) = lines.recv() => {
                // Wait for a token; urgent lines go out meanwhile.
                loop {
                    match flood.take(Instant::now()) {
                        Ok(()) => break,
                        Err(wait) => tokio::select! {
                            biased;
                            Some(line) = urgent.recv() => {
                                if write_urgent(&mut write, &line).await.is_err() {
                                    return;
                                }
                            }
                            () = tokio::time::sleep(wait) => {}
                        },
                    }
                }
                queued.fetch_sub(1, Ordering::Relaxed);
                line
            }
            else => break,
        };
        let quitting = line.starts_with("QUIT");
        if send_raw(&mut write, &line).await.is_err() || quitting {
            break;
        }
    }
    // Best effort: the connection is going away either way.
    let _shutdown = write.shutdown().await;
}

/// Writes an urgent line; after QUIT the writer must stop, reported as an error.
async fn write_urgent<W: AsyncWrite + Unpin>(write: &mut W, line: &str) -> Result<(), ()> {
    send_raw(write, line).await.map_err(|_| ())?;
    if line.starts_with("QUIT") {
        return Err(());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn taken_nicks_get_a_number_and_long_ones_are_cut() {
        let mut nicks = Nicks::new("ada");
        assert_eq!(nicks.next().as_deref(), Some("ada"));
        assert_eq!(nicks.next().as_deref(), Some("ada2"));
        for _ in 3..=NICK_TRIES + 1 {
            assert!(nicks.next().is_some());
        }
        assert_eq!(nicks.next(), None);
        let mut long = Nicks::new("a-very-long-agent-name");
        assert_eq!(long.next().as_deref(), Some("a-very-long-agent-name"));
        assert_eq!(long.shorten().as_deref(), Some("a-very-l"));
        assert_eq!(long.next().as_deref(), Some("a-very-l2"));
        assert_eq!(long.shorten(), None);
    }

    #[tokio::test]
    async fn a_line_cut_by_a_cancelled_read_is_not_split_in_two() {
        use tokio::io::AsyncWriteExt;
        let (mut server, client) = tokio::io::duplex(64 * 1024);
        let mut read = BufReader::new(client);
        let mut lines = Lines::default();
        server
            .write_all(b":alice!a@h PRIVMSG #control :hel")
            .await
            .unwrap();
        // The read is cancelled in the middle of the line, as the idle timeout does.
        let cut = tokio::time::timeout(Duration::from_millis(50), lines.next(&mut read)).await;
        assert!(cut.is_err());
        server.write_all(b"lo\r\n:x PRIVMSG #y :").await.unwrap();
        server.write_all(&[b'z'; READ_MAX_BYTES]).await.unwrap();
        server.write_all(b"\r\nPING :t\r\n").await.unwrap();
        let (message, _) = lines.next(&mut read).await.unwrap().unwrap();
        assert_eq!(message.prefix(), Some("alice!a@h"));
        assert_eq!(message.params(), ["#control", "hello"]);
        // The overlong line is skipped whole; the next one is read.
        let (message, _) = lines.next(&mut read).await.unwrap().unwrap();
        assert_eq!(message.command(), "PING");
    }

    #[test]
    fn sasl_plain_is_base64_of_nick_nick_password() {
        assert_eq!(
            sasl_plain("jilles", "sesame"),
            ["amlsbGVzAGppbGxlcwBzZXNhbWU="]
        );
        let long = sasl_plain("n", &"p".repeat(296));
        // 1 + 1 + 1 + 1 + 296 = 300 bytes encode to exactly 400 characters, then a `+`.
        assert_eq!(long.len(), 2);
        assert_eq!(long[0].len(), 400);
        assert_eq!(long[1], "+");
    }
}
