//! The dashboard in a real browser (headless Chromium) against a real `reef serve` with the
//! mock model and the default sandbox: sign-in (a wrong token first), spawn from the form,
//! the conversation arriving live (a tool call, its result, the answer), a question answered
//! with an option button, pause and resume, destroy behind its confirmation, markup from the
//! agent shown as text, and requests from another origin or without the CSRF token refused;
//! then a command approved and its output in the conversation, the agent's memory, notes and
//! workspace, the cost page against `reef cost --json`, the events search and its live tail,
//! and an answer that lost its race; then routine and job health on the overview, and a shell
//! in the agent's sandbox (off unless `[dashboard] terminal = true`) with its recorded session
//! and its socket's refusals.
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
    assert!(
        !browser.source().await.contains("open-terminal"),
        "the terminal is off by default"
    );
    let off = http_get(&daemon, &browser, "/agents/ada/terminal").await;
    assert!(off.contains("The terminal is off"), "{off}");
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

/// What agent `bob` does in the tour of the other views.
fn tour_model(req: &RecordedRequest) -> MockReply {
    let input = req.last_user_text().unwrap_or_default();
    if req.ends_with_tool_result() {
        return MockReply::text("done");
    }
    if input.contains("clean the build") {
        return MockReply::tool_call("shell", json!({"command": SWEEP}));
    }
    if input.contains("remember") {
        return MockReply::tool_call(
            "memory_save",
            json!({"text": "Deploys happen on <b>Fridays</b>", "tags": ["deploy"]}),
        );
    }
    if input.contains("write notes") {
        return MockReply::tool_call("shell", json!({"command": NOTES}));
    }
    if input.contains("colour") {
        return MockReply::tool_call(
            "ask_operator",
            json!({"question": "Which colour?", "options": ["red", "blue"]}),
        );
    }
    MockReply::text("done")
}

/// A command that needs the operator's approval; its output (`swept-42`) is not in its text.
const SWEEP: &str = "mkdir -p build && rm -rf build && echo swept-$((6*7))";
/// The workspace the file browser is shown: notes, a folder, a link out, a large file.
const NOTES: &str = "printf '# Notes\\nbuy milk\\n' > MEMORY.md && mkdir -p docs \
     && printf 'hello docs' > docs/readme.txt && ln -s /etc/passwd passwd-link \
     && head -c 300000 /dev/zero > big.bin";

async fn sign_in(browser: &Browser, daemon: &Daemon) {
    browser.goto(&format!("{}/login", daemon.base())).await;
    browser.fill("#token", daemon.token()).await;
    browser.click("form button[type=submit]").await;
    browser.find("#agents").await;
}

