//! Outgoing text under the leak policy: a known secret may go only to a host its `only-for`
//! policy names, never "anywhere"; credential patterns follow their actions.

use reef_core::{SecretPolicy, SecretSource, SecretSpec};
use reef_security::leak::{LeakAction, LeakPolicy};
use reef_tools::Secrets;

const VALUE: &str = "tok-8ZqP2mX7wR4vL9kT";

fn secrets(dir: &std::path::Path, policy: LeakPolicy) -> Secrets {
    let path = dir.join("tok");
    std::fs::write(&path, VALUE).unwrap();
    Secrets::new(vec![SecretSpec {
        name: "TOK".into(),
        source: SecretSource::File(path),
        description: None,
        policy: SecretPolicy::OnlyFor(vec!["domain:*.allowed.test".parse().unwrap()]),
    }])
    .with_leak_policy(policy)
}

#[test]
fn a_known_secret_goes_only_where_its_policy_says() {
    let dir = tempfile::tempdir().unwrap();
    let s = secrets(dir.path(), LeakPolicy::default());
    let text = format!("{{\"url\": \"https://x/?k={VALUE}\"}}");
    let to = |h: &str| vec![h.to_owned()];
    assert!(
        s.review_outgoing(&text, Some(&to("api.allowed.test")))
            .findings
            .is_empty()
    );
    for hosts in [Some(to("evil.test")), Some(to("allowed.test")), None] {
        let review = s.review_outgoing(&text, hosts.as_deref());
        assert_eq!(review.action, LeakAction::Block, "{hosts:?}");
        assert_eq!(review.describe(), "the secret TOK");
    }
    // Two hosts, one not allowed: blocked.
    let both = vec!["api.allowed.test".to_owned(), "evil.test".to_owned()];
    assert_eq!(
        s.review_outgoing(&text, Some(&both)).action,
        LeakAction::Block
    );
}

#[test]
fn pattern_actions_apply_per_kind() {
    let dir = tempfile::tempdir().unwrap();
    let mut policy = LeakPolicy {
        default: LeakAction::Warn,
        ..LeakPolicy::default()
    };
    policy
        .by_kind
        .insert("github_token".into(), LeakAction::Sanitize);
    policy.by_kind.insert("jwt".into(), LeakAction::Ignore);
    let s = secrets(dir.path(), policy);
    let gh = "ghp_R7x2Lq9Zt4Wm8Kp3Vn6Bd1Hs5Jc0Fy2Ga7Qe";
    let review = s.review_outgoing(&format!("token {gh} here"), None);
    assert_eq!(review.action, LeakAction::Sanitize);
    assert_eq!(
        review.sanitize(&format!("token {gh} here")),
        "token [redacted github_token] here"
    );
    let jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dBjftJeZ4CVPmB92K27uhbUJU1p1r_wW1gFWFOEjXk";
    assert!(s.review_outgoing(jwt, None).findings.is_empty());
    // Anything else found is let through with a warning.
    let url = "https://deploy:Zr8#kQ2m!pW5x@host.test/";
    assert_eq!(s.review_outgoing(url, None).action, LeakAction::Warn);
}
