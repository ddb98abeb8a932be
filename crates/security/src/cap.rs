//! Capability tokens: an agent's rights as biscuit facts signed by reef's root key. A child's
//! token is its parent's with one block appended whose check can only narrow it; every block
//! has a revocation id, so revoking a parent's block fails the parent and all its descendants.
//! [`Token::check`] is the one decision: are these needs granted by every block?

use biscuit_auth::builder::{AuthorizerBuilder, BlockBuilder, Term};
use biscuit_auth::{Algorithm, Biscuit, KeyPair, PrivateKey, PublicKey};
use reef_core::{Budget, Capabilities, Need, name_pattern, pattern_matches, pattern_regex};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// Who holds the authority block's rights when no agent delegated them.
pub const OPERATOR: &str = "operator";

/// How long one decision may take before it is refused (biscuit's default, 1 ms, is short
/// enough for a busy machine to refuse a right that is held).
const MAX_DECISION_TIME: Duration = Duration::from_millis(250);

/// reef's root key: an Ed25519 key pair whose public half verifies every token.
pub struct RootKey(KeyPair);

impl std::fmt::Debug for RootKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("RootKey").field(&self.public_hex()).finish()
    }
}

impl RootKey {
    /// The key pair whose private half is `secret`.
    pub fn from_secret(secret: &[u8; 32]) -> Result<RootKey, CapError> {
        let private = PrivateKey::from_bytes(secret, Algorithm::Ed25519)
            .map_err(|e| CapError::Key(e.to_string()))?;
        Ok(RootKey(KeyPair::from(&private)))
    }

    fn public(&self) -> PublicKey {
        self.0.public()
    }

    /// The public key, in hex, for display.
    pub fn public_hex(&self) -> String {
        self.public().to_bytes_hex()
    }
}

/// One block of rights: who they are for, who stated them, and what they are.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grant {
    /// The agent the block was made for.
    pub agent: String,
    /// [`OPERATOR`] for a token minted from the root key, else the parent agent's name.
    pub by: String,
    pub capabilities: Capabilities,
    pub budget: Budget,
}

/// Why a token cannot be made or read.
#[derive(Debug, thiserror::Error)]
pub enum CapError {
    /// The root key file holds something that is not an Ed25519 key.
    #[error("the capability root key is not usable: {0}")]
    Key(String),
    /// The token's signatures do not verify under the root key, or it is not a token at all:
    /// it was edited, or made under another key. Mint a new one (`reef cap grant AGENT`).
    #[error("the capability token does not verify: {0}")]
    Invalid(String),
    /// A block could not be written (a bug in how rights are stated).
    #[error("cannot write the capability token: {0}")]
    Build(String),
}

/// Why a check refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Denial {
    /// A block of the token was revoked (the agent's, or an ancestor's).
    #[error("the capability token of `{agent}` is revoked (revocation id {id})")]
    Revoked { agent: String, id: String },
    /// A need some block of the token does not grant; `holder` is the agent that block was
    /// made for (the token's own agent, or an ancestor) and `by` who stated it.
    #[error("`{agent}` may not {need}: {}", whose(agent, holder, by))]
    NotGranted {
        agent: String,
        need: Need,
        holder: String,
        by: String,
    },
    /// The authorizer stopped without a decision (its time limit): refused, since nothing
    /// granted it. A retry may pass.
    #[error("`{agent}` may not {need}: the check could not decide ({error})")]
    Undecided {
        agent: String,
        need: Need,
        error: String,
    },
}

impl Denial {
    /// For an audit record.
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            Denial::Revoked { id, .. } => serde_json::json!({"revoked": id}),
            Denial::NotGranted {
                need, holder, by, ..
            } => {
                serde_json::json!({"right": need.kind(), "value": need.value(),
                                   "holder": holder, "by": by})
            }
            Denial::Undecided { need, error, .. } => {
                serde_json::json!({"right": need.kind(), "value": need.value(),
                                   "undecided": error})
            }
        }
    }
}

