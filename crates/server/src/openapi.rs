//! The OpenAPI 3.1 document, generated from the route table and the DTOs' JSON schemas. The
//! committed `openapi.json` is checked against it by a test.

use crate::routes::table;
use schemars::generate::SchemaSettings;
use serde_json::{Map, Value, json};

/// The document as JSON.
pub fn document() -> Value {
    let mut generator = SchemaSettings::draft2020_12()
        .with(|s| s.definitions_path = "/components/schemas".into())
        .into_generator();
    let mut paths = Map::new();
    for route in table() {
        let mut op = Map::new();
        op.insert("operationId".into(), json!(route.id));
        op.insert("summary".into(), json!(route.summary));
        op.insert(
            "x-reef-scopes".into(),
            json!(crate::scope::Access::of(route.id, route.method).scopes()),
        );
        let mut params: Vec<Value> = path_params(route.path)
            .map(|name| {
                json!({"name": name, "in": "path", "required": true,
                       "schema": {"type": "string"}})
            })
            .collect();
        params.extend(route.query.iter().map(|(name, kind, description)| {
            json!({"name": name, "in": "query", "required": false,
                   "description": description, "schema": {"type": kind}})
        }));
        if !params.is_empty() {
            op.insert("parameters".into(), Value::Array(params));
        }
        if let Some(body) = route.body {
            let schema = body(&mut generator);
            op.insert(
                "requestBody".into(),
                json!({"required": true, "content": {"application/json": {"schema": schema}}}),
            );
        }
        let mut ok = Map::new();
        ok.insert("description".into(), json!(route.summary));
        if let Some(response) = route.response {
            let schema = response(&mut generator);
            let media = if route.stream {
                "text/event-stream"
            } else {
                "application/json"
            };
            ok.insert("content".into(), json!({media: {"schema": schema}}));
        }
        let mut responses = Map::new();
        responses.insert(route.status.to_string(), Value::Object(ok));
        responses.insert(
            "default".into(),
            json!({"$ref": "#/components/responses/Error"}),
        );
        op.insert("responses".into(), Value::Object(responses));
        let entry = paths
            .entry(route.path.to_owned())
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(methods) = entry {
            methods.insert(route.method.to_owned(), Value::Object(op));
        }
    }
    let schemas = generator.take_definitions(true);
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "reef daemon API",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Agents, messages, rooms, questions and approvals, sessions and \
                            events of a running `reef serve`. Every route needs \
                            `Authorization: Bearer <token>`: the root token in \
                            $REEF_HOME/api-token, or a scoped token from `reef token \
                            create`; `x-reef-scopes` names the scopes that may call a \
                            route."
        },
        "security": [{"bearer": []}],
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "responses": {"Error": {
                "description": "400 fix the request (field names it), 401 token, 403 denied \
                                (or a scope that does not reach the route, or a Host that is \
                                not the daemon's), 404 unknown name, 409 state conflict, \
                                429 the token's rate limit (wait Retry-After seconds), \
                                503 shutting down",
                "content": {"application/json": {"schema": {
                    "type": "object",
                    "properties": {"error": {"type": "string"},
                                   "field": {"type": ["string", "null"]}},
                    "required": ["error"]}}}
            }}
        }
    })
}

fn path_params(path: &str) -> impl Iterator<Item = &str> {
    path.split('/')
        .filter_map(|seg| seg.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
}
