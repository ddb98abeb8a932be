//! The audit log's hash chain: each record's hash is an HMAC-SHA256, under a key kept outside
//! the database, of the previous record's hash and the record's own fields, so a record
//! edited, inserted or removed in the database breaks the chain at that record, and nobody
//! without the key can compute a replacement that chains. Pruning leaves a checkpoint (the
//! last removed record's position and hash, sealed with the same key) from which
//! verification starts.

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

/// The hash before the first record.
pub const GENESIS: [u8; 32] = [0; 32];

/// The audit chain's secret key (32 random bytes). `Debug` never shows it.
#[derive(Clone)]
pub struct AuditKey([u8; 32]);

impl std::fmt::Debug for AuditKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AuditKey(..)")
    }
}

impl AuditKey {
    pub fn from_bytes(bytes: [u8; 32]) -> Self {
        Self(bytes)
    }

    /// Reads a key from its file form (64 hex digits, surrounding whitespace ignored).
    pub fn from_hex(text: &str) -> Option<Self> {
        decode_hex(text.trim()).map(Self)
    }

    /// The key's file form.
    pub fn to_hex(&self) -> String {
        hex(&self.0)
    }

    fn mac(&self) -> Hmac<Sha256> {
        // HMAC takes a key of any length, so this cannot fail.
        match Hmac::<Sha256>::new_from_slice(&self.0) {
            Ok(mac) => mac,
            Err(_) => unreachable!("HMAC accepts every key length"),
        }
    }
}

/// The fields of one record that the chain covers, exactly as stored.
#[derive(Clone, Copy, Debug)]
pub struct AuditFields<'a> {
    pub seq: u64,
    pub at: &'a str,
    pub kind: &'a str,
    pub agent: Option<&'a str>,
    /// The record's data as the stored JSON text.
    pub data: &'a str,
}

/// The hash of a record that follows `prev`.
pub fn link(key: &AuditKey, prev: &[u8; 32], fields: &AuditFields<'_>) -> [u8; 32] {
    let mut mac = key.mac();
    mac.update(b"reef-audit-v1\0");
    mac.update(prev);
    mac.update(&fields.seq.to_be_bytes());
    for part in [
        Some(fields.at),
        Some(fields.kind),
        fields.agent,
        Some(fields.data),
    ] {
        match part {
            // Length-prefixed so no two different records encode alike.
            Some(text) => {
                mac.update(&[1]);
                mac.update(&(text.len() as u64).to_be_bytes());
                mac.update(text.as_bytes());
            }
            None => mac.update(&[0]),
        }
    }
    mac.finalize().into_bytes().into()
}

/// The seal of a checkpoint: the last pruned record's `seq` and `hash`.
pub fn seal(key: &AuditKey, seq: u64, hash: &[u8; 32]) -> [u8; 32] {
    let mut mac = key.mac();
    mac.update(b"reef-audit-checkpoint-v1\0");
    mac.update(&seq.to_be_bytes());
    mac.update(hash);
    mac.finalize().into_bytes().into()
}

/// Where a chain starts: the beginning, or a checkpoint left by pruning.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChainStart {
    /// The position of the last record before the chain (0 at the beginning).
    pub seq: u64,
    pub hash: [u8; 32],
}

impl ChainStart {
    pub const GENESIS: ChainStart = ChainStart {
        seq: 0,
        hash: GENESIS,
    };
}

/// Why the chain does not hold at a record.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ChainBreak {
    /// The checkpoint's seal does not match: the checkpoint itself was edited.
    #[error("the pruning checkpoint at record {seq} is not sealed by this key")]
    Checkpoint { seq: u64 },
    /// A record's seq is not the one after the previous record's: records were removed or
    /// moved. The break is at the first missing one.
    #[error("record {} is missing (record {seq} follows record {prev_seq})", prev_seq.saturating_add(1))]
    Gap { seq: u64, prev_seq: u64 },
    /// The record's `prev` is not the previous record's hash.
    #[error("record {seq} does not name the previous record's hash")]
    Prev { seq: u64 },
    /// The record's stored hash does not match its fields: it was edited.
    #[error("record {seq} does not match its hash: it was changed after it was written")]
    Hash { seq: u64 },
}

impl ChainBreak {
    /// The record (or checkpoint) at which the chain breaks: for a gap, the first missing one.
    pub fn seq(&self) -> u64 {
        match self {
            ChainBreak::Gap { prev_seq, .. } => prev_seq.saturating_add(1),
            ChainBreak::Checkpoint { seq }
            | ChainBreak::Prev { seq }
            | ChainBreak::Hash { seq } => *seq,
        }
    }
}

/// Walks records in order, checking each links to the one before.
#[derive(Debug)]
pub struct ChainCheck {
    key: AuditKey,
    prev_seq: u64,
    prev_hash: [u8; 32],
    checked: u64,
}

impl ChainCheck {
    /// Starts at the beginning of the log.
    pub fn new(key: AuditKey) -> Self {
        Self {
            key,
            prev_seq: 0,
            prev_hash: GENESIS,
            checked: 0,
        }
    }

    /// Starts after a pruning checkpoint, whose seal is checked first.
    pub fn from_checkpoint(
        key: AuditKey,
        start: &ChainStart,
        sealed: &[u8; 32],
    ) -> Result<Self, ChainBreak> {
        if !constant_eq(&seal(&key, start.seq, &start.hash), sealed) {
            return Err(ChainBreak::Checkpoint { seq: start.seq });
        }
        Ok(Self {
            key,
            prev_seq: start.seq,
            prev_hash: start.hash,
            checked: 0,
        })
    }

