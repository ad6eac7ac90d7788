//! File names: events `{P}-{id}-{source}-{kind}.json`, de-duplication keys.

use chipset_store::EscapeAlphabet;

use crate::format::{EventId, Priority};

// An event id parses from text as every other id does (format.rs has its
// `FromStr`; these sit here, with the names that carry ids, to keep
// format.rs within its size).
impl TryFrom<&str> for EventId {
    type Error = chipset_store::Error;

    fn try_from(s: &str) -> chipset_store::Result<Self> {
        EventId::new(s)
    }
}

impl TryFrom<String> for EventId {
    type Error = chipset_store::Error;

    fn try_from(s: String) -> chipset_store::Result<Self> {
        EventId::new(s)
    }
}

// And it reads as text as every other id does.
impl AsRef<str> for EventId {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl std::borrow::Borrow<str> for EventId {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl From<EventId> for String {
    fn from(id: EventId) -> String {
        id.as_str().to_owned()
    }
}

/// The longest escaped source or kind kept in a file name, in bytes. The
/// file's contents hold the full values; the name only has to be unique
/// (the id makes it so) and readable.
const LABEL_IN_NAME: usize = 40;
/// Escaped keys longer than this are cut and suffixed with a hash.
const KEY_IN_NAME: usize = 96;

/// Percent-encodes every byte outside `[A-Za-z0-9_-]`, stopping before `max`
/// bytes: the store's escaper with its [`Portable`](EscapeAlphabet::Portable)
/// alphabet.
pub(crate) fn escape(text: &str, max: usize) -> String {
    EscapeAlphabet::Portable.escape(text, max)
}

/// Returns an event's file name. A sorted listing of names is the processing
/// order: priority digit first, then the id (time, then a counter within
/// one millisecond), so one publisher's events keep their order whatever
/// their source and kind.
pub(crate) fn event_file_name(
    priority: Priority,
    id: &EventId,
    source: &str,
    kind: &str,
) -> String {
    format!(
        "{}-{id}-{}-{}.json",
        priority.digit(),
        escape(source, LABEL_IN_NAME),
        escape(kind, LABEL_IN_NAME)
    )
}

/// Returns the file name of a de-duplication key: the escaped key, or when
/// that is long, its first bytes, `~` and a 64-bit FNV-1a hash of the whole
/// key (the record holds the full key, so a hash collision is detected).
pub(crate) fn dedup_file_name(key: &str) -> String {
    let full = escape(key, usize::MAX);
    if full.len() <= KEY_IN_NAME {
        return format!("{full}.json");
    }
    let hash = EscapeAlphabet::fnv1a_64(key.bytes());
    format!("{}~{hash:016x}.json", &full[..64])
}

/// One file in a queue or processed directory, known by its name alone
/// (nothing was read): cheap to list for counts and wake-ups.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct QueueEntry {
    name: String,
    priority: Priority,
    id: EventId,
}

impl QueueEntry {
    /// Parses an event file name; `None` for anything else.
    pub(crate) fn parse(name: &str) -> Option<Self> {
        let stem = name.strip_suffix(".json")?;
        let digit = stem.as_bytes().first()?.checked_sub(b'0')?;
        let priority = Priority::from_digit(digit)?;
        let rest = stem.get(1..)?.strip_prefix('-')?;
        let dash = rest.find('-')?;
        let id_end = dash + 1 + 36;
        let id = EventId::new(rest.get(..id_end)?).ok()?;
        let tail = rest.get(id_end..)?;
        if !(tail.is_empty() || tail.starts_with('-')) {
            return None;
        }
        Some(QueueEntry {
            name: name.to_owned(),
            priority,
            id,
        })
    }

    /// Returns the file name.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// Returns the priority encoded in the name.
    pub(crate) fn priority(&self) -> Priority {
        self.priority
    }

    /// Returns the event id encoded in the name.
    pub(crate) fn id(&self) -> &EventId {
        &self.id
    }

