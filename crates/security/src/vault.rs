//! The vault's format and cryptography: each secret sealed on its own with
//! XChaCha20-Poly1305 under a 256-bit key that Argon2id derives from the passphrase. A
//! secret's name, policy and description are bound to its sealed value (associated data), so
//! an edited policy makes the entry fail to open instead of widening who gets it. Reading
//! and writing the file is the caller's; nothing here touches the disk.

use argon2::{Algorithm, Argon2, Params, Version};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use chacha20poly1305::aead::{Aead, AeadCore, KeyInit, OsRng, Payload, rand_core::RngCore};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use reef_core::SecretPolicy;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use zeroize::Zeroizing;

/// The first field of every vault file.
pub const FORMAT: &str = "reef-vault/1";

/// Argon2id's cost for new vaults: 64 MiB, 3 passes, one lane (about 0.2 s on one core).
pub const DEFAULT_MEMORY_KIB: u32 = 64 * 1024;
pub const DEFAULT_ITERATIONS: u32 = 3;

/// What a vault file may ask of Argon2id, so a damaged header cannot make opening it take
/// minutes or gigabytes.
const MAX_MEMORY_KIB: u32 = 1024 * 1024;
const MAX_ITERATIONS: u32 = 64;
const MAX_PARALLELISM: u32 = 16;

const CHECK_TEXT: &[u8] = b"reef vault key check";

/// Why the vault could not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum VaultError {
    /// The passphrase (or key file) is not the one the vault was made with: ask again.
    #[error("wrong passphrase: it does not open this vault")]
    WrongPassphrase,
    /// The file is not a vault this reef can read: restore it from a backup.
    #[error("the vault file is not valid: {0}")]
    Malformed(String),
    #[error("no secret `{0}` in the vault")]
    NotFound(String),
    /// The entry was edited or damaged on disk: set the secret again.
    #[error(
        "secret `{0}` in the vault does not open: its entry was altered or damaged (set it again)"
    )]
    Damaged(String),
    #[error("the passphrase must not be empty")]
    EmptyPassphrase,
    #[error("cannot derive the vault key: {0}")]
    Kdf(String),
}

/// How the key is derived from the passphrase.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Kdf {
    /// Always `argon2id`.
    pub algorithm: String,
    pub memory_kib: u32,
    pub iterations: u32,
    pub parallelism: u32,
    /// 16 random bytes, base64.
    pub salt: String,
}

/// A sealed value: a 24-byte nonce and the ciphertext with its tag, base64.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Sealed {
    nonce: String,
    sealed: String,
}

/// One secret: who may have it, what it is for, when it was set, and its sealed value.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    pub policy: SecretPolicy,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// When the value was first set (RFC 3339, as the caller gave it).
    pub created: String,
    /// When the value was last set or rotated.
    pub updated: String,
    #[serde(flatten)]
    value: Sealed,
}

/// A whole vault file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VaultFile {
    pub format: String,
    pub kdf: Kdf,
    /// A known text sealed with the key, so a wrong passphrase is told apart from a damaged
    /// entry.
    check: Sealed,
    #[serde(default)]
    pub secrets: BTreeMap<String, Entry>,
}

/// The key of an unlocked vault; wiped from memory when dropped.
#[derive(Clone)]
pub struct VaultKey(Zeroizing<[u8; 32]>);

impl std::fmt::Debug for VaultKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("VaultKey(..)")
    }
}

impl Kdf {
    fn new() -> Kdf {
        let mut salt = [0u8; 16];
        OsRng.fill_bytes(&mut salt);
        Kdf {
            algorithm: "argon2id".into(),
            memory_kib: DEFAULT_MEMORY_KIB,
            iterations: DEFAULT_ITERATIONS,
            parallelism: 1,
            salt: B64.encode(salt),
        }
    }

