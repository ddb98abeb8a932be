//! The route table: one entry per operation with its method, path, handler, parameters and
//! body/response types. The router and the OpenAPI document are both built from it, so the
//! document cannot describe a route that does not exist or miss one that does.

use crate::AppState;
use crate::dto::*;
use crate::handlers as h;
use axum::routing::{MethodRouter, delete, get, post, put};
use schemars::{JsonSchema, Schema, SchemaGenerator};

pub(crate) type SchemaFn = fn(&mut SchemaGenerator) -> Schema;

fn schema<T: JsonSchema>(generator: &mut SchemaGenerator) -> Schema {
    generator.subschema_for::<T>()
}

/// A query parameter: name, JSON type, description.
pub(crate) type QueryParam = (&'static str, &'static str, &'static str);

pub(crate) struct Route {
    pub method: &'static str,
    pub path: &'static str,
    pub id: &'static str,
    pub summary: &'static str,
    pub query: &'static [QueryParam],
    pub body: Option<SchemaFn>,
    pub status: u16,
    pub response: Option<SchemaFn>,
    /// `text/event-stream` instead of JSON.
    pub stream: bool,
    pub handler: MethodRouter<AppState>,
}

#[allow(
    clippy::too_many_arguments,
    reason = "one row of the route table, named by position"
)]
fn route(
    method: &'static str,
    path: &'static str,
    id: &'static str,
    summary: &'static str,
    query: &'static [QueryParam],
    body: Option<SchemaFn>,
    (status, response): (u16, Option<SchemaFn>),
    handler: MethodRouter<AppState>,
) -> Route {
    Route {
        method,
        path,
        id,
        summary,
        query,
        body,
        status,
        response,
        stream: false,
        handler,
    }
}

const EVENT_QUERY: &[QueryParam] = &[
    ("after", "integer", "only events after this seq"),
    ("agent", "string", "only this agent's events"),
    (
        "kind",
        "string",
        "comma-separated kind prefixes, e.g. agent.,question.",
    ),
    (
        "limit",
        "integer",
        "at most this many (default 1000, max 10000)",
    ),
];

