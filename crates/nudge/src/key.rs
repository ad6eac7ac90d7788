//! A reminder's idempotency key and how it becomes a file name.

use chipset_store::EscapeAlphabet;

use crate::error::{Error, Result};

/// The longest source id, in characters (the seed's `varchar(64)`).
pub(crate) const MAX_SOURCE_ID_CHARS: usize = 64;
/// The longest escaped source id, in bytes, so that the index file name and
/// the store's temp name beside it (`.{name}.{pid}.{n}.{salt}.tmp`) fit in 255 bytes.
const MAX_ESCAPED: usize = 200;
/// How many lock files the reminder keys are spread over.
pub(crate) const LOCK_STRIPES: u64 = 64;

/// What makes a reminder unique while it is open or snoozed: (kind, source
/// type, source id).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct ReminderKey {
    kind: String,
    source_type: String,
    source_id: String,
}

impl ReminderKey {
    /// Returns the key, checking the names and the source id (this does not
    /// check that the kind is registered).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidField`] for a bad kind or source type name (1 to 32 of
    /// `a-z`, `0-9`, `_`) or source id (at most 64 characters, no control
    /// characters, at most 200 bytes once escaped); [`Error::EmptySourceId`].
    pub(crate) fn new(
        kind: impl Into<String>,
        source_type: impl Into<String>,
        source_id: impl Into<String>,
    ) -> Result<Self> {
        let key = ReminderKey {
            kind: kind.into(),
            source_type: source_type.into(),
            source_id: source_id.into(),
        };
        check_name("reminder kind", &key.kind)?;
        check_name("source type", &key.source_type)?;
        check_source_id(&key.source_id)?;
        Ok(key)
    }

    /// Returns the kind.
    pub(crate) fn kind(&self) -> &str {
        &self.kind
    }

    /// Returns the source type.
    pub(crate) fn source_type(&self) -> &str {
        &self.source_type
    }

    /// Returns the index file name: the escaped source id plus `.json`.
    pub(crate) fn file_name(&self) -> String {
        format!("{}.json", escape(&self.source_id))
    }

    /// Returns which lock stripe guards this key (FNV-1a over kind, source
    /// type and source id, each followed by a NUL byte: stable across
    /// processes and builds).
    pub(crate) fn stripe(&self) -> u64 {
        let bytes = [&self.kind, &self.source_type, &self.source_id]
            .into_iter()
            .flat_map(|part| part.bytes().chain([0]));
        chipset_store::EscapeAlphabet::fnv1a_64(bytes) % LOCK_STRIPES
    }
}

/// Checks a kind or source type name: 1 to 32 bytes of `a-z`, `0-9`, `_`.
pub(crate) fn check_name(field: &'static str, value: &str) -> Result<()> {
    let rule = if value.is_empty() {
        Some("must not be empty")
    } else if value.len() > 32 {
        Some("must be at most 32 bytes")
    } else if !value
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
    {
        Some("must be made of `a-z`, `0-9` and `_`")
    } else {
        None
    };
    refuse(field, value, rule)
}

/// The most bytes a nudge's or a reminder's message may hold.
pub(crate) const MAX_MESSAGE: usize = 64 * 1024;

/// Checks free text (a message, a note, a reminder's metadata as JSON):
/// at most [`MAX_MESSAGE`] bytes. Line breaks are text: whoever renders
/// it on one line escapes them.
pub(crate) fn check_message(field: &'static str, value: &str) -> Result<()> {
    if value.len() <= MAX_MESSAGE {
        return Ok(());
    }
    // The error names the text by its start, not all of it.
    let start: String = value.chars().take(40).collect();
    refuse(
        field,
        &format!("{start}…"),
        Some("must be at most 65536 bytes"),
    )
}

/// Checks free text with a length bound: not empty, no control characters.
pub(crate) fn check_text(field: &'static str, value: &str, max: usize) -> Result<()> {
    let rule = if value.is_empty() {
        Some("must not be empty")
    } else if value.len() > max {
        Some("is too long")
    } else if value.chars().any(char::is_control) {
        Some("must not contain control characters")
    } else {
        None
    };
    refuse(field, value, rule)
}

fn check_source_id(value: &str) -> Result<()> {
    if value.is_empty() {
        return Err(Error::EmptySourceId);
    }
    let rule = if value.chars().count() > MAX_SOURCE_ID_CHARS {
        Some("must be at most 64 characters")
    } else if value.chars().any(char::is_control) {
        Some("must not contain control characters")
    } else if escape(value).len() > MAX_ESCAPED {
        Some("must be at most 200 bytes once escaped")
    } else {
        None
    };
    refuse("source id", value, rule)
}

fn refuse(field: &'static str, value: &str, rule: Option<&'static str>) -> Result<()> {
    match rule {
        Some(rule) => Err(Error::InvalidField {
            field,
            value: value.to_owned(),
            rule,
        }),
        None => Ok(()),
    }
}

