//! The dashboard in a real browser (headless Chromium) against a real `reef serve` with the
//! mock model and the default sandbox: sign-in (a wrong token first), spawn from the form,
//! the conversation arriving live (a tool call, its result, the answer), a question answered
//! with an option button, pause and resume, destroy behind its confirmation, markup from the
//! agent shown as text, and requests from another origin or without the CSRF token refused.
//! Screenshots of each view at 1280×800 and 420×800 go to `target/tmp/dashboard-screenshots`.

use crate::browser::Browser;
use crate::daemon::{Daemon, daemon_home};
use crate::reef;
use reef_test_support::{MockLlm, MockReply, RecordedRequest};
use serde_json::json;
use std::sync::Arc;

/// What the agent writes: markup that must stay text.
const PAYLOAD: &str = "<img src=x onerror=window.pwned=1><script>window.pwned=2</script>";

fn model(req: &RecordedRequest) -> MockReply {
    let input = req.last_user_text().unwrap_or_default();
    if req.agent() != "ada" {
        return MockReply::text("done");
    }
    if input.contains("Answer to your question") {
        let choice = input.lines().last().unwrap_or_default().to_owned();
        return MockReply::text(format!("the operator chose {choice}"));
    }
    if input.contains("colour") {
        if req.ends_with_tool_result() {
            return MockReply::text("Asked the operator; waiting.");
        }
        return MockReply::tool_call(
            "ask_operator",
            json!({"question": "Which colour?", "options": ["red", "blue"]}),
        );
    }
    if input.contains("haiku") {
        if req.ends_with_tool_result() {
            return MockReply::text(format!("haiku.txt is written {PAYLOAD}"));
        }
        return MockReply::tool_call(
            "shell",
            json!({"command": format!("printf '%s' '{PAYLOAD}' > haiku.txt && cat haiku.txt")}),
        );
    }
    MockReply::text("done")
}

/// Screenshots of the current page at both sizes, then back to the wide window.
async fn shots(browser: &Browser, view: &str) {
    browser.screenshot(&format!("{view}-1280x800")).await;
    browser.client.set_window_size(420, 800).await.unwrap();
    browser.screenshot(&format!("{view}-420x800")).await;
    browser.client.set_window_size(1280, 800).await.unwrap();
}