/// Decisions kept per token: a token never changes, so the same request always gets the same
/// answer (revocation is checked apart, at every call).
const MAX_KEPT_DECISIONS: usize = 4096;

/// A verified token.
#[derive(Clone, Debug)]
pub struct Token {
    biscuit: Biscuit,
    text: String,
    grants: Vec<Grant>,
    decided: Arc<Mutex<HashMap<(String, String), bool>>>,
}

impl Token {
    /// A new token from the root key stating `grant`.
    pub fn mint(root: &RootKey, grant: &Grant) -> Result<Token, CapError> {
        let mut builder = Biscuit::builder();
        let mut params = HashMap::new();
        let mut code = String::new();
        for (i, (kind, pattern)) in rights(grant).into_iter().enumerate() {
            code.push_str(&format!("right({{k{i}}}, {{r{i}}});\n"));
            params.insert(format!("k{i}"), Term::Str(kind.to_owned()));
            params.insert(format!("r{i}"), Term::Str(pattern_regex(&pattern)));
        }
        code.push_str("agent({agent});\n");
        params.insert("agent".into(), Term::Str(grant.agent.clone()));
        builder = builder
            .code_with_params(code, params, HashMap::new())
            .map_err(build)?
            .context(context(grant)?);
        let biscuit = builder.build(&root.0).map_err(build)?;
        Token::from_biscuit(biscuit)
    }

    /// This token with a block appended that grants at most `grant` (the result is never
    /// wider than `self`, whatever `grant` says: every block must grant a need).
    pub fn attenuate(&self, grant: &Grant) -> Result<Token, CapError> {
        let mut params = HashMap::new();
        let mut alternatives = Vec::new();
        for (i, (kind, pattern)) in rights(grant).into_iter().enumerate() {
            alternatives.push(format!("request({{k{i}}}, $v), $v.matches({{r{i}}})"));
            params.insert(format!("k{i}"), Term::Str(kind.to_owned()));
            params.insert(format!("r{i}"), Term::Str(pattern_regex(&pattern)));
        }
        let code = if alternatives.is_empty() {
            "check if false;".to_owned()
        } else {
            format!("check if {};", alternatives.join(" or "))
        };
        let block = BlockBuilder::new()
            .code_with_params(code, params, HashMap::new())
            .map_err(build)?
            .context(context(grant)?);
        let biscuit = self.biscuit.append(block).map_err(build)?;
        Token::from_biscuit(biscuit)
    }

    /// Reads a token and verifies its signatures under `root`.
    pub fn parse(text: &str, root: &RootKey) -> Result<Token, CapError> {
        let biscuit = Biscuit::from_base64(text.trim(), root.public())
            .map_err(|e| CapError::Invalid(e.to_string()))?;
        Token::from_biscuit(biscuit)
    }

    fn from_biscuit(biscuit: Biscuit) -> Result<Token, CapError> {
        let text = biscuit.to_base64().map_err(build)?;
        let grants = biscuit
            .context()
            .into_iter()
            .enumerate()
            .map(|(i, context)| {
                let context = context
                    .ok_or_else(|| CapError::Invalid(format!("block {i} states no grant")))?;
                serde_json::from_str(&context)
                    .map_err(|e| CapError::Invalid(format!("block {i}: {e}")))
            })
            .collect::<Result<Vec<Grant>, _>>()?;
        Ok(Token {
            biscuit,
            text,
            grants,
            decided: Arc::default(),
        })
    }

    /// The token as text (URL-safe base64), as it is stored.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Each block's grant, the root's first.
    pub fn grants(&self) -> &[Grant] {
        &self.grants
    }

    /// The agent the newest block was made for.
    pub fn agent(&self) -> &str {
        self.grants.last().map_or("", |g| g.agent.as_str())
    }

    /// Each block's revocation id (hex), the root's first. A child's token holds its parent's
    /// ids, so revoking one of those fails the child too.
    pub fn revocation_ids(&self) -> Vec<String> {
        self.biscuit
            .revocation_identifiers()
            .iter()
            .map(|id| crate::audit::hex(id))
            .collect()
    }

