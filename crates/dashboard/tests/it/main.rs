//! reef-dashboard's integration tests: the vendored libraries are what their record says,
//! and every embedded file is served under a name carrying its hash.

use sha2::{Digest, Sha256};

#[test]
fn vendored_files_match_their_recorded_hashes() {
    let dir = crate_dir().join("assets/vendor");
    let record = std::fs::read_to_string(dir.join("VENDORED.md")).unwrap();
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name == "VENDORED.md" {
            continue;
        }
        let hash: String = Sha256::digest(std::fs::read(&path).unwrap())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let row = record
            .lines()
            .find(|l| l.contains(&format!("`{name}`")))
            .unwrap_or_else(|| panic!("{name} is not recorded in VENDORED.md"));
        assert!(
            row.contains(&hash),
            "{name}: the file's SHA-256 is {hash}, not the recorded one"
        );
        checked += 1;
    }
    assert_eq!(
        checked, 7,
        "htmx, its SSE extension, xterm.js (script, styles, licence) and its fit add-on"
    );
}

#[test]
fn assets_are_served_under_hashed_names() {
    let assets: Vec<_> = reef_dashboard::assets().collect();
    assert_eq!(assets.len(), 9);
    for (name, url, len) in assets {
        let (stem, ext) = name.rsplit_once('.').unwrap();
        let file = url.strip_prefix("/assets/").unwrap();
        let hash = file
            .strip_prefix(&format!("{stem}."))
            .and_then(|rest| rest.strip_suffix(&format!(".{ext}")))
            .unwrap_or_else(|| panic!("{url} is not {stem}.HASH.{ext}"));
        assert_eq!(hash.len(), 12, "{url}");
        assert!(hash.chars().all(|c| c.is_ascii_hexdigit()), "{url}");
        assert!(len > 0, "{name} is empty");
    }
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
