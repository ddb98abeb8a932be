//! The models directory: listing, removing, and what does not count as installed.

use reef_models::{ModelStore, ModelsError};

#[test]
fn lists_installed_models_and_removes_them() {
    let home = tempfile::tempdir().unwrap();
    let dir = home.path().join("models");
    let store = ModelStore::new(&dir);
    assert!(
        store.list().unwrap().is_empty(),
        "a missing directory lists nothing"
    );

    std::fs::create_dir_all(dir.join(".partial/qwen2.5-coder-0.5b-instruct")).unwrap();
    std::fs::write(
        dir.join(".partial/qwen2.5-coder-0.5b-instruct/download.part"),
        b"half",
    )
    .unwrap();
    std::fs::write(dir.join("smollm2-135m-instruct.gguf"), b"0123456789").unwrap();
    std::fs::write(dir.join("my-own.gguf"), b"abc").unwrap();
    std::fs::write(dir.join("notes.txt"), b"not a model").unwrap();

    let listed = store.list().unwrap();
    let names: Vec<(&str, u64, bool)> = listed
        .iter()
        .map(|m| (m.name.as_str(), m.size, m.catalogued))
        .collect();
    assert_eq!(
        names,
        [("my-own", 3, false), ("smollm2-135m-instruct", 10, true)]
    );

    assert_eq!(store.remove("smollm2-135m-instruct").unwrap(), 10);
    assert!(!store.is_installed("smollm2-135m-instruct"));
    // A partial download can be removed too; then nothing of it is left.
    assert_eq!(store.remove("qwen2.5-coder-0.5b-instruct").unwrap(), 0);
    assert!(!dir.join(".partial/qwen2.5-coder-0.5b-instruct").exists());
    let err = store.remove("qwen2.5-coder-0.5b-instruct").unwrap_err();
    assert!(matches!(err, ModelsError::NotInstalled(_)), "{err:?}");
    assert_eq!(
        err.to_string(),
        "model `qwen2.5-coder-0.5b-instruct` is not installed"
    );
}

#[test]
fn unknown_names_list_the_catalogue() {
    let err = reef_models::entry("gpt-5").unwrap_err().to_string();
    assert!(err.contains("unknown model `gpt-5`"), "{err}");
    assert!(
        err.contains("qwen2.5-coder-1.5b-instruct") && err.contains("smollm2-135m-instruct"),
        "{err}"
    );
}
