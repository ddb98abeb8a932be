//! What the operator changes from the page: spawn, the agent controls, answers and
//! approvals. Each answers with a short notice the page shows in place (htmx swaps it in);
//! the live stream then shows the effect.

use crate::Dash;
use crate::pages::failure;
use crate::view::{SpawnValues, escape};
use axum::extract::{Form, Path, State};
use axum::http::{HeaderName, StatusCode};
use axum::response::{IntoResponse, Response};
use reef_runtime::{RuntimeError, Sender, SpawnRequest};
use reef_store::{PendingItem, PendingStatus};
use serde::Deserialize;

const HX_REDIRECT: HeaderName = HeaderName::from_static("hx-redirect");

/// A notice shown where the form was (escaped: it may quote what the operator typed).
fn notice(status: StatusCode, text: &str) -> Response {
    let class = if status.is_success() { "ok" } else { "error" };
    let html = format!(
        r#"<p class="notice {class}" role="status">{}</p>"#,
        escape(text)
    );
    (status, axum::response::Html(html)).into_response()
}

fn redirect(to: &str) -> Response {
    (StatusCode::OK, [(HX_REDIRECT, to.to_owned())]).into_response()
}

fn optional(text: &str) -> Option<String> {
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_owned())
}

/// `POST /spawn`.
pub(crate) async fn spawn(State(d): State<Dash>, Form(form): Form<SpawnValues>) -> Response {
    let request = SpawnRequest {
        name: form.name.trim().to_owned(),
        template: form.template.clone(),
        model: optional(&form.model),
        persona: optional(&form.persona),
        task: optional(&form.task),
        ephemeral: false,
        budget: None,
    };
    match d.runtime.spawn_agent(request, None).await {
        Ok(spawned) => redirect(&format!("/agents/{}", spawned.agent.name)),
        // The form stays as it was typed; the notice says what to change.
        Err(err) => notice(failure(&err).status(), &err.to_string()),
    }
}

/// The fields the agent controls send (each uses some).
#[derive(Deserialize, Default)]
pub(crate) struct AgentForm {
    #[serde(default)]
    text: String,
    #[serde(default)]
    key: String,
    #[serde(default)]
    model: String,
    #[serde(default)]
    persona: String,
    #[serde(default)]
    confirm: String,
    #[serde(default)]
    purge: Option<String>,
}

/// `POST /agents/{name}/do/{action}`.
pub(crate) async fn agent(
    State(d): State<Dash>,
    Path((name, action)): Path<(String, String)>,
    Form(form): Form<AgentForm>,
) -> Response {
    let rt = &d.runtime;
    let reason = "by the operator on the dashboard";
    let done: Result<String, RuntimeError> = match action.as_str() {
        "send" => {
            let key = optional(&form.key)
                .unwrap_or_else(|| format!("dashboard:{}", crate::auth::random_hex()));
            return match rt
                .send_message(&name, Sender::Operator, &form.text, &key, None)
                .await
            {
                // The form gets a new key for the next message.
                Ok(_) => {
                    let html = format!(
                        r#"<p class="notice ok" role="status">sent</p><input type="hidden" name="key" id="send-key" value="dashboard:{}" hx-swap-oob="true">"#,
                        crate::auth::random_hex()
                    );
                    (StatusCode::OK, axum::response::Html(html)).into_response()
                }
                Err(err) => notice(failure(&err).status(), &err.to_string()),
            };
        }
        "pause" => rt
            .pause_agent(&name, reason)
            .await
            .map(|_| "paused".to_owned()),
        "resume" => rt
            .resume_agent(&name, reason)
            .await
            .map(|_| "resumed".to_owned()),
        "stop" => rt
            .stop_agent(&name, reason)
            .await
            .map(|_| "stopped".to_owned()),
        "model" => rt.set_agent_model(&name, form.model.trim()).await.map(|a| {
            format!(
                "now on {}",
                a.model.as_deref().unwrap_or("the default model")
            )
        }),
        "persona" => rt
            .set_agent_persona(&name, &form.persona)
            .await
            .map(|_| "persona saved".to_owned()),
        "compact" => rt.compact_agent(&name).await.map(|msg| match msg {
            reef_core::EventMsg::ContextCompacted {
                tokens_before,
                tokens_after,
                ..
            } => format!("compacted: {tokens_before} → {tokens_after} tokens"),
            _ => "nothing to compact".to_owned(),
        }),
        "destroy" => {
            if form.confirm.trim() != name {
                return notice(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    &format!("type the agent's name ({name}) to confirm"),
                );
            }
            let purge = form.purge.is_some();
            return match rt.destroy_agent(&name, purge).await {
                Ok(()) => redirect("/"),
                Err(err) => notice(failure(&err).status(), &err.to_string()),
            };
        }
        _ => return notice(StatusCode::NOT_FOUND, &format!("no action {action}")),
    };
    match done {
        Ok(text) => notice(StatusCode::OK, &text),
        Err(err) => notice(failure(&err).status(), &err.to_string()),
    }
}

/// The answer fields.
#[derive(Deserialize, Default)]
pub(crate) struct AnswerForm {
    #[serde(default)]
    answer: String,
    #[serde(default)]
    reason: String,
}

/// `POST /pending/{id}/{answer|approve|deny}`.
pub(crate) async fn pending(
    State(d): State<Dash>,
    Path((id, action)): Path<(String, String)>,
    Form(form): Form<AnswerForm>,
) -> Response {
    let rt = &d.runtime;
    let done = match action.as_str() {
        "answer" => rt.answer(&id, form.answer.trim()).await,
        "approve" => rt.approve(&id).await,
        "deny" => rt.deny(&id, optional(&form.reason).as_deref()).await,
        _ => return notice(StatusCode::NOT_FOUND, &format!("no action {action}")),
    };
    match done {
        Ok(item) => notice(StatusCode::OK, &resolution(&item, None)),
        Err(err) => match rt.get_pending(&id).await {
            // Someone else was first: say who, rather than fail.
            Ok(item) if item.status != PendingStatus::Pending => {
                // Answers from the API and the dashboard record no name: an operator's.
                let by = answered_by(&d, &item).await;
                let by = by.as_deref().unwrap_or("another operator");
                notice(StatusCode::OK, &resolution(&item, Some(by)))
            }
            _ => notice(failure(&err).status(), &err.to_string()),
        },
    }
}

fn resolution(item: &PendingItem, by: Option<&str>) -> String {
    let answer = item.answer.as_deref().unwrap_or_default();
    match (item.status, by) {
        (PendingStatus::Answered, Some(by)) => format!("already answered by {by}: {answer}"),
        (PendingStatus::Answered, None) => format!("answered: {answer}"),
        (status, _) => format!("already {}", status.as_str()),
    }
}

/// Who resolved `item`, from the event that recorded it.
async fn answered_by(d: &Dash, item: &PendingItem) -> Option<String> {
    let kind = format!("{}.answered", item.kind.as_str());
    let events = d
        .runtime
        .store()
        .events_tail(item.agent_id.as_ref(), 500)
        .await
        .ok()?;
    events
        .iter()
        .rev()
        .find(|e| e.kind == kind && e.data["id"] == item.id.as_str())
        .and_then(|e| e.data["by"].as_str().map(str::to_owned))
}