    /// Ok when no block is `revoked` and every block grants every need.
    pub fn check(&self, needs: &[Need], revoked: impl Fn(&str) -> bool) -> Result<(), Denial> {
        if let Some(id) = self.revocation_ids().into_iter().find(|id| revoked(id)) {
            return Err(Denial::Revoked {
                agent: self.agent().to_owned(),
                id,
            });
        }
        for need in needs {
            for (kind, value) in need.expand() {
                match self.decide(kind, &value) {
                    Ok(true) => {}
                    Ok(false) => return Err(self.explain(need)),
                    Err(error) => {
                        return Err(Denial::Undecided {
                            agent: self.agent().to_owned(),
                            need: need.clone(),
                            error,
                        });
                    }
                }
            }
        }
        Ok(())
    }

    /// One run of the biscuit authorizer for `request(kind, value)`: whether a policy allowed
    /// it and every check passed, or why it could not tell.
    fn decide(&self, kind: &str, value: &str) -> Result<bool, String> {
        let key = (kind.to_owned(), value.to_owned());
        let known = self
            .decided
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&key)
            .copied();
        if let Some(allowed) = known {
            return Ok(allowed);
        }
        let allowed = self.authorize(kind, value)?;
        let mut decided = self.decided.lock().unwrap_or_else(PoisonError::into_inner);
        if decided.len() >= MAX_KEPT_DECISIONS {
            decided.clear();
        }
        decided.insert(key, allowed);
        Ok(allowed)
    }

    fn authorize(&self, kind: &str, value: &str) -> Result<bool, String> {
        let params = HashMap::from([
            ("k".to_owned(), Term::Str(kind.to_owned())),
            ("v".to_owned(), Term::Str(value.to_owned())),
        ]);
        let authorizer = AuthorizerBuilder::new()
            .code_with_params(
                "request({k}, {v});
                 allow if request($k, $v), right($k, $r), $v.matches($r);
                 deny if true;",
                params,
                HashMap::new(),
            )
            .map(|b| {
                b.set_limits(biscuit_auth::AuthorizerLimits {
                    max_time: MAX_DECISION_TIME,
                    ..Default::default()
                })
            })
            .and_then(|b| b.build(&self.biscuit));
        let mut authorizer = authorizer.map_err(|e| e.to_string())?;
        match authorizer.authorize() {
            Ok(_) => Ok(true),
            Err(biscuit_auth::error::Token::FailedLogic(_)) => Ok(false),
            Err(other) => Err(other.to_string()),
        }
    }

    /// The first block that does not grant `need`, in words.
    fn explain(&self, need: &Need) -> Denial {
        let refusing = self.grants.iter().find(|grant| {
            let held = rights(grant);
            !need.expand().iter().all(|(kind, value)| {
                held.iter()
                    .any(|(k, pattern)| k == kind && pattern_matches(pattern, value))
            })
        });
        Denial::NotGranted {
            agent: self.agent().to_owned(),
            need: need.clone(),
            holder: refusing.map_or_else(|| self.agent().to_owned(), |g| g.agent.clone()),
            by: refusing.map_or_else(String::new, |g| g.by.clone()),
        }
    }
}

/// Which block refused, in words.
fn whose(agent: &str, holder: &str, by: &str) -> String {
    if by.is_empty() {
        return "its token's checks do not include that".to_owned();
    }
    let by = if by == OPERATOR {
        "the operator".to_owned()
    } else {
        format!("`{by}`")
    };
    if holder == agent {
        format!("the rights {by} gave it do not include that")
    } else {
        format!(
            "its token descends from `{holder}`'s, and the rights {by} gave `{holder}` do not include that"
        )
    }
}

fn build(err: biscuit_auth::error::Token) -> CapError {
    CapError::Build(err.to_string())
}