#[tokio::test]
async fn approvals_costs_events_memory_and_the_workspace_in_the_dashboard() {
    let mock = MockLlm::start_responder(Arc::new(tour_model)).await;
    let home = daemon_home(&mock);
    let config = std::fs::read_to_string(home.config_path()).unwrap();
    home.write_config(&format!(
        "{config}\n[prices.mock-model]\ninput = 3.0\noutput = 15.0\n"
    ));
    let daemon = Daemon::start(&home).await;
    let base = daemon.base().to_owned();
    let browser = Browser::start(1280, 800).await;
    sign_in(&browser, &daemon).await;

    // An approval shows the exact command; approving runs it and its output reaches the
    // conversation.
    daemon
        .post(
            "/v1/agents",
            json!({"name": "bob", "template": "worker", "task": "clean the build"}),
        )
        .await;
    let command = browser.wait_text("#pending .command", "rm -rf build").await;
    assert_eq!(command, SWEEP);
    shots(&browser, "overview-approval").await;
    browser.click("#pending button.approve").await;
    browser.wait_text("#pending", "Nothing waits").await;
    browser.click("#agents a[href='/agents/bob']").await;
    browser.wait_text("#transcript", "swept-42").await;

    // Memory: listed as text, searched, forgotten.
    daemon
        .post(
            "/v1/agents/bob/messages",
            json!({"text": "remember the deploy day"}),
        )
        .await;
    daemon
        .post("/v1/agents/bob/messages", json!({"text": "write notes"}))
        .await;
    daemon
        .wait("bob's notes", "/v1/events?agent=bob&kind=turn.ended", |e| {
            // The sweep, the approval's news, the memory, the notes.
            e.as_array().is_some_and(|a| a.len() >= 4)
        })
        .await;
    browser.goto(&format!("{base}/agents/bob")).await;
    let memories = browser
        .wait_text("#memories", "Deploys happen on <b>Fridays</b>")
        .await;
    assert!(memories.contains("agent:bob"), "{memories}");
    browser.fill("#memory-query", "nothing-like-this").await;
    browser.click("form[role=search] button").await;
    browser.wait_text("#memories", "Nothing found").await;
    browser.fill("#memory-query", "deploys").await;
    browser.click("form[role=search] button").await;
    browser.wait_text("#memories", "Fridays").await;
    // MEMORY.md, and the workspace: a link is listed, never opened; a large file is not shown.
    browser.click("details.notes summary").await;
    browser.wait_text("#notes", "buy milk").await;
    let files = browser.wait_text("#files", "passwd-link").await;
    assert!(files.contains("link, not opened"), "{files}");
    assert!(
        !browser.source().await.contains("root:x:0"),
        "a link was followed"
    );
    browser.click("#files a[hx-get$='path=big.bin']").await;
    browser.wait_text("#files", "larger than").await;
    browser.click("#files nav a").await;
    browser.click("#files a[hx-get$='path=docs']").await;
    browser
        .click("#files a[hx-get$='path=docs%2Freadme.txt']")
        .await;
    browser.wait_text("#files", "hello docs").await;
    browser.wait_text("#spend", "$").await;
    shots(&browser, "agent-inspect").await;
    browser.click("#memories button.deny").await;
    browser.client.accept_alert().await.unwrap();
    browser.wait_text("#memories", "No memories yet").await;
    let left = reef(&home)
        .args(["memory", "list", "--agent", "bob", "--json"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&left.stdout).trim(), "[]");

    // Costs: the same numbers as `reef cost --json`.
    browser.click("nav a[href='/costs']").await;
    browser.find("#cost-total").await;
    // Read in one script: the live stream may replace the element between two WebDriver
    // calls (a stale reference).
    let shown = browser
        .eval("const e = document.querySelector('#cost-total'); return [e.dataset.micros, e.textContent.trim()]")
        .await;
    let micros = shown[0].as_str().unwrap().to_owned();
    let cli = reef(&home).args(["cost", "--json"]).output().unwrap();
    let report: serde_json::Value = serde_json::from_slice(&cli.stdout).unwrap();
    assert_eq!(micros, report["total_cost_micros"].to_string());
    assert_ne!(micros, "0", "priced requests cost something");
    let total = shown[1].as_str().unwrap().to_owned();
    assert_eq!(
        total,
        format!("${:.4}", report["total_cost_usd"].as_f64().unwrap())
    );
    let rows = browser
        .eval("return [...document.querySelectorAll('table.costs tbody tr')].map(r => [r.dataset.agent, r.dataset.provider, r.dataset.model, Number(r.dataset.micros)])")
        .await;
    let expected: Vec<serde_json::Value> = report["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| json!([r["agent"], r["provider"], r["model"], r["cost_micros"]]))
        .collect();
    assert_eq!(rows, json!(expected));
    let bars = browser
        .eval("return document.querySelectorAll('svg.chart rect.bar').length")
        .await;
    assert!(bars.as_u64().unwrap() >= 6, "{bars}");
    shots(&browser, "costs").await;

    // Events: searched by kind and agent, then the live tail adds new ones on top.
    browser.click("nav a[href='/events']").await;
    browser.fill("#kind", "tool.call").await;
    browser.fill("#agent", "bob").await;
    browser.click("form.search button[type=submit]").await;
    // The search is a new page: wait for it before reading its rows.
    browser.wait_text("#kind-shown", "tool.call").await;
    let kinds = browser
        .eval("return [...document.querySelectorAll('#event-rows tr')].map(r => r.dataset.kind)")
        .await;
    assert_eq!(kinds, json!(["tool.call", "tool.call", "tool.call"]));
    shots(&browser, "events").await;
    daemon
        .post(
            "/v1/agents/bob/messages",
            json!({"text": "clean the build"}),
        )
        .await;
    browser
        .wait_text("#event-rows tr:first-child", "mkdir -p build")
        .await;
    let count = browser
        .eval("return document.querySelectorAll('#event-rows tr').length")
        .await;
    assert_eq!(count, json!(4), "{}", browser.source().await);
    let bad = http_get(&daemon, &browser, "/events?from=yesterday").await;
    assert!(bad.contains("from: `yesterday` is not a time"), "{bad}");

    // A question answered elsewhere first: the page says who answered, not an error.
    daemon
        .post("/v1/agents/bob/messages", json!({"text": "pick a colour"}))
        .await;
    let question = |q: &serde_json::Value| {
        q.as_array()
            .and_then(|a| a.iter().find(|i| i["kind"] == "question").cloned())
    };
    let asked = daemon
        .wait("the question", "/v1/questions", |q| question(q).is_some())
        .await;
    let id = question(&asked).unwrap()["id"].as_str().unwrap().to_owned();
    daemon
        .post(
            &format!("/v1/questions/{id}/answer"),
            json!({"text": "red"}),
        )
        .await;
    browser.goto(&format!("{base}/")).await;
    browser
        .eval(&format!(
            "document.body.insertAdjacentHTML('beforeend', '<div id=\"late\"></div>'); \
             htmx.ajax('POST', '/pending/{id}/answer', {{source: '#late', target: '#late', values: {{answer: 'blue'}}}}); \
             return true"
        ))
        .await;
    browser.wait_text("#late", "already answered by").await;

    browser.close().await;
}

/// A page's HTML fetched with the browser's session cookie.
async fn http_get(daemon: &Daemon, browser: &Browser, path: &str) -> String {
    let port = daemon.base().rsplit(':').next().unwrap().to_owned();
    let cookie = browser
        .client
        .get_named_cookie(&format!("reef_session_{port}"))
        .await
        .unwrap();
    reef_llm::http_client(None)
        .unwrap()
        .get(format!("{}{path}", daemon.base()))
        .header("cookie", format!("reef_session_{port}={}", cookie.value()))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

/// Types `keys` into the terminal on the page, then Enter.
async fn type_line(browser: &Browser, keys: &str) {
    let input = browser.find("#terminal .xterm-helper-textarea").await;
    input.send_keys(&format!("{keys}\u{E007}")).await.unwrap();
}

#[tokio::test]
async fn routines_jobs_and_a_terminal_in_the_agents_sandbox() {
    let mock =
        MockLlm::start_responder(Arc::new(|_: &RecordedRequest| MockReply::text("done"))).await;
    let home = daemon_home(&mock);
    let config = std::fs::read_to_string(home.config_path()).unwrap();
    home.write_config(&format!("{config}\n[dashboard]\nterminal = true\n"));
    let daemon = Daemon::start(&home).await;
    let base = daemon.base().to_owned();
    daemon
        .post("/v1/agents", json!({"name": "ada", "template": "worker"}))
        .await;
    let browser = Browser::start(1280, 800).await;
    sign_in(&browser, &daemon).await;

    // Routine and job health on the overview, live: a routine appears with its trigger and
    // next fire; run by hand, its job appears and ends.
    browser
        .wait_text("#health", "No routines or jobs yet")
        .await;
    daemon
        .post(
            "/v1/routines",
            json!({"name": "nightly", "every": "1h", "agent": "ada", "message": "tidy up"}),
        )
        .await;
    let row = browser
        .wait_text("#health tr[data-routine='nightly']", "every 1h")
        .await;
    assert!(row.contains("message ada"), "{row}");
    assert!(row.contains("enabled"), "{row}");
    assert!(row.contains("in 1 h") || row.contains("in 60 min"), "{row}");
    daemon.post("/v1/routines/nightly/run", json!({})).await;
    let job = browser
        .wait_text("#health table.jobs tbody tr:first-child", "completed")
        .await;
    assert!(job.contains("routine nightly"), "{job}");
    assert!(job.contains("ada"), "{job}");
    browser
        .wait_text("#health .jobs-open", "0 running, 0 waiting")
        .await;
    shots(&browser, "overview-routines").await;

    // The terminal: a shell inside ada's sandbox, in its workspace.
    browser.goto(&format!("{base}/agents/ada")).await;
    browser.click("#open-terminal").await;
    browser.wait_text("#terminal-status", "Connected").await;
    let drawn = browser
        .eval("return document.querySelector('#terminal .xterm-rows') !== null")
        .await;
    assert_eq!(drawn, json!(true), "xterm.js drew the terminal");
    browser
        .wait_text("#terminal .xterm-rows", "ada@sandbox")
        .await;
    let token = home.reef_home().join("api-token");
    type_line(
        &browser,
        &format!(
            "echo sum=$((6*7)); hostname; touch from-terminal; cat {} ; echo token=$?",
            token.display()
        ),
    )
    .await;
    let rows = browser.wait_text("#terminal .xterm-rows", "token=1").await;
    assert!(rows.contains("sum=42"), "{rows}");
    assert!(rows.contains("reef-sandbox"), "the hostname inside: {rows}");
    assert!(
        !rows.contains(daemon.token()),
        "the API token was read: {rows}"
    );
    assert!(
        home.reef_home()
            .join("agents/ada/workspace/from-terminal")
            .exists(),
        "the shell works in the agent's workspace"
    );
    // A narrow window: the page tells the shell its new size.
    browser.client.set_window_size(420, 800).await.unwrap();
    type_line(&browser, "stty size | awk '{print \"narrow=\" ($2 < 60)}'").await;
    browser.wait_text("#terminal .xterm-rows", "narrow=1").await;
    browser.screenshot("terminal-420x800").await;
    browser.client.set_window_size(1280, 800).await.unwrap();
    browser.screenshot("terminal-1280x800").await;
    type_line(&browser, "exit 7").await;
    browser.wait_text("#terminal-status", "exit code 7").await;

    // The session is recorded: who, what was typed, the end of what was shown, the exit.
    let opened = daemon
        .get("/v1/events?agent=ada&kind=terminal.opened")
        .await;
    let opened = &opened.as_array().unwrap()[0]["data"];
    assert!(
        opened["by"].as_str().unwrap().starts_with("dashboard"),
        "{opened}"
    );
    assert_eq!(opened["backend"], "landlock", "{opened}");
    let closed = daemon
        .wait(
            "the terminal's record",
            "/v1/events?agent=ada&kind=terminal.closed",
            |e| e.as_array().is_some_and(|a| !a.is_empty()),
        )
        .await;
    let closed = &closed.as_array().unwrap()[0]["data"];
    assert_eq!(closed["terminal"], opened["terminal"]);
    assert_eq!(closed["exit_code"], 7, "{closed}");
    assert_eq!(closed["ended"], "the shell exited", "{closed}");
    assert!(
        closed["typed"]
            .as_str()
            .unwrap()
            .contains("touch from-terminal"),
        "{closed}"
    );
    assert!(
        closed["shown_tail"].as_str().unwrap().contains("sum=42"),
        "{closed}"
    );

    // The socket refuses a request without the page's CSRF token or from another site.
    let csrf = browser
        .eval("return document.body.getAttribute('hx-headers')")
        .await;
    let csrf: serde_json::Value = serde_json::from_str(csrf.as_str().unwrap()).unwrap();
    let csrf = csrf["x-csrf-token"].as_str().unwrap().to_owned();
    let socket = |query: String, origin: &'static str| {
        let base = base.clone();
        let browser = &browser;
        async move {
            let port = base.rsplit(':').next().unwrap().to_owned();
            let cookie = browser
                .client
                .get_named_cookie(&format!("reef_session_{port}"))
                .await
                .unwrap();
            let origin = if origin.is_empty() {
                base.clone()
            } else {
                origin.to_owned()
            };
            reef_llm::http_client(None)
                .unwrap()
                .get(format!("{base}/agents/ada/terminal/socket?{query}"))
                .header("cookie", format!("reef_session_{port}={}", cookie.value()))
                .header("origin", origin)
                .header("connection", "upgrade")
                .header("upgrade", "websocket")
                .header("sec-websocket-version", "13")
                .header("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ==")
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        }
    };
    assert_eq!(socket(String::new(), "").await, 403, "no CSRF token");
    assert_eq!(
        socket("csrf=wrong".into(), "").await,
        403,
        "a wrong CSRF token"
    );
    assert_eq!(
        socket(format!("csrf={csrf}"), "http://evil.example").await,
        403,
        "another site"
    );
    let sessions = daemon
        .get("/v1/events?agent=ada&kind=terminal.opened")
        .await;
    assert_eq!(
        sessions.as_array().unwrap().len(),
        1,
        "a refused socket opened no shell"
    );

    browser.close().await;
}