/// Escapes a source id into a file name with the store's escaper and its
/// [`Readable`](EscapeAlphabet::Readable) alphabet: ASCII letters, digits,
/// `-`, `_`, and non-ASCII characters stay; `.` stays except first; every
/// other byte becomes `%XX` (upper-case hex). Reversible, and never a
/// dot-name, a separator, or `..`.
pub(crate) fn escape(source_id: &str) -> String {
    EscapeAlphabet::Readable.escape(source_id, usize::MAX)
}

/// Reverses [`escape`] on an index file name (with or without `.json`).
pub(crate) fn unescape(name: &str) -> Option<String> {
    EscapeAlphabet::unescape(name.strip_suffix(".json").unwrap_or(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A kind or source type name of exactly 32 bytes is allowed; 33 is not.
    #[test]
    fn a_name_of_32_bytes_is_the_longest_allowed() {
        check_name("reminder kind", &"a".repeat(32)).unwrap();
        let err = check_name("reminder kind", &"a".repeat(33)).unwrap_err();
        assert!(err.to_string().contains("at most 32 bytes"), "{err}");
    }

    /// Free text as long as its bound is allowed; one byte more is not.
    #[test]
    fn text_of_the_bound_is_the_longest_allowed() {
        check_text("action", &"a".repeat(64), 64).unwrap();
        let err = check_text("action", &"a".repeat(65), 64).unwrap_err();
        assert!(err.to_string().contains("too long"), "{err}");
    }

    #[track_caller]
    fn check(source_id: &str, escaped: &str) {
        assert_eq!(escape(source_id), escaped);
        assert_eq!(
            unescape(&format!("{escaped}.json")).as_deref(),
            Some(source_id)
        );
        // Any id type checks the rules of one safe path segment.
        chipset_store::AgentId::new(format!("{escaped}.json")).unwrap();
    }

    #[test]
    fn escaping() {
        check("sess-01_a", "sess-01_a");
        check("a/b", "a%2Fb");
        check("..", "%2E.");
        check(".hidden", "%2Ehidden");
        check("v1.2", "v1.2");
        check("100%", "100%25");
        check("a b:c", "a%20b%3Ac");
        check("ünï", "ünï");
        check("C:\\x", "C%3A%5Cx");
    }

    /// The escaped source id is the index file's name, which other
    /// processes and versions look up: pinned as literals (computed outside
    /// this code), so a change of the alphabet fails here.
    #[test]
    fn file_names_are_pinned() {
        check("a.b.c", "a.b.c");
        check("~!+=", "%7E%21%2B%3D");
        check("é.x", "é.x");
        check(".é", "%2Eé");
        check("\u{1F600}/x", "\u{1F600}%2Fx");
        check("a%2F", "a%252F");
        check("日本.txt", "日本.txt");
        let key = ReminderKey::new("review_due", "pr", "a/b.c").unwrap();
        assert_eq!(key.file_name(), "a%2Fb.c.json");
        assert_eq!(unescape("a%2"), None, "a cut escape does not decode");
        assert_eq!(unescape("%FF"), None, "not UTF-8");
    }

    #[test]
    fn source_id_rules() {
        assert!(matches!(
            ReminderKey::new("k", "s", ""),
            Err(Error::EmptySourceId)
        ));
        assert!(ReminderKey::new("k", "s", "x".repeat(64)).is_ok());
        assert!(matches!(
            ReminderKey::new("k", "s", "x".repeat(65)),
            Err(Error::InvalidField {
                field: "source id",
                ..
            })
        ));
        assert!(ReminderKey::new("k", "s", "/".repeat(64)).is_ok());
        assert!(ReminderKey::new("k", "s", "\u{1F600}".repeat(50)).is_ok());
        assert!(matches!(
            ReminderKey::new("k", "s", "\u{1F600}".repeat(51)),
            Err(Error::InvalidField {
                field: "source id",
                ..
            })
        ));
        assert!(matches!(
            ReminderKey::new("k", "s", "a\nb"),
            Err(Error::InvalidField { .. })
        ));
    }

    /// The stripe is a contract between processes and versions: two
    /// processes (or an old and a new build) must pick the same lock file
    /// for one key. The values are pinned literally (computed outside this
    /// code: FNV-1a 64 over kind, source type and source id, each followed
    /// by a NUL byte, modulo 64), so a change of the hash fails here.
    #[test]
    fn stripes_are_stable() {
        let stripe = |k: &str, t: &str, id: &str| ReminderKey::new(k, t, id).unwrap().stripe();
        assert_eq!(LOCK_STRIPES, 64);
        assert_eq!(stripe("wrap_session", "session", "s-1"), 7);
        assert_eq!(stripe("review_due", "pr", "1234"), 58);
        assert_eq!(stripe("a", "b", "c"), 29);
        // The NUL separators count: the same bytes split differently hash differently.
        assert_eq!(stripe("ab", "b", "c"), 23);
        assert_eq!(stripe("a", "bb", "c"), 43);
        // Non-ASCII bytes hash as their UTF-8 bytes, not escaped.
        assert_eq!(stripe("review_due", "pr", "ünï"), 33);
        assert_eq!(stripe("wrap_session", "session", "a/b"), 20);
        assert_eq!(stripe("k", "s", "\u{1F600}"), 8);
    }
}
