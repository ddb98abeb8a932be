//! What each token scope may call. Every route of the table has an [`Access`] (named by its
//! operation id, else a read for `GET` and an operator's change for the rest, so a new route
//! is closed to narrower tokens until it is opened here), and one layer per route refuses a
//! request whose token's scope does not reach it with 403, before the handler runs. Handlers
//! of `Own` routes narrow what they return to an `agent:NAME` token's agent.

use crate::auth::Grant;
use crate::error::ApiError;
use axum::extract::rejection::RawPathParamsRejection;
use axum::extract::{RawPathParams, Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::Response;
use reef_security::api_token::Scope;

/// Who may call a route.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Access {
    /// Every token: facts about the daemon itself.
    Any,
    /// Every token; the handler shows an `agent:NAME` token its own agent only.
    Own,
    /// Operator and read-only tokens: reads about every agent.
    Read,
    /// Reads about the agent the path names: operator and read-only tokens, and that agent's.
    AgentRead,
    /// Talking to an agent: operator tokens, and an agent's own token (the path's agent, or
    /// the one the handler checks).
    Talk,
    /// Operator tokens only.
    Operate,
}

impl Access {
    /// The access of the route with operation id `id` and method `method`.
    pub(crate) fn of(id: &str, method: &str) -> Access {
        match id {
            "health" => Access::Any,
            "listAgents" | "listModels" | "listEvents" | "streamEvents" => Access::Own,
            "getAgent" | "agentInbox" | "agentTranscript" => Access::AgentRead,
            "sendMessage" | "chatCompletions" => Access::Talk,
            // A dashboard link signs its holder in with every right.
            "createDashboardLink" => Access::Operate,
            // The debugger shows a turn's inner state and holds it.
            _ if method == "get" => Access::Read,
            _ => Access::Operate,
        }
    }

    /// The scopes that may call, in words (the OpenAPI document's `x-reef-scopes`).
    pub(crate) fn scopes(self) -> &'static str {
        match self {
            Access::Any | Access::Own => "operator, read-only, agent:NAME",
            Access::Read => "operator, read-only",
            Access::AgentRead => "operator, read-only, agent:NAME of the path's agent",
            Access::Talk => "operator, agent:NAME of the agent talked to",
            Access::Operate => "operator",
        }
    }

    /// Whether `scope` may call a route of this access whose path names agent `agent`.
    pub(crate) fn allows(self, scope: &Scope, agent: Option<&str>) -> bool {
        match (self, scope) {
            (_, Scope::Operator) => true,
            (Access::Any | Access::Own, _) => true,
            (Access::Read | Access::AgentRead, Scope::ReadOnly) => true,
            (Access::AgentRead | Access::Talk, Scope::Agent(own)) => {
                agent.is_none_or(|asked| asked == own)
            }
            _ => false,
        }
    }
}

/// What one route's layer checks: its access, and whether its path names an agent
/// (`{name}`), which an `agent:NAME` token must then be.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Gate {
    pub access: Access,
    pub per_agent: bool,
}

impl Gate {
    /// The gate of a route of `access` at `path`.
    pub(crate) fn new(access: Access, path: &str) -> Gate {
        Gate {
            access,
            per_agent: path.contains("{name}")
                && matches!(access, Access::AgentRead | Access::Talk),
        }
    }
}

/// Refuses a request whose token's scope does not reach the route.
pub(crate) async fn require(
    State(gate): State<Gate>,
    params: Result<RawPathParams, RawPathParamsRejection>,
    request: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let access = gate.access;
    let Some(grant) = request.extensions().get::<Grant>() else {
        // Every route sits behind the token layer; a request without a grant is a wiring bug,
        // refused rather than served.
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "this request carries no checked token",
        ));
    };
    // A name that cannot be read is no agent's (agent names are never empty).
    let agent = gate.per_agent.then(|| {
        params
            .ok()
            .and_then(|p| {
                p.iter()
                    .find(|(key, _)| *key == "name")
                    .map(|(_, value)| value.to_owned())
            })
            .unwrap_or_default()
    });
    let agent = agent.as_deref();
    if access.allows(&grant.scope, agent) {
        return Ok(next.run(request).await);
    }
    let what = match (access, agent) {
        (Access::AgentRead | Access::Talk, Some(agent)) => format!("agent {agent}"),
        _ => format!("{} {}", request.method(), request.uri().path()),
    };
    Err(forbidden(grant, &what, access))
}

/// The refusal of `grant` for `what`, naming the scopes that would do.
pub(crate) fn forbidden(grant: &Grant, what: &str, access: Access) -> ApiError {
    ApiError::new(
        StatusCode::FORBIDDEN,
        format!(
            "token `{}` (scope {}) may not use {what}; that takes a token of scope {}",
            grant.name,
            grant.scope,
            access.scopes()
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_scope_reaches_what_it_should() {
        let op = Scope::Operator;
        let ro = Scope::ReadOnly;
        let ada = Scope::Agent("ada".into());
        for access in [
            Access::Any,
            Access::Own,
            Access::Read,
            Access::AgentRead,
            Access::Talk,
            Access::Operate,
        ] {
            assert!(access.allows(&op, Some("bo")), "{access:?}");
        }
        assert!(Access::Read.allows(&ro, None));
        assert!(Access::AgentRead.allows(&ro, Some("bo")));
        assert!(!Access::Talk.allows(&ro, Some("bo")));
        assert!(!Access::Operate.allows(&ro, None));
        assert!(Access::AgentRead.allows(&ada, Some("ada")));
        assert!(!Access::AgentRead.allows(&ada, Some("bo")));
        assert!(Access::Talk.allows(&ada, Some("ada")));
        assert!(!Access::Talk.allows(&ada, Some("bo")));
        assert!(!Access::Read.allows(&ada, None));
        assert!(!Access::Operate.allows(&ada, Some("ada")));
        assert!(Access::Own.allows(&ada, None));
    }

    #[test]
    fn every_named_route_exists_and_changes_are_closed_by_default() {
        let table = crate::routes::table();
        for id in [
            "health",
            "listAgents",
            "listModels",
            "listEvents",
            "streamEvents",
            "getAgent",
            "agentInbox",
            "agentTranscript",
            "sendMessage",
            "chatCompletions",
            "createDashboardLink",
        ] {
            assert!(table.iter().any(|r| r.id == id), "no route {id}");
        }
        for route in &table {
            let access = Access::of(route.id, route.method);
            if route.method != "get" {
                assert!(
                    matches!(access, Access::Operate | Access::Talk),
                    "{} is a change open to {access:?}",
                    route.id
                );
            }
        }
    }
}