/// Every route of the API.
pub(crate) fn table() -> Vec<Route> {
    let mut routes = vec![
        route(
            "get",
            "/v1/health",
            "health",
            "Daemon status",
            &[],
            None,
            (200, Some(schema::<HealthView>)),
            get(h::health),
        ),
        route(
            "get",
            "/v1/templates",
            "listTemplates",
            "Agent templates",
            &[],
            None,
            (200, Some(schema::<Vec<TemplateView>>)),
            get(h::templates),
        ),
        route(
            "get",
            "/v1/agents",
            "listAgents",
            "Every agent",
            &[],
            None,
            (200, Some(schema::<Vec<AgentView>>)),
            get(h::list_agents),
        ),
        route(
            "post",
            "/v1/agents",
            "spawnAgent",
            "Spawn an agent from a template",
            &[],
            Some(schema::<SpawnBody>),
            (201, Some(schema::<AgentView>)),
            post(h::spawn_agent),
        ),
        route(
            "get",
            "/v1/agents/{name}",
            "getAgent",
            "One agent",
            &[],
            None,
            (200, Some(schema::<AgentView>)),
            get(h::get_agent),
        ),
        route(
            "delete",
            "/v1/agents/{name}",
            "destroyAgent",
            "Destroy an agent (purge=true also deletes its transcript and directory)",
            &[("purge", "boolean", "also wipe the agent's state")],
            None,
            (204, None),
            delete(h::destroy_agent),
        ),
        route(
            "post",
            "/v1/agents/{name}/pause",
            "pauseAgent",
            "Pause: no new turns",
            &[],
            None,
            (200, Some(schema::<AgentView>)),
            post(h::pause_agent),
        ),
        route(
            "post",
            "/v1/agents/{name}/resume",
            "resumeAgent",
            "Resume a paused agent",
            &[],
            None,
            (200, Some(schema::<AgentView>)),
            post(h::resume_agent),
        ),
        route(
            "post",
            "/v1/agents/{name}/stop",
            "stopAgent",
            "Terminate an agent (a running turn is interrupted)",
            &[],
            None,
            (200, Some(schema::<AgentView>)),
            post(h::stop_agent),
        ),
        route(
            "put",
            "/v1/agents/{name}/model",
            "setAgentModel",
            "Switch the agent's model",
            &[],
            Some(schema::<ModelBody>),
            (200, Some(schema::<AgentView>)),
            put(h::set_model),
        ),
        route(
            "post",
            "/v1/agents/{name}/compact",
            "compactAgent",
            "Compact the agent's context now (after its running turn); 409 when there is nothing to compact",
            &[],
            None,
            (200, Some(schema::<CompactionView>)),
            post(h::compact_agent),
        ),
        route(
            "post",
            "/v1/agents/{name}/reset",
            "resetAgent",
            "Give the agent a fresh session (after its running turn); workspace, notes and memory stay",
            &[],
            None,
            (200, Some(schema::<ResetView>)),
            post(h::reset_agent),
        ),
        route(
            "put",
            "/v1/agents/{name}/persona",
            "setAgentPersona",
            "Replace the agent's persona",
            &[],
            Some(schema::<PersonaBody>),
            (200, Some(schema::<AgentView>)),
            put(h::set_persona),
        ),
        route(
            "post",
            "/v1/agents/{name}/messages",
            "sendMessage",
            "Put a message (or a request) in the agent's inbox",
            &[],
            Some(schema::<MessageBody>),
            (202, Some(schema::<SentView>)),
            post(h::send_message),
        ),
        route(
            "get",
            "/v1/agents/{name}/inbox",
            "agentInbox",
            "The agent's inbox",
            &[("status", "string", "pending, processing or done")],
            None,
            (200, Some(schema::<Vec<InboxView>>)),
            get(h::inbox),
        ),
        route(
            "get",
            "/v1/agents/{name}/transcript",
            "agentTranscript",
            "The agent's session transcript",
            &[],
            None,
            (200, Some(schema::<Vec<TranscriptEntry>>)),
            get(h::transcript),
        ),
        route(
            "get",
            "/v1/rooms",
            "listRooms",
            "Rooms and their members",
            &[],
            None,
            (200, Some(schema::<Vec<RoomView>>)),
            get(h::list_rooms),
        ),
        route(
            "post",
            "/v1/rooms",
            "createRoom",
            "Create a room",
            &[],
            Some(schema::<RoomBody>),
            (201, Some(schema::<RoomView>)),
            post(h::create_room),
        ),
        route(
            "post",
            "/v1/rooms/{room}/members",
            "joinRoom",
            "Add an agent to a room (room name without or with an escaped #)",
            &[],
            Some(schema::<JoinBody>),
            (204, None),
            post(h::join_room),
        ),
        route(
            "post",
            "/v1/rooms/{room}/messages",
            "postRoom",
            "Post to every member of a room",
            &[],
            Some(schema::<PostBody>),
            (202, Some(schema::<PostedView>)),
            post(h::post_room),
        ),
        route(
            "get",
            "/v1/questions",
            "listQuestions",
            "Pending questions, approvals and requests",
            &[(
                "all",
                "boolean",
                "include answered, cancelled and expired ones",
            )],
            None,
            (200, Some(schema::<Vec<PendingView>>)),
            get(h::list_questions),
        ),
        route(
            "get",
            "/v1/questions/{id}",
            "getQuestion",
            "One question, approval or request (an id prefix works)",
            &[],
            None,
            (200, Some(schema::<PendingView>)),
            get(h::get_question),
        ),
        route(
            "post",
            "/v1/questions/{id}/answer",
            "answerQuestion",
            "Answer a question",
            &[],
            Some(schema::<AnswerBody>),
            (200, Some(schema::<PendingView>)),
            post(h::answer),
        ),
        route(
            "post",
            "/v1/questions/{id}/approve",
            "approve",
            "Approve a command: it runs now and the agent gets its output",
            &[],
            None,
            (200, Some(schema::<PendingView>)),
            post(h::approve),
        ),
        route(
            "post",
            "/v1/questions/{id}/deny",
            "deny",
            "Deny a command",
            &[],
            Some(schema::<DenyBody>),
            (200, Some(schema::<PendingView>)),
            post(h::deny),
        ),
        route(
            "post",
            "/v1/questions/{id}/cancel",
            "cancelQuestion",
            "Withdraw a question, approval or request",
            &[],
            None,
            (200, Some(schema::<PendingView>)),
            post(h::cancel),
        ),
        route(
            "get",
            "/v1/sessions",
            "listSessions",
            "Sessions, newest first",
            &[],
            None,
            (200, Some(schema::<Vec<SessionView>>)),
            get(h::list_sessions),
        ),
        route(
            "get",
            "/v1/sessions/{id}/messages",
            "sessionMessages",
            "A session's transcript (an id prefix works)",
            &[],
            None,
            (200, Some(schema::<Vec<TranscriptEntry>>)),
            get(h::session_messages),
        ),
        route(
            "get",
            "/v1/events",
            "listEvents",
            "The event history",
            EVENT_QUERY,
            None,
            (200, Some(schema::<Vec<EventView>>)),
            get(h::events),
        ),
    ];
    let mut stream = route(
        "get",
        "/v1/events/stream",
        "streamEvents",
        "Server-sent events: history after `after` (or Last-Event-ID), then live",
        &EVENT_QUERY[..3],
        None,
        (200, Some(schema::<EventView>)),
        get(crate::sse::stream),
    );
    stream.stream = true;
    routes.push(stream);
    routes
}
