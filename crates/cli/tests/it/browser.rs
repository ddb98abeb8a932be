//! Headless Chromium driven through ChromeDriver (WebDriver), for the dashboard's tests, with
//! screenshots saved under the target directory for a reviewer to look at.

use fantoccini::elements::Element;
use fantoccini::{Client, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
/// How long a page gets to show what a test waits for.
const WAIT: Duration = Duration::from_secs(30);

/// A browser session; call [`Browser::close`] at the end (dropping only kills the driver).
pub(crate) struct Browser {
    driver: Child,
    pub client: Client,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// Starts ChromeDriver on a free port and a headless Chromium session in a new profile,
    /// with a window of `width`×`height`.
    pub(crate) async fn start(width: u32, height: u32) -> Browser {
        assert!(
            std::path::Path::new(CHROMEDRIVER).exists() && std::path::Path::new(CHROMIUM).exists(),
            "the dashboard tests need Debian's chromium and chromium-driver (.ci/run installs them)"
        );
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let driver = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let status = format!("http://127.0.0.1:{port}/status");
        let http = reef_llm::http_client(Some(Duration::from_secs(5))).unwrap();
        let mut ready = false;
        for _ in 0..500 {
            if let Ok(resp) = http.get(&status).send().await
                && resp.status().is_success()
            {
                ready = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(ready, "chromedriver did not start on port {port}");
        let profile = tempfile::tempdir().unwrap();
        let mut caps = serde_json::Map::new();
        caps.insert(
            "goog:chromeOptions".into(),
            serde_json::json!({
                "binary": CHROMIUM,
                "args": [
                    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic",
                    "--no-first-run", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync",
                    "--disable-dev-shm-usage",
                    format!("--window-size={width},{height}"),
                    format!("--user-data-dir={}", profile.path().display()),
                ],
            }),
        );
        let client = ClientBuilder::new(HttpConnector::new())
            .capabilities(caps)
            .connect(&format!("http://127.0.0.1:{port}"))
            .await
            .unwrap();
        client.set_window_size(width, height).await.unwrap();
        Browser {
            driver,
            client,
            _profile: profile,
        }
    }

    pub(crate) async fn goto(&self, url: &str) {
        self.client.goto(url).await.unwrap();
    }

    /// The first element matching `css`, waiting for it to appear.
    pub(crate) async fn find(&self, css: &str) -> Element {
        match self
            .client
            .wait()
            .at_most(WAIT)
            .for_element(Locator::Css(css))
            .await
        {
            Ok(element) => element,
            Err(err) => panic!(
                "{css} never appeared ({err}); page:\n{}",
                self.source().await
            ),
        }
    }

    /// Waits until the element at `css` has text containing `text`.
    pub(crate) async fn wait_text(&self, css: &str, text: &str) -> String {
        for _ in 0..(WAIT.as_millis() / 50) {
            if let Ok(element) = self.client.find(Locator::Css(css)).await
                && let Ok(seen) = element.text().await
                && seen.contains(text)
            {
                return seen;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!(
            "{css} never showed {text:?}; page:\n{}",
            self.source().await
        );
    }

    /// Types `text` into the field at `css`.
    pub(crate) async fn fill(&self, css: &str, text: &str) {
        let field = self.find(css).await;
        field.clear().await.unwrap();
        field.send_keys(text).await.unwrap();
    }

    pub(crate) async fn click(&self, css: &str) {
        self.find(css).await.click().await.unwrap();
    }

    pub(crate) async fn source(&self) -> String {
        self.client.source().await.unwrap_or_default()
    }

    /// Runs `script` in the page and returns what it returns.
    pub(crate) async fn eval(&self, script: &str) -> serde_json::Value {
        self.client.execute(script, Vec::new()).await.unwrap()
    }

    /// Saves a screenshot as `target/tmp/dashboard-screenshots/NAME.png`.
    pub(crate) async fn screenshot(&self, name: &str) -> PathBuf {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("dashboard-screenshots");
        std::fs::create_dir_all(&dir).unwrap();
        let png = self.client.screenshot().await.unwrap();
        assert!(png.starts_with(b"\x89PNG"), "a screenshot is a PNG");
        let path = dir.join(format!("{name}.png"));
        std::fs::write(&path, png).unwrap();
        path
    }

    /// Ends the browser session and the driver.
    pub(crate) async fn close(mut self) {
        let _ = self.client.clone().close().await;
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}
