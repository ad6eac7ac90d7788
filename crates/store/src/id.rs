//! Validated ids: every value that becomes a path segment goes through here.

use crate::error::{Error, Result};

/// The longest id accepted, in bytes.
pub(crate) const MAX_ID_LEN: usize = 128;

/// Checks that `value` is safe to use as one path segment, by the rules
/// [`define_id!`](crate::define_id) lists: what every id's `new` calls.
///
/// # Errors
///
/// [`Error::InvalidId`] naming `kind`, the value and the broken rule.
pub fn validate_segment(kind: &'static str, value: &str) -> Result<()> {
    match segment_rule(value, MAX_ID_LEN) {
        Some(rule) => Err(Error::InvalidId {
            kind,
            value: value.to_owned(),
            rule,
        }),
        None => Ok(()),
    }
}

/// The rule `value` breaks as one path segment of at most `max` bytes
/// ([`MAX_ID_LEN`] for an id, [`MAX_NAME_LEN`](crate::path::MAX_NAME_LEN) for a
/// [`StatePath`](crate::StatePath) name), if any.
pub(crate) fn segment_rule(value: &str, max: usize) -> Option<&'static str> {
    if is_plain_segment(value, max) {
        None
    } else {
        broken_rule(value, max)
    }
}

/// The common case, in one pass over the bytes (a listing checks every
/// name it reads): printable ASCII other than the separators, not starting
/// with a dot (so neither `.` nor `..`). Every such name passes
/// [`broken_rule`].
fn is_plain_segment(value: &str, max: usize) -> bool {
    !value.is_empty()
        && value.len() <= max
        && !value.starts_with('.')
        && value
            .bytes()
            .all(|b| (0x20..0x7f).contains(&b) && b != b'/' && b != b'\\')
}

/// The rules of [`segment_rule`], each checked in turn.
fn broken_rule(value: &str, max: usize) -> Option<&'static str> {
    if value.is_empty() {
        Some("must not be empty")
    } else if value.len() > max {
        Some(if max == MAX_ID_LEN {
            "must be at most 128 bytes"
        } else {
            "must be at most 255 bytes"
        })
    } else if value == "." || value == ".." {
        Some("must not be `.` or `..`")
    } else if value.starts_with('.') {
        Some("must not start with `.`")
    } else if value.contains(['/', '\\']) {
        Some("must not contain a path separator (`/` or `\\`)")
    } else if value.contains('\0') {
        Some("must not contain NUL")
    } else if value.chars().any(char::is_control) {
        Some("must not contain control characters")
    } else {
        None
    }
}