    /// Checks the next record, stored with `prev` and `hash`.
    pub fn next(
        &mut self,
        fields: &AuditFields<'_>,
        prev: &[u8; 32],
        hash: &[u8; 32],
    ) -> Result<(), ChainBreak> {
        let seq = fields.seq;
        if seq != self.prev_seq.saturating_add(1) {
            return Err(ChainBreak::Gap {
                seq,
                prev_seq: self.prev_seq,
            });
        }
        if !constant_eq(prev, &self.prev_hash) {
            return Err(ChainBreak::Prev { seq });
        }
        if !constant_eq(&link(&self.key, prev, fields), hash) {
            return Err(ChainBreak::Hash { seq });
        }
        self.prev_seq = seq;
        self.prev_hash = *hash;
        self.checked += 1;
        Ok(())
    }

    /// Records checked so far.
    pub fn checked(&self) -> u64 {
        self.checked
    }

    /// The last record checked (or the start).
    pub fn head(&self) -> ChainStart {
        ChainStart {
            seq: self.prev_seq,
            hash: self.prev_hash,
        }
    }
}

/// The SHA-256 of `bytes` in hex: what the log keeps of a tool call's arguments.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// Lower-case hex.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0x0f)]));
    }
    out
}

/// 32 bytes from 64 hex digits.
pub fn decode_hex(text: &str) -> Option<[u8; 32]> {
    let bytes = text.as_bytes();
    if bytes.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, pair) in bytes.chunks_exact(2).enumerate() {
        let hi = char::from(pair[0]).to_digit(16)?;
        let lo = char::from(pair[1]).to_digit(16)?;
        out[i] = u8::try_from(hi * 16 + lo).ok()?;
    }
    Some(out)
}

fn constant_eq(a: &[u8; 32], b: &[u8; 32]) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(seq: u64, data: &str) -> AuditFields<'_> {
        AuditFields {
            seq,
            at: "2026-11-24T10:00:00.000Z",
            kind: "tool.call",
            agent: Some("ada"),
            data,
        }
    }

    #[test]
    fn a_chain_verifies_and_an_edit_names_its_record() {
        let key = AuditKey::from_bytes([7; 32]);
        let datas = ["{\"a\":1}", "{\"a\":2}", "{\"a\":3}"];
        let mut rows = Vec::new();
        let mut prev = GENESIS;
        for (i, data) in datas.iter().enumerate() {
            let f = fields(i as u64 + 1, data);
            let hash = link(&key, &prev, &f);
            rows.push((f, prev, hash));
            prev = hash;
        }
        let mut check = ChainCheck::new(key.clone());
        for (f, prev, hash) in &rows {
            check.next(f, prev, hash).unwrap();
        }
        assert_eq!(check.checked(), 3);

        // The second record's data changed: its own hash no longer matches.
        let mut check = ChainCheck::new(key.clone());
        check.next(&rows[0].0, &rows[0].1, &rows[0].2).unwrap();
        let edited = fields(2, "{\"a\":9}");
        assert_eq!(
            check.next(&edited, &rows[1].1, &rows[1].2),
            Err(ChainBreak::Hash { seq: 2 })
        );

        // A different key cannot produce hashes that chain.
        let mut check = ChainCheck::new(AuditKey::from_bytes([8; 32]));
        assert_eq!(
            check.next(&rows[0].0, &rows[0].1, &rows[0].2),
            Err(ChainBreak::Hash { seq: 1 })
        );

        // A record removed shows as a gap.
        let mut check = ChainCheck::new(key);
        check.next(&rows[0].0, &rows[0].1, &rows[0].2).unwrap();
        assert_eq!(
            check.next(&rows[2].0, &rows[2].1, &rows[2].2),
            Err(ChainBreak::Gap {
                seq: 3,
                prev_seq: 1
            })
        );
    }

    #[test]
    fn fields_are_length_prefixed() {
        let key = AuditKey::from_bytes([1; 32]);
        let a = AuditFields {
            seq: 1,
            at: "t",
            kind: "ab",
            agent: None,
            data: "c",
        };
        let b = AuditFields {
            kind: "a",
            data: "bc",
            ..a
        };
        let c = AuditFields {
            agent: Some(""),
            ..a
        };
        assert_ne!(link(&key, &GENESIS, &a), link(&key, &GENESIS, &b));
        assert_ne!(link(&key, &GENESIS, &a), link(&key, &GENESIS, &c));
    }

    #[test]
    fn a_checkpoint_is_sealed() {
        let key = AuditKey::from_bytes([3; 32]);
        let start = ChainStart {
            seq: 41,
            hash: [5; 32],
        };
        let sealed = seal(&key, 41, &start.hash);
        assert!(ChainCheck::from_checkpoint(key.clone(), &start, &sealed).is_ok());
        let moved = ChainStart { seq: 40, ..start };
        assert_eq!(
            ChainCheck::from_checkpoint(key, &moved, &sealed).err(),
            Some(ChainBreak::Checkpoint { seq: 40 })
        );
    }

    #[test]
    fn hex_round_trips() {
        let key = AuditKey::from_bytes([0xab; 32]);
        let back = AuditKey::from_hex(&format!(" {}\n", key.to_hex())).unwrap();
        assert_eq!(back.to_hex(), key.to_hex());
        assert!(AuditKey::from_hex("zz").is_none());
        assert!(decode_hex(&"g".repeat(64)).is_none());
    }
}
