//! The vault's format: values come back only with the right passphrase, never appear in the
//! file in any encoding, and an edited policy or a moved entry fails to open.

use reef_core::{SecretPolicy, SecretScope};
use reef_security::leak::forms;
use reef_security::vault::{VaultError, VaultFile};

const VALUE: &str = "ghp_vaultTestValue0123456789abcdefABCDEF";
const NOW: &str = "2026-11-25T10:00:00Z";

fn vault_with_secret() -> (VaultFile, reef_security::vault::VaultKey) {
    let (mut file, key) = VaultFile::create("correct horse battery staple").unwrap();
    let policy = SecretPolicy::OnlyFor(vec!["tool:shell".parse::<SecretScope>().unwrap()]);
    file.put(&key, "GH_TOKEN", VALUE, policy, Some("deploys".into()), NOW)
        .unwrap();
    (file, key)
}

#[test]
fn a_value_comes_back_with_the_passphrase_and_only_with_it() {
    let (file, _) = vault_with_secret();
    let text = file.to_text();
    let read = VaultFile::parse(&text).unwrap();
    let key = read.unlock("correct horse battery staple").unwrap();
    assert_eq!(read.get(&key, "GH_TOKEN").unwrap().as_str(), VALUE);
    assert!(matches!(
        read.unlock("correct horse battery stapler"),
        Err(VaultError::WrongPassphrase)
    ));
    assert!(matches!(read.unlock(""), Err(VaultError::EmptyPassphrase)));
    assert!(matches!(
        read.get(&key, "OTHER"),
        Err(VaultError::NotFound(n)) if n == "OTHER"
    ));
    let entry = &read.secrets["GH_TOKEN"];
    assert_eq!(entry.policy.describe(), "only-for tool:shell");
    assert_eq!(entry.description.as_deref(), Some("deploys"));
    assert_eq!(entry.created, NOW);
}

#[test]
fn the_file_holds_the_value_in_no_encoding() {
    let (file, _) = vault_with_secret();
    let text = file.to_text();
    for form in forms(VALUE) {
        assert!(!text.contains(&form), "the vault file holds {form:?}");
    }
    // Nor a long piece of it.
    assert!(!text.contains(&VALUE[4..20]));
}

#[test]
fn an_edited_policy_or_a_moved_entry_does_not_open() {
    let (file, key) = vault_with_secret();
    let mut edited = file.clone();
    edited.secrets.get_mut("GH_TOKEN").unwrap().policy = SecretPolicy::Always;
    assert!(matches!(
        edited.get(&key, "GH_TOKEN"),
        Err(VaultError::Damaged(n)) if n == "GH_TOKEN"
    ));
    let mut moved = file.clone();
    let entry = moved.secrets.remove("GH_TOKEN").unwrap();
    moved.secrets.insert("OTHER".into(), entry);
    assert!(matches!(
        moved.get(&key, "OTHER"),
        Err(VaultError::Damaged(_))
    ));
}

#[test]
fn a_rekeyed_vault_opens_with_the_new_passphrase_only() {
    let (file, key) = vault_with_secret();
    let (fresh, new_key) = file.rekey(&key, "a new passphrase").unwrap();
    assert_eq!(fresh.get(&new_key, "GH_TOKEN").unwrap().as_str(), VALUE);
    assert_eq!(fresh.secrets["GH_TOKEN"].created, NOW);
    assert!(matches!(
        fresh.unlock("correct horse battery staple"),
        Err(VaultError::WrongPassphrase)
    ));
    // The old key cannot write into the new vault.
    let mut fresh = fresh;
    assert!(matches!(
        fresh.put(&key, "X", VALUE, SecretPolicy::Always, None, NOW),
        Err(VaultError::WrongPassphrase)
    ));
}

#[test]
fn a_damaged_header_is_named() {
    let (file, _) = vault_with_secret();
    let text = file
        .to_text()
        .replace("\"memory_kib\": 65536", "\"memory_kib\": 4294967295");
    let read = VaultFile::parse(&text).unwrap();
    let err = read.unlock("correct horse battery staple").unwrap_err();
    assert!(err.to_string().contains("kdf costs out of range"), "{err}");
    assert!(matches!(
        VaultFile::parse("{\"format\": \"other\"}"),
        Err(VaultError::Malformed(_))
    ));
}

#[test]
fn policies_decide_who_is_given_a_secret() {
    use reef_core::SecretUse;
    let only: SecretPolicy = SecretPolicy::OnlyFor(vec![
        "tool:shell".parse().unwrap(),
        "domain:*.example.com".parse().unwrap(),
    ]);
    let shell = SecretUse {
        tool: "shell",
        skill: None,
        host: None,
        approved: false,
    };
    let fetch = |host| SecretUse {
        tool: "weather",
        skill: Some("weather"),
        host: Some(host),
        approved: false,
    };
    assert!(only.allows("T", &shell).is_ok());
    assert!(only.allows("T", &fetch("api.example.com")).is_ok());
    let err = only
        .allows("T", &fetch("example.com.evil.net"))
        .unwrap_err();
    assert!(err.contains("domain:example.com.evil.net"), "{err}");
    assert!(SecretPolicy::WithApproval.allows("T", &shell).is_err());
    assert!(
        SecretPolicy::WithApproval
            .allows(
                "T",
                &SecretUse {
                    approved: true,
                    ..shell
                }
            )
            .is_ok()
    );
    for bad in ["tool:", "disk:x", "domain:a*.b", "tool:sh*", "nocolon"] {
        assert!(bad.parse::<SecretScope>().is_err(), "{bad} parsed");
    }
}