#[tokio::test]
async fn an_operator_runs_an_agent_from_the_dashboard() {
    let mock = MockLlm::start_responder(Arc::new(model)).await;
    let home = daemon_home(&mock);
    let daemon = Daemon::start(&home).await;
    let base = daemon.base().to_owned();
    let browser = Browser::start(1280, 800).await;

    // Signed out: the page sends the browser to the login form.
    browser.goto(&format!("{base}/")).await;
    browser.find("#token").await;
    shots(&browser, "login").await;
    browser.fill("#token", "not-the-token").await;
    browser.click("form button[type=submit]").await;
    browser
        .wait_text("#login-error", "not the daemon's API token")
        .await;
    browser.fill("#token", daemon.token()).await;
    browser.click("form button[type=submit]").await;
    browser.wait_text("#agents", "No agents yet").await;
    shots(&browser, "overview-empty").await;

    // Spawn from the form: the agent page shows the turn live.
    browser.click("nav a[href='/spawn']").await;
    browser.fill("#name", "ada").await;
    browser.click("#template option[value='worker']").await;
    browser.fill("#task", "write a haiku").await;
    shots(&browser, "spawn").await;
    browser.click("form.spawn button[type=submit]").await;
    browser.wait_text("#transcript", "shell").await;
    // A taken name: the form says so and keeps what was typed.
    browser.goto(&format!("{base}/spawn")).await;
    browser.fill("#name", "ada").await;
    browser.fill("#task", "another haiku").await;
    browser.click("form.spawn button[type=submit]").await;
    browser.wait_text("#spawn-result", "ada").await;
    let kept = browser
        .eval("return document.getElementById('task').value")
        .await;
    assert_eq!(kept, json!("another haiku"));
    browser.goto(&format!("{base}/agents/ada")).await;
    browser
        .wait_text("#transcript", "haiku.txt is written")
        .await;
    // The command's output and the answer carry markup: shown, never run.
    let transcript = browser
        .wait_text("#transcript", "onerror=window.pwned=1")
        .await;
    assert!(
        transcript.contains("<script>window.pwned=2</script>"),
        "{transcript}"
    );
    let pwned = browser
        .eval("return [window.pwned === undefined, document.querySelectorAll('#transcript img, #transcript script').length]")
        .await;
    assert_eq!(pwned, json!([true, 0]), "markup from the agent ran");
    // Each step once, whether it came with the page or live.
    let calls = browser
        .eval("return document.querySelectorAll('#transcript [data-key^=\"call-\"]').length")
        .await;
    assert_eq!(calls, json!(1), "{}", browser.source().await);
    let workspace = home.reef_home().join("agents/ada/workspace/haiku.txt");
    assert_eq!(std::fs::read_to_string(workspace).unwrap(), PAYLOAD);
    browser.wait_text("#agent-state", "running").await;
    shots(&browser, "agent").await;

    // A question with options, answered with a button on the overview.
    browser.click("nav a[href='/']").await;
    browser.wait_text("#agents", "ada").await;
    daemon
        .post(
            "/v1/agents/ada/messages",
            json!({"text": "pick a colour for the banner"}),
        )
        .await;
    browser.wait_text("#pending", "Which colour?").await;
    shots(&browser, "overview-question").await;
    browser.click("#pending button[value='blue']").await;
    browser.wait_text("#pending", "Nothing waits").await;
    daemon
        .wait(
            "ada to continue with the answer",
            "/v1/events?agent=ada&kind=turn.ended",
            |e| e.to_string().contains("the operator chose blue"),
        )
        .await;
    let asked = mock
        .requests()
        .into_iter()
        .filter(|r| r.agent() == "ada")
        .filter_map(|r| r.last_user_text())
        .any(|t| t.contains("Answer to your question") && t.contains("blue"));
    assert!(asked, "the model was sent the operator's answer");

    // Pause and resume from the agent page; the state changes without a reload.
    browser.click("#agents a[href='/agents/ada']").await;
    browser.wait_text("#agent-state", "running").await;
    browser
        .click("form[hx-post='/agents/ada/do/pause'] button")
        .await;
    browser.wait_text("#agent-state", "paused").await;
    assert_eq!(daemon.get("/v1/agents/ada").await["state"], "paused");
    browser
        .click("form[hx-post='/agents/ada/do/resume'] button")
        .await;
    browser.wait_text("#agent-state", "running").await;

    // Requests from elsewhere are refused, with the session cookie or not.
    let port = base.rsplit(':').next().unwrap().to_owned();
    let cookie_name = format!("reef_session_{port}");
    let cookie = browser.client.get_named_cookie(&cookie_name).await.unwrap();
    let csrf = browser
        .eval("return JSON.parse(document.body.getAttribute('hx-headers'))['x-csrf-token']")
        .await;
    let csrf = csrf.as_str().unwrap().to_owned();
    let http = reef_llm::http_client(None).unwrap();
    let pause = format!("{base}/agents/ada/do/pause");
    let send = |origin: &str, token: Option<&str>| {
        let mut req = http
            .post(&pause)
            .header("cookie", format!("{cookie_name}={}", cookie.value()))
            .header("origin", origin)
            .header("content-type", "application/x-www-form-urlencoded")
            .body("");
        if let Some(token) = token {
            req = req.header("x-csrf-token", token);
        }
        req.send()
    };
    let foreign = send("http://evil.example", Some(&csrf)).await.unwrap();
    assert_eq!(foreign.status(), 403);
    let without_csrf = send(&base, None).await.unwrap();
    assert_eq!(without_csrf.status(), 403);
    let wrong_csrf = send(&base, Some("0000")).await.unwrap();
    assert_eq!(wrong_csrf.status(), 403);
    assert_eq!(daemon.get("/v1/agents/ada").await["state"], "running");
    let rebound = http
        .get(format!("{base}/"))
        .header("host", format!("evil.example:{port}"))
        .header("cookie", format!("{cookie_name}={}", cookie.value()))
        .send()
        .await
        .unwrap();
    assert_eq!(rebound.status(), 403, "a foreign Host (DNS rebinding)");
    // The same request from the page's origin with its token works.
    let allowed = send(&base, Some(&csrf)).await.unwrap();
    assert_eq!(allowed.status(), 200);
    assert_eq!(daemon.get("/v1/agents/ada").await["state"], "paused");

    // Destroy needs the name typed; then the overview is empty again.
    browser
        .click("form[hx-post='/agents/ada/do/destroy'] button")
        .await;
    browser
        .wait_text("#destroy-result", "type the agent's name")
        .await;
    browser.fill("#confirm", "ada").await;
    browser
        .click("form[hx-post='/agents/ada/do/destroy'] button")
        .await;
    browser.wait_text("#agents", "No agents yet").await;
    assert_eq!(daemon.get("/v1/agents").await, json!([]));

    browser.close().await;
}