    /// The key for `passphrase`.
    pub fn derive(&self, passphrase: &str) -> Result<VaultKey, VaultError> {
        if passphrase.is_empty() {
            return Err(VaultError::EmptyPassphrase);
        }
        if self.algorithm != "argon2id" {
            return Err(VaultError::Malformed(format!(
                "kdf.algorithm is {:?}; only argon2id is known",
                self.algorithm
            )));
        }
        if !(8..=MAX_MEMORY_KIB).contains(&self.memory_kib)
            || !(1..=MAX_ITERATIONS).contains(&self.iterations)
            || !(1..=MAX_PARALLELISM).contains(&self.parallelism)
        {
            return Err(VaultError::Malformed(format!(
                "kdf costs out of range (memory_kib {}, iterations {}, parallelism {})",
                self.memory_kib, self.iterations, self.parallelism
            )));
        }
        let salt = B64
            .decode(&self.salt)
            .map_err(|_| VaultError::Malformed("kdf.salt is not base64".into()))?;
        let params = Params::new(self.memory_kib, self.iterations, self.parallelism, Some(32))
            .map_err(|e| VaultError::Kdf(e.to_string()))?;
        let mut key = Zeroizing::new([0u8; 32]);
        Argon2::new(Algorithm::Argon2id, Version::V0x13, params)
            .hash_password_into(passphrase.as_bytes(), &salt, key.as_mut())
            .map_err(|e| VaultError::Kdf(e.to_string()))?;
        Ok(VaultKey(key))
    }
}

impl Sealed {
    /// Both fields base64, the nonce 24 bytes and the sealed value at least a tag long.
    fn validate(&self, field: &str) -> Result<(), VaultError> {
        let nonce = B64.decode(&self.nonce).ok().filter(|n| n.len() == 24);
        let sealed = B64.decode(&self.sealed).ok().filter(|s| s.len() >= 16);
        match (nonce, sealed) {
            (Some(_), Some(_)) => Ok(()),
            (None, _) => Err(VaultError::Malformed(format!(
                "{field}.nonce is not 24 bytes of base64"
            ))),
            (_, None) => Err(VaultError::Malformed(format!(
                "{field}.sealed is not a sealed value in base64"
            ))),
        }
    }
}

impl VaultKey {
    fn cipher(&self) -> XChaCha20Poly1305 {
        XChaCha20Poly1305::new(self.0.as_ref().into())
    }

    fn seal(&self, plain: &[u8], aad: &[u8]) -> Sealed {
        let nonce = XChaCha20Poly1305::generate_nonce(&mut OsRng);
        // Encryption with a valid key and nonce does not fail for inputs this small.
        let sealed = self
            .cipher()
            .encrypt(&nonce, Payload { msg: plain, aad })
            .unwrap_or_default();
        Sealed {
            nonce: B64.encode(nonce),
            sealed: B64.encode(sealed),
        }
    }

    /// The plain bytes, or `None` when the key or the associated data is not the one sealed.
    fn open(&self, sealed: &Sealed, aad: &[u8]) -> Option<Zeroizing<Vec<u8>>> {
        let nonce = B64.decode(&sealed.nonce).ok()?;
        if nonce.len() != 24 {
            return None;
        }
        let ct = B64.decode(&sealed.sealed).ok()?;
        self.cipher()
            .decrypt(XNonce::from_slice(&nonce), Payload { msg: &ct, aad })
            .ok()
            .map(Zeroizing::new)
    }
}

/// What a secret's sealed value is bound to: the format, its name, policy and description.
fn entry_aad(name: &str, policy: &SecretPolicy, description: Option<&str>) -> Vec<u8> {
    let policy = serde_json::to_string(policy).unwrap_or_default();
    format!(
        "{FORMAT}\0secret\0{name}\0{policy}\0{}",
        description.unwrap_or("")
    )
    .into_bytes()
}

fn check_aad() -> Vec<u8> {
    format!("{FORMAT}\0check").into_bytes()
}

impl VaultFile {
    /// A new, empty vault for `passphrase`, and its key.
    pub fn create(passphrase: &str) -> Result<(VaultFile, VaultKey), VaultError> {
        let kdf = Kdf::new();
        let key = kdf.derive(passphrase)?;
        let check = key.seal(CHECK_TEXT, &check_aad());
        let file = VaultFile {
            format: FORMAT.into(),
            kdf,
            check,
            secrets: BTreeMap::new(),
        };
        Ok((file, key))
    }

