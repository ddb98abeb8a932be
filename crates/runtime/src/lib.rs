//! reef-runtime: the kernel of reef's daemon. So far: agent templates (`templates`); the
//! supervisor, inboxes and the bus build on `reef-store`'s agents, inbox and events tables.

mod templates;

pub use templates::{
    BUILTIN_TEMPLATES, SandboxOverrides, Template, TemplateError, TemplateSource, Templates,
};
