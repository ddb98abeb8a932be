//! What the overseer says in the control room about the agents: ends (completed, failed,
//! terminated: crashes and budget stops among them), questions and approvals waiting for an operator.

use reef_core::AgentState;
use reef_store::StoredEvent;
use serde_json::Value;

/// The announcement for `event` about agent `agent`, if it is one.
pub fn announcement(event: &StoredEvent, agent: &str) -> Option<String> {
    let d = &event.data;
    let text = |key: &str| d[key].as_str().unwrap_or_default().to_owned();
    Some(match event.kind.as_str() {
        "agent.state_changed" => {
            let to = d["to"].as_str()?;
            match AgentState::parse(to)? {
                AgentState::Failed | AgentState::Terminated | AgentState::Completed => {
                    let reason = text("reason");
                    if reason.is_empty() {
                        format!("{agent} {to}")
                    } else {
                        format!("{agent} {to}: {reason}")
                    }
                }
                _ => return None,
            }
        }
        "agent.destroyed" => format!("{} was destroyed", d["name"].as_str().unwrap_or(agent)),
        "question.created" => {
            let id = text("id");
            let question = d["payload"]["question"].as_str().unwrap_or_default();
            let options = match &d["payload"]["options"] {
                Value::Array(options) if !options.is_empty() => format!(
                    " [{}]",
                    options
                        .iter()
                        .filter_map(Value::as_str)
                        .collect::<Vec<_>>()
                        .join(" / ")
                ),
                _ => String::new(),
            };
            format!("{agent} asks ({id}): {question}{options} — !answer {id} TEXT")
        }
        "approval.created" => {
            let id = text("id");
            let command = d["payload"]["command"].as_str().unwrap_or_default();
            format!(
                "{agent} wants to run `{command}` ({id}) — !approve {id} or !deny {id} [reason]"
            )
        }
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn event(kind: &str, data: Value) -> StoredEvent {
        StoredEvent {
            seq: 1,
            kind: kind.into(),
            agent_id: None,
            data,
            created_at: String::new(),
        }
    }

    #[test]
    fn stops_crashes_and_questions_are_announced_and_the_rest_is_not() {
        let failed = event(
            "agent.state_changed",
            json!({"from": "running", "to": "failed", "reason": "budget exceeded"}),
        );
        assert_eq!(
            announcement(&failed, "ada").as_deref(),
            Some("ada failed: budget exceeded")
        );
        let running = event(
            "agent.state_changed",
            json!({"from": "pending", "to": "running"}),
        );
        assert_eq!(announcement(&running, "ada"), None);
        let asked = event(
            "question.created",
            json!({"id": "q_1", "payload": {"question": "Which branch?", "options": ["main", "dev"]}}),
        );
        assert_eq!(
            announcement(&asked, "ada").as_deref(),
            Some("ada asks (q_1): Which branch? [main / dev] — !answer q_1 TEXT")
        );
        let approval = event(
            "approval.created",
            json!({"id": "a_1", "payload": {"command": "rm -rf build"}}),
        );
        assert!(
            announcement(&approval, "ada")
                .unwrap()
                .contains("!approve a_1")
        );
        assert_eq!(announcement(&event("turn.ended", json!({})), "ada"), None);
    }
}