    /// Returns the event id, dropping the rest.
    pub(crate) fn into_id(self) -> EventId {
        self.id
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "1730000000123-9b3e0c1a-5d2f-4e1b-8a6c-0123456789ab";

    #[track_caller]
    fn check(source: &str, kind: &str, expected: &str) {
        let id = EventId::new(ID).unwrap();
        let name = event_file_name(Priority::High, &id, source, kind);
        assert_eq!(name, expected);
        let entry = QueueEntry::parse(&name).expect("parses back");
        assert_eq!(entry.id(), &id);
        assert_eq!(entry.priority(), Priority::High);
    }

    #[test]
    fn names_escape_source_and_kind() {
        check(
            "polecat-alpha",
            "task_done",
            "1-1730000000123-9b3e0c1a-5d2f-4e1b-8a6c-0123456789ab-polecat-alpha-task_done.json",
        );
        check(
            "../x y",
            "a/b.c",
            "1-1730000000123-9b3e0c1a-5d2f-4e1b-8a6c-0123456789ab-%2E%2E%2Fx%20y-a%2Fb%2Ec.json",
        );
        check(
            "é",
            "k",
            "1-1730000000123-9b3e0c1a-5d2f-4e1b-8a6c-0123456789ab-%C3%A9-k.json",
        );
    }

    #[test]
    fn long_labels_are_cut_without_splitting_an_escape() {
        let out = escape(&"/".repeat(100), LABEL_IN_NAME);
        assert_eq!(out.len(), 39);
        assert!(out.ends_with("%2F"));
        let name = event_file_name(
            Priority::Low,
            &EventId::new(ID).unwrap(),
            &"s".repeat(128),
            &"k".repeat(128),
        );
        assert!(name.len() < 255);
    }

    /// Labels in event names and dedup keys are file names other processes
    /// and versions read: the escaping and the cut are pinned as literals
    /// (computed outside this code).
    #[test]
    fn escapes_are_pinned() {
        assert_eq!(escape("a.b é~", usize::MAX), "a%2Eb%20%C3%A9%7E");
        assert_eq!(escape("polecat-alpha_2", usize::MAX), "polecat-alpha_2");
        assert_eq!(escape(&"/".repeat(100), LABEL_IN_NAME), "%2F".repeat(13));
        assert_eq!(escape(&"s".repeat(128), LABEL_IN_NAME), "s".repeat(40));
        // The cut is per byte: an escape never split, a character may be.
        assert_eq!(
            escape(&format!("{}é", "a".repeat(36)), LABEL_IN_NAME),
            format!("{}%C3", "a".repeat(36))
        );
        assert_eq!(
            escape(&format!("{}/", "x".repeat(38)), LABEL_IN_NAME),
            "x".repeat(38)
        );
        // The dedup cut is over escaped bytes and may split an escape.
        assert_eq!(
            dedup_file_name(&"ü".repeat(40)),
            format!("{}%C3%~4bd4732601945065.json", "%C3%BC".repeat(10))
        );
        assert_eq!(
            dedup_file_name(&"k".repeat(97)),
            format!("{}~d5ff6937fd62842a.json", "k".repeat(64))
        );
    }

    #[test]
    fn foreign_names_do_not_parse() {
        for name in [
            "notes.txt",
            "x.json",
            "4-1730000000123-9b3e0c1a-5d2f-4e1b-8a6c-0123456789ab-a-b.json",
            "1-1730000000123-9b3e0c1a-5d2f-4e1b-8a6c-0123456789abX.json",
            "1-1730000000123-nonsense.json",
            "1-.json",
        ] {
            assert_eq!(QueueEntry::parse(name), None, "{name}");
        }
    }

    #[test]
    fn sorted_names_are_priority_then_id_order() {
        let a = EventId::new("1730000000123-00000000-0000-4000-8000-000000000001").unwrap();
        let b = EventId::new("1730000000123-00000000-0000-4000-8000-000000000002").unwrap();
        let c = EventId::new("1730000000124-00000000-0000-4000-8000-000000000000").unwrap();
        let mut names = [
            event_file_name(Priority::Low, &a, "z", "z"),
            event_file_name(Priority::Normal, &c, "a", "a"),
            event_file_name(Priority::Normal, &b, "a", "a"),
            event_file_name(Priority::Normal, &a, "zz", "zz"),
            event_file_name(Priority::Critical, &c, "m", "m"),
        ];
        names.sort();
        let order: Vec<_> = names
            .iter()
            .map(|n| {
                let e = QueueEntry::parse(n).unwrap();
                (e.priority(), e.id().clone())
            })
            .collect();
        let mut expected = order.clone();
        expected.sort();
        assert_eq!(order, expected);
    }

    #[test]
    fn dedup_names_are_safe_and_distinct() {
        assert_eq!(dedup_file_name("debug.chat#42"), "debug%2Echat%2342.json");
        let long_a = dedup_file_name(&format!("{}a", "k".repeat(200)));
        let long_b = dedup_file_name(&format!("{}b", "k".repeat(200)));
        assert_ne!(long_a, long_b);
        assert!(long_a.len() < 100);
        assert!(!dedup_file_name("..").starts_with('.'));
    }

    /// A dedup file name is a contract between processes and versions: a
    /// publisher of another build must find the record an earlier one wrote
    /// for the same key. The hashed names are pinned literally (computed
    /// outside this code: the first 64 escaped bytes, `~`, and FNV-1a 64 of
    /// the whole key in 16 hex digits), so a change of the hash or of the
    /// cut fails here.
    #[test]
    fn dedup_names_are_pinned() {
        // Short keys are the escaped key itself, up to 96 bytes.
        assert_eq!(dedup_file_name("k"), "k.json");
        assert_eq!(
            dedup_file_name(&"k".repeat(96)),
            format!("{}.json", "k".repeat(96))
        );
        let k64 = "k".repeat(64);
        assert_eq!(
            dedup_file_name(&"k".repeat(97)),
            format!("{k64}~{:016x}.json", fnv_reference(&"k".repeat(97)))
        );
        assert_eq!(
            dedup_file_name(&"k".repeat(100)),
            format!("{k64}~d8bad7c459a6d6f9.json")
        );
        assert_eq!(
            dedup_file_name(&format!("{}a", "k".repeat(200))),
            format!("{k64}~7ee7309045c8a434.json")
        );
        assert_eq!(
            dedup_file_name(&format!("{}b", "k".repeat(200))),
            format!("{k64}~7ee7339045c8a94d.json")
        );
        // The hash is over the key, the cut over the escaped key.
        assert_eq!(
            dedup_file_name(&"health-escalation/polecat-alpha/gt-abc12/3".repeat(3)),
            "health-escalation%2Fpolecat-alpha%2Fgt-abc12%2F3health-escalatio~ded2ef496a4c3c27.json"
        );
        // The reference vectors of FNV-1a 64, so the helper above is the real thing.
        assert_eq!(fnv_reference(""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv_reference("a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv_reference("foobar"), 0x8594_4171_f739_67e8);
    }

    /// FNV-1a 64, written out again for the test.
    fn fnv_reference(text: &str) -> u64 {
        text.bytes().fold(0xcbf2_9ce4_8422_2325, |h: u64, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        })
    }
}