    /// Reads a vault file's text. Only names, policies and dates are readable without the key.
    pub fn parse(text: &str) -> Result<VaultFile, VaultError> {
        let file: VaultFile =
            serde_json::from_str(text).map_err(|e| VaultError::Malformed(e.to_string()))?;
        if file.format != FORMAT {
            return Err(VaultError::Malformed(format!(
                "format is {:?}; this reef reads {FORMAT:?}",
                file.format
            )));
        }
        // A damaged field is named here, not mistaken later for a wrong passphrase.
        file.check.validate("check")?;
        for (name, entry) in &file.secrets {
            entry.value.validate(&format!("secrets.{name}"))?;
        }
        Ok(file)
    }

    /// The file's text.
    pub fn to_text(&self) -> String {
        let mut text = serde_json::to_string_pretty(self).unwrap_or_default();
        text.push('\n');
        text
    }

    /// The key for `passphrase`, checked against this vault.
    pub fn unlock(&self, passphrase: &str) -> Result<VaultKey, VaultError> {
        let key = self.kdf.derive(passphrase)?;
        self.check_key(&key)?;
        Ok(key)
    }

    /// Whether `key` opens this vault (it may have been made again with another passphrase
    /// since the key was derived).
    pub fn check_key(&self, key: &VaultKey) -> Result<(), VaultError> {
        match key.open(&self.check, &check_aad()) {
            Some(text) if text.as_slice() == CHECK_TEXT => Ok(()),
            _ => Err(VaultError::WrongPassphrase),
        }
    }

    /// Sets `name` to `value` with `policy`. `now` is the time to record (RFC 3339).
    pub fn put(
        &mut self,
        key: &VaultKey,
        name: &str,
        value: &str,
        policy: SecretPolicy,
        description: Option<String>,
        now: &str,
    ) -> Result<(), VaultError> {
        self.check_key(key)?;
        let aad = entry_aad(name, &policy, description.as_deref());
        let sealed = key.seal(value.as_bytes(), &aad);
        let created = self
            .secrets
            .get(name)
            .map_or_else(|| now.to_owned(), |e| e.created.clone());
        self.secrets.insert(
            name.to_owned(),
            Entry {
                policy,
                description,
                created,
                updated: now.to_owned(),
                value: sealed,
            },
        );
        Ok(())
    }

    /// The value of `name`.
    pub fn get(&self, key: &VaultKey, name: &str) -> Result<Zeroizing<String>, VaultError> {
        let entry = self
            .secrets
            .get(name)
            .ok_or_else(|| VaultError::NotFound(name.to_owned()))?;
        let aad = entry_aad(name, &entry.policy, entry.description.as_deref());
        let Some(plain) = key.open(&entry.value, &aad) else {
            self.check_key(key)?;
            return Err(VaultError::Damaged(name.to_owned()));
        };
        String::from_utf8(plain.to_vec())
            .map(Zeroizing::new)
            .map_err(|_| VaultError::Damaged(name.to_owned()))
    }

    /// Removes `name`; whether it was there.
    pub fn remove(&mut self, name: &str) -> bool {
        self.secrets.remove(name).is_some()
    }

    /// The same secrets under a new passphrase (a fresh salt, every value sealed again).
    pub fn rekey(
        &self,
        key: &VaultKey,
        passphrase: &str,
    ) -> Result<(VaultFile, VaultKey), VaultError> {
        let (mut fresh, new_key) = VaultFile::create(passphrase)?;
        for (name, entry) in &self.secrets {
            let value = self.get(key, name)?;
            let aad = entry_aad(name, &entry.policy, entry.description.as_deref());
            fresh.secrets.insert(
                name.clone(),
                Entry {
                    value: new_key.seal(value.as_bytes(), &aad),
                    ..entry.clone()
                },
            );
        }
        Ok((fresh, new_key))
    }
}
