//! The committed OpenAPI document must match what the code generates.

#[test]
fn the_committed_openapi_document_is_current() {
    let path = crate_dir().join("openapi.json");
    let generated = serde_json::to_string_pretty(&reef_server::openapi_document()).unwrap() + "\n";
    if std::env::var_os("REEF_UPDATE_OPENAPI").is_some() {
        std::fs::write(&path, &generated).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "crates/server/openapi.json is stale; regenerate it with \
         `REEF_UPDATE_OPENAPI=1 cargo test -p reef-server --test it openapi`"
    );
}

#[test]
fn every_operation_has_an_id_a_response_and_known_schemas() {
    let doc = reef_server::openapi_document();
    let schemas = doc["components"]["schemas"].as_object().unwrap();
    let text = doc.to_string();
    for name in [
        "AgentView",
        "SpawnBody",
        "PendingView",
        "EventView",
        "MessageBody",
    ] {
        assert!(schemas.contains_key(name), "missing schema {name}");
    }
    // Every reference points at a defined schema.
    for part in text.split("\"$ref\":\"#/components/schemas/").skip(1) {
        let name = part.split('"').next().unwrap();
        assert!(schemas.contains_key(name), "dangling reference to {name}");
    }
    let mut ids = std::collections::BTreeSet::new();
    for (path, methods) in doc["paths"].as_object().unwrap() {
        for (method, op) in methods.as_object().unwrap() {
            let id = op["operationId"].as_str().unwrap();
            assert!(ids.insert(id.to_owned()), "duplicate operationId {id}");
            assert!(
                op["responses"].as_object().unwrap().len() >= 2,
                "{method} {path}"
            );
        }
    }
    assert!(ids.len() >= 25, "{ids:?}");
}

/// The directory of the crate under test: from cargo at run time (a test binary reused from
/// another checkout of the workspace would otherwise look in that checkout), else from the
/// build.
fn crate_dir() -> std::path::PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR").map_or_else(
        || env!("CARGO_MANIFEST_DIR").into(),
        std::path::PathBuf::from,
    )
}