fn context(grant: &Grant) -> Result<String, CapError> {
    serde_json::to_string(grant).map_err(|e| CapError::Build(e.to_string()))
}

/// Every right a grant states, as (kind, pattern), patterns in path form. A path that may be
/// written may be read; an agent's own memory namespace is `self`.
pub fn rights(grant: &Grant) -> Vec<(&'static str, String)> {
    let c = &grant.capabilities;
    let mut out = Vec::new();
    let names = |out: &mut Vec<(&'static str, String)>, kind, list: &[String]| {
        out.extend(list.iter().map(|p| (kind, name_pattern(p))));
    };
    names(&mut out, "tool", &c.tools);
    out.extend(c.read.iter().chain(&c.write).map(|p| ("read", p.clone())));
    out.extend(c.write.iter().map(|p| ("write", p.clone())));
    let domains: Vec<String> = c.domains.iter().map(|d| d.to_ascii_lowercase()).collect();
    names(&mut out, "domain", &domains);
    if c.spawn {
        names(&mut out, "spawn", &c.templates);
    }
    out.push(("memory_read", "self".to_owned()));
    out.push(("memory_read", "shared".to_owned()));
    out.push(("memory_write", "self".to_owned()));
    if c.shared_memory_write {
        out.push(("memory_write", "shared".to_owned()));
    }
    names(&mut out, "secret", &c.secrets);
    names(&mut out, "channel", &c.channels);
    if c.schedule {
        out.push(("schedule", String::new()));
    }
    if c.skill_write {
        out.push(("skill_write", String::new()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root() -> RootKey {
        RootKey::from_secret(&[7; 32]).unwrap()
    }

    fn grant(agent: &str, by: &str, capabilities: Capabilities) -> Grant {
        Grant {
            agent: agent.into(),
            by: by.into(),
            capabilities,
            budget: Budget::default(),
        }
    }

    fn boss() -> Capabilities {
        Capabilities {
            tools: vec!["read_file".into(), "http_fetch".into(), "shell".into()],
            read: vec!["notes/**".into()],
            write: vec!["out/**".into()],
            domains: vec!["*.example.com".into()],
            secrets: vec!["A".into()],
            ..Capabilities::default()
        }
    }

    #[test]
    fn a_token_grants_what_it_states_and_nothing_else() {
        let token = Token::mint(&root(), &grant("boss", OPERATOR, boss())).unwrap();
        let never = |_: &str| false;
        for need in [
            Need::Tool("read_file".into()),
            Need::Read("notes/a/b.md".into()),
            Need::Read("out/x".into()),
            Need::Write("out/x".into()),
            Need::Domain("API.example.com".into()),
            Need::Secret("A".into()),
            Need::MemoryWrite("self".into()),
            Need::MemoryRead("shared".into()),
        ] {
            assert_eq!(
                token.check(std::slice::from_ref(&need), never),
                Ok(()),
                "{need}"
            );
        }
        for need in [
            Need::Tool("write_file".into()),
            Need::Read("secret.txt".into()),
            Need::Read("notes/../secret.txt".into()),
            Need::Write("notes/a.md".into()),
            Need::Workspace,
            Need::Domain("example.org".into()),
            Need::Secret("B".into()),
            Need::MemoryWrite("shared".into()),
            Need::Spawn("worker".into()),
            Need::Schedule,
        ] {
            let denial = token.check(std::slice::from_ref(&need), never).unwrap_err();
            assert_eq!(
                denial,
                Denial::NotGranted {
                    agent: "boss".into(),
                    need: need.clone(),
                    holder: "boss".into(),
                    by: OPERATOR.into()
                }
            );
        }
    }

    #[test]
    fn an_appended_block_only_narrows() {
        let parent = Token::mint(&root(), &grant("boss", OPERATOR, boss())).unwrap();
        // The child's block claims everything; it still gets only what the parent holds.
        let wide = Capabilities {
            spawn: true,
            shared_memory_write: true,
            ..Capabilities::default()
        };
        let child = parent.attenuate(&grant("kid", "boss", wide)).unwrap();
        let never = |_: &str| false;
        assert_eq!(child.check(&[Need::Read("notes/x".into())], never), Ok(()));
        let denial = child
            .check(&[Need::Tool("write_file".into())], never)
            .unwrap_err();
        assert_eq!(
            denial.to_string(),
            "`kid` may not call the tool `write_file`: its token descends from `boss`'s, and the \
             rights the operator gave `boss` do not include that"
        );
        // A narrower block refuses what the parent would allow, and says who narrowed it.
        let narrow = Capabilities {
            tools: vec!["read_file".into()],
            ..boss()
        };
        let child = parent.attenuate(&grant("kid", "boss", narrow)).unwrap();
        let denial = child
            .check(&[Need::Tool("shell".into())], never)
            .unwrap_err();
        assert!(
            denial
                .to_string()
                .contains("the rights `boss` gave it do not"),
            "{denial}"
        );
        assert_eq!(child.grants().len(), 2);
        assert_eq!(child.agent(), "kid");
    }

    #[test]
    fn revoking_a_parent_fails_its_descendants() {
        let parent = Token::mint(&root(), &grant("boss", OPERATOR, boss())).unwrap();
        let child = parent.attenuate(&grant("kid", "boss", boss())).unwrap();
        let grandchild = child.attenuate(&grant("tot", "kid", boss())).unwrap();
        let parent_id = parent.revocation_ids()[0].clone();
        assert_eq!(grandchild.revocation_ids()[0], parent_id);
        assert_eq!(grandchild.revocation_ids().len(), 3);
        let revoked = |id: &str| id == parent_id;
        let need = [Need::Tool("read_file".into())];
        for token in [&parent, &child, &grandchild] {
            assert!(matches!(
                token.check(&need, revoked),
                Err(Denial::Revoked { .. })
            ));
        }
        // Revoking the child's own block leaves its parent alone.
        let child_id = child.revocation_ids()[1].clone();
        let revoked = |id: &str| id == child_id;
        assert_eq!(parent.check(&need, revoked), Ok(()));
        assert!(grandchild.check(&need, revoked).is_err());
    }

    #[test]
    fn an_edited_token_or_another_root_fails_verification() {
        let token = Token::mint(&root(), &grant("boss", OPERATOR, boss())).unwrap();
        assert!(Token::parse(token.text(), &root()).is_ok());
        let other = RootKey::from_secret(&[8; 32]).unwrap();
        assert!(matches!(
            Token::parse(token.text(), &other),
            Err(CapError::Invalid(_))
        ));
        // Edited by hand: a right widened inside the signed bytes, or any one byte changed.
        use base64::Engine as _;
        let engine = base64::engine::general_purpose::URL_SAFE;
        let bytes = engine.decode(token.text()).unwrap();
        let at = bytes
            .windows(b"notes/".len())
            .position(|w| w == b"notes/")
            .expect("the rights are in the token");
        let mut widened = bytes.clone();
        widened[at..at + 6].copy_from_slice(b"*****/");
        assert!(Token::parse(&engine.encode(&widened), &root()).is_err());
        // Any one byte changed: the token no longer verifies, unless the change only re-spells
        // the same message (protobuf lets a field be written more than one way; the signatures
        // cover what it decodes to), in which case it says exactly what it said.
        let mut refused = 0;
        for at in 0..bytes.len() {
            let mut edited = bytes.clone();
            edited[at] ^= 0x20;
            match Token::parse(&engine.encode(&edited), &root()) {
                Err(_) => refused += 1,
                Ok(same) => {
                    assert_eq!(same.grants(), token.grants(), "byte {at}");
                    assert_eq!(same.revocation_ids(), token.revocation_ids(), "byte {at}");
                }
            }
        }
        assert!(
            refused * 10 > bytes.len() * 9,
            "{refused} of {}",
            bytes.len()
        );
        let round = Token::parse(token.text(), &root()).unwrap();
        assert_eq!(round.grants(), token.grants());
    }
}
