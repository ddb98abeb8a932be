//! Typed identifiers, so a session id can never be passed where a tool call id is expected.

use serde::{Deserialize, Serialize};
use std::fmt;

macro_rules! string_id {
    ($(#[$meta:meta])* $name:ident, $prefix:literal) => {
        $(#[$meta])*
        #[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            /// A fresh, time-ordered id (UUIDv7) with a readable prefix.
            pub fn new() -> Self {
                Self(format!("{}{}", $prefix, uuid::Uuid::now_v7().simple()))
            }

            /// Wraps an id received from outside (a model, a user, the store).
            pub fn from_string(s: impl Into<String>) -> Self {
                Self(s.into())
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl Default for $name {
            fn default() -> Self {
                Self::new()
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl From<&str> for $name {
            fn from(s: &str) -> Self {
                Self(s.to_owned())
            }
        }
    };
}

string_id!(
    /// One conversation: its transcript lives in the store under this id.
    SessionId,
    "ses_"
);
string_id!(
    /// One submission from a front end; events caused by it carry the same id.
    SubmissionId,
    "sub_"
);
string_id!(
    /// One tool call; models choose their own ids, reef keeps them verbatim.
    ToolCallId,
    "call_"
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_prefixed_and_unique() {
        let a = SessionId::new();
        let b = SessionId::new();
        assert!(a.as_str().starts_with("ses_"));
        assert_ne!(a, b);
    }
}
string_id!(
    /// One durable agent of the daemon.
    AgentId,
    "agt_"
);