/// Defines a validated string newtype that is safe as a path segment.
///
/// The type gets `new`, `as_str`, `FromStr`, `TryFrom<&str>`, `Display`,
/// `AsRef<str>`, `From<Id> for String`, ordering, hashing, serde support that validates on
/// deserialization, and [`Segment`](crate::Segment), so
/// [`StatePath::join_id`](crate::StatePath::join_id) joins it infallibly. Channel crates use it for their own ids.
///
/// `new` checks, in this order: not empty; at most 128 bytes; not `.` or
/// `..`; no leading `.` (that would hide it, and names starting with a dot
/// are reserved for temp, lock and quarantine files); no `/` or `\`; no
/// NUL; no other control character. A value that breaks one is
/// [`Error::InvalidId`](crate::Error::InvalidId), naming the kind, the
/// value and the rule.
///
/// ```
/// chipset_store::define_id! {
///     /// A reminder id.
///     pub struct ReminderId("reminder id");
/// }
/// assert!(ReminderId::new("r-1").is_ok());
/// assert!(ReminderId::new("../etc").is_err());
/// ```
#[macro_export]
macro_rules! define_id {
    ($(#[$meta:meta])* $vis:vis struct $name:ident($kind:literal);) => {
        $(#[$meta])*
        #[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
        $vis struct $name(String);

        impl $crate::__private::serde::Serialize for $name {
            fn serialize<S>(&self, s: S) -> ::std::result::Result<S::Ok, S::Error>
            where
                S: $crate::__private::serde::Serializer,
            {
                s.serialize_str(&self.0)
            }
        }

        impl<'de> $crate::__private::serde::Deserialize<'de> for $name {
            fn deserialize<D>(d: D) -> ::std::result::Result<Self, D::Error>
            where
                D: $crate::__private::serde::Deserializer<'de>,
            {
                let s = <String as $crate::__private::serde::Deserialize>::deserialize(d)?;
                Self::new(s).map_err(<D::Error as $crate::__private::serde::de::Error>::custom)
            }
        }

        impl $name {
            /// The kind of id, as named in errors.
            pub const KIND: &'static str = $kind;

            /// Validates `value` and wraps it.
            ///
            /// # Errors
            ///
            /// [`Error::InvalidId`](chipset_store::Error::InvalidId) when the value is not a safe path segment.
            pub fn new(value: impl Into<String>) -> $crate::Result<Self> {
                let value = value.into();
                $crate::__private::validate_segment($kind, &value)?;
                Ok(Self(value))
            }

            /// Returns the id as a string slice.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl $crate::__private::Sealed for $name {}

        impl $crate::Segment for $name {
            fn segment(&self) -> &str {
                &self.0
            }
        }

        impl ::std::str::FromStr for $name {
            type Err = $crate::Error;
            fn from_str(s: &str) -> $crate::Result<Self> {
                Self::new(s)
            }
        }

        impl ::std::convert::TryFrom<String> for $name {
            type Error = $crate::Error;
            fn try_from(s: String) -> $crate::Result<Self> {
                Self::new(s)
            }
        }

        impl ::std::convert::TryFrom<&str> for $name {
            type Error = $crate::Error;
            fn try_from(s: &str) -> $crate::Result<Self> {
                Self::new(s)
            }
        }

        impl ::std::convert::From<$name> for String {
            fn from(id: $name) -> String {
                id.0
            }
        }

        impl ::std::convert::From<$crate::SortableId> for $name {
            fn from(id: $crate::SortableId) -> Self {
                // A sortable id is digits, hyphens and hex: always a safe segment.
                Self(String::from(id))
            }
        }

        impl ::std::convert::AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl ::std::borrow::Borrow<str> for $name {
            fn borrow(&self) -> &str {
                &self.0
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl ::std::fmt::Debug for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                ::std::fmt::Debug::fmt(&self.0, f)
            }
        }
    };
}

// The two ids every channel keys on stay here (an agent's hook, nudges,
// inbox and queue; mail's and the loops' tasks): they are the store's
// vocabulary as much as any channel's. Ids one channel owns live in it
// (`chipset_hook::BeadId`, `chipset_mail::MessageId`).

define_id! {
    /// An agent id such as `polecat-alpha` or `mayor-a1b2c`.
    pub struct AgentId("agent id");
}

define_id! {
    /// A task id such as `M005-S007-T0002` (mail's `phase`).
    pub struct TaskId("task id");
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// The one-pass check never passes a name that a rule refuses: so
        /// `segment_rule`, which takes its word for those, gives the rules'
        /// answer for every name. (Control characters, DEL, C1 controls
        /// and characters past ASCII are all in the alphabet.)
        #[test]
        fn a_plain_segment_breaks_no_rule(value in "[\\x00-\\u{a0}\\u{1F600}]{0,20}", max in 1usize..24) {
            if is_plain_segment(&value, max) {
                proptest::prop_assert_eq!(broken_rule(&value, max), None);
            }
        }
    }

    #[track_caller]
    fn check(value: &str, expected: Result<(), &str>) {
        let got = validate_segment("agent id", value).map_err(|e| match e {
            Error::InvalidId { rule, .. } => rule,
            other => panic!("unexpected error {other}"),
        });
        assert_eq!(got, expected, "value {value:?}");
    }

    #[test]
    fn seed_ids_are_accepted() {
        for id in [
            "polecat-alpha",
            "mayor-a1b2c",
            "np-critic",
            "M005-S007-T0002",
            "gt-abc12",
            "witness-d3e4f",
            "1730000000123-9b3e0c1a-0000-4000-8000-000000000000",
            "a.b",
            "x..y",
            &"a".repeat(128),
        ] {
            check(id, Ok(()));
        }
    }

    #[test]
    fn unsafe_ids_are_rejected_with_the_rule() {
        check("", Err("must not be empty"));
        check(&"a".repeat(129), Err("must be at most 128 bytes"));
        check(".", Err("must not be `.` or `..`"));
        check("..", Err("must not be `.` or `..`"));
        check(".hidden", Err("must not start with `.`"));
        check(
            "a/b",
            Err("must not contain a path separator (`/` or `\\`)"),
        );
        check(
            "a\\b",
            Err("must not contain a path separator (`/` or `\\`)"),
        );
        check("../etc", Err("must not start with `.`"));
        check("a\0b", Err("must not contain NUL"));
        check("a\nb", Err("must not contain control characters"));
        check("a\u{7f}b", Err("must not contain control characters"));
    }

    #[test]
    fn error_names_value_and_rule() {
        let err = AgentId::new("a/b").unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid agent id \"a/b\": must not contain a path separator (`/` or `\\`)"
        );
    }

    #[test]
    fn deserialization_validates() {
        let ok: AgentId = serde_json::from_str("\"polecat-alpha\"").unwrap();
        assert_eq!(ok.as_str(), "polecat-alpha");
        assert!(serde_json::from_str::<AgentId>("\"../x\"").is_err());
    }
}
