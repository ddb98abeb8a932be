//! `[hooks]`: webhooks with a secret by name and a route, and errors that name the key.

use crate::{Fixture, MAIN};
use reef_config::{DEFAULT_MAX_BODY, HookRoute};
use std::path::Path;

fn load(extra: &str) -> Result<reef_config::Config, String> {
    let fx = Fixture::new();
    fx.write(
        Path::new("home/reef.toml"),
        &format!("{MAIN}\n[secrets.HOOK_KEY]\nenv = \"HOOK_KEY\"\n\n{extra}"),
    );
    fx.load(&[], &[]).map_err(|e| e.to_string())
}

#[test]
fn hooks_route_to_an_agent_or_a_one_off_agent() {
    let config = load(
        "[hooks]\nmax_body = \"2M\"\n\n\
         [hooks.github]\nsecret = \"HOOK_KEY\"\nroute = \"agent:ada\"\n\n\
         [hooks.alerts]\nsecret = \"HOOK_KEY\"\nroute = \"spawn-once:worker\"\n",
    )
    .unwrap();
    assert_eq!(config.hooks.max_body, 2 * 1024 * 1024);
    assert_eq!(
        config.hooks.hooks["github"].route,
        HookRoute::Agent("ada".into())
    );
    assert_eq!(config.hooks.hooks["github"].secret, "HOOK_KEY");
    assert_eq!(
        config.hooks.hooks["alerts"].route,
        HookRoute::SpawnOnce("worker".into())
    );
    assert_eq!(load("").unwrap().hooks.max_body, DEFAULT_MAX_BODY);
}

#[test]
fn bad_hooks_name_the_key() {
    for (toml, key, message) in [
        (
            "[hooks.gh]\nroute = \"agent:ada\"\n",
            "hooks.gh.secret",
            "missing",
        ),
        (
            "[hooks.gh]\nsecret = \"NOPE\"\nroute = \"agent:ada\"\n",
            "hooks.gh.secret",
            "no [secrets.NOPE]",
        ),
        (
            "[hooks.gh]\nsecret = \"HOOK_KEY\"\n",
            "hooks.gh.route",
            "missing",
        ),
        (
            "[hooks.gh]\nsecret = \"HOOK_KEY\"\nroute = \"spawn:worker\"\n",
            "hooks.gh.route",
            "not a route",
        ),
        (
            "[hooks.\"Bad Name\"]\nsecret = \"HOOK_KEY\"\nroute = \"agent:ada\"\n",
            "hooks.Bad Name",
            "part of its URL",
        ),
        ("[hooks]\nmax_body = \"65M\"\n", "hooks.max_body", "between"),
    ] {
        let err = load(toml).unwrap_err();
        assert!(err.contains(key), "{toml}: {err}");
        assert!(err.contains(message), "{toml}: {err}");
    }
}
