//! A runtime whose agents answer with a fixed text through the mock model, its tools under
//! the real default sandbox, and the router over it.

use reef_runtime::{HelperCommand, Runtime, RuntimeOptions, Templates};
use reef_test_support::{MockLlm, MockReply, TestHome, sandbox_helper};
use std::sync::Arc;

pub const TOKEN: &str = "0123456789abcdef0123456789abcdef";

pub struct Served {
    pub router: axum::Router,
    pub runtime: Runtime,
    pub mock: MockLlm,
    pub home: TestHome,
}

/// `extra` is appended to the configuration; `before` runs on the home first (to write a
/// file the configuration names).
pub async fn serve(answer: &'static str, before: impl FnOnce(&TestHome) -> String) -> Served {
    let mock = MockLlm::start_responder(Arc::new(move |_| MockReply::text(answer))).await;
    serve_on(mock, before).await
}

/// As [`serve`], with agents on `mock`.
pub async fn serve_on(mock: MockLlm, before: impl FnOnce(&TestHome) -> String) -> Served {
    let home = TestHome::new();
    let extra = before(&home);
    home.write_config(&format!(
        "[providers.mock]\nbase_url = \"{}\"\nmodel = \"m\"\nstream = false\nmax_retries = 0\n\n\
         [sandbox]\nrequired = true\n\n{extra}",
        mock.base_url()
    ));
    let (runtime, _) = Runtime::start(RuntimeOptions {
        config: home.load_config(),
        templates: Templates::builtin().unwrap(),
        helper: Some(HelperCommand {
            program: sandbox_helper(),
            args: Vec::new(),
        }),
        model_override: None,
        clock: None,
    })
    .await
    .unwrap();
    Served {
        router: reef_server::router(runtime.clone(), TOKEN, "127.0.0.1:7447".parse().unwrap()),
        runtime,
        mock,
        home,
    }
}