#[tokio::test]
async fn reef_dashboard_prints_a_link_that_signs_in_once() {
    let mock = MockLlm::start_responder(Arc::new(model)).await;
    let home = daemon_home(&mock);
    let daemon = Daemon::start(&home).await;
    let out = reef(&home)
        .args(["dashboard", "--no-open"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let url = text
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("no link in {text}"));
    assert!(
        url.starts_with(&format!("{}/login/", daemon.base())),
        "{url}"
    );
    let http = reef_llm::http_client_without_redirects(None).unwrap();
    // Opening the link (or a preview fetching it) only shows a button.
    let shown = http.get(url).send().await.unwrap();
    assert_eq!(shown.status(), 200);
    assert!(shown.text().await.unwrap().contains("use-link"));
    let use_link = || http.post(url).header("origin", daemon.base()).send();
    let first = use_link().await.unwrap();
    assert_eq!(first.status(), 303);
    let cookie = first.headers()["set-cookie"].to_str().unwrap().to_owned();
    let port = daemon.base().rsplit(':').next().unwrap();
    let name = format!("reef_session_{port}=");
    for part in [
        &name[..],
        "HttpOnly",
        "SameSite=Strict",
        "Max-Age=",
        "Path=/",
    ] {
        assert!(cookie.contains(part), "{cookie}");
    }
    assert!(!cookie.contains("Secure"), "plain HTTP: {cookie}");
    let session = cookie.split(';').next().unwrap().to_owned();
    let overview = http
        .get(format!("{}/", daemon.base()))
        .header("cookie", &session)
        .send()
        .await
        .unwrap();
    assert_eq!(overview.status(), 200);
    let csp = overview.headers()["content-security-policy"]
        .to_str()
        .unwrap();
    assert!(
        csp.contains("script-src 'self'") && !csp.contains("unsafe"),
        "{csp}"
    );
    assert!(overview.text().await.unwrap().contains("No agents yet"));
    // Used up.
    let again = use_link().await.unwrap();
    assert_eq!(again.status(), 401);
    // Without the page's Origin the link is not taken.
    let link = reef(&home)
        .args(["dashboard", "--no-open"])
        .output()
        .unwrap();
    let link = String::from_utf8_lossy(&link.stdout).into_owned();
    let url = link
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap();
    let foreign = http
        .post(url)
        .header("origin", "http://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(foreign.status(), 403);
    // The bearer-token API is unchanged.
    assert_eq!(daemon.get("/v1/agents").await, json!([]));
}
