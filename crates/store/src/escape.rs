//! One percent-escaper for file names built from free text, and the FNV-1a
//! hash the channels use where a name or a stripe must be stable.

use std::fmt::Write as _;

/// Which characters [`EscapeAlphabet::escape`] keeps as they are. Every other byte
/// becomes `%XX` (upper-case hex). Both alphabets keep `%` out, so the
/// escaping is reversible ([`EscapeAlphabet::unescape`]), and neither can produce a
/// separator, a control character, a leading dot or `..`.
///
/// There are two because two file-name contracts already use them, and a
/// file name is read by other processes and other versions, so neither can
/// change:
///
/// - the bus escapes event labels and de-duplication keys into names that
///   are never read back, only matched, and keeps them plain ASCII
///   ([`EscapeAlphabet::Portable`]);
/// - the nudge reminder index names a file after a source id and reads the
///   id back from the listing, so it keeps what a person can read
///   ([`EscapeAlphabet::Readable`]): `v1.2` and `ünï` stay as they are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum EscapeAlphabet {
    /// Keeps `A-Z`, `a-z`, `0-9`, `_` and `-`; escapes every other byte, so
    /// a name is plain ASCII (chipset-bus: event and dedup file names).
    Portable,
    /// Keeps what [`EscapeAlphabet::Portable`] keeps, every non-ASCII
    /// character (as its UTF-8 bytes), and `.` anywhere but first
    /// (chipset-nudge: the reminder index, named by source id).
    Readable,
}

impl EscapeAlphabet {
    fn keeps(self, c: char, first: bool) -> bool {
        let portable = c.is_ascii_alphanumeric() || c == '_' || c == '-';
        match self {
            EscapeAlphabet::Portable => portable,
            EscapeAlphabet::Readable => portable || !c.is_ascii() || (c == '.' && !first),
        }
    }

    /// Percent-escapes `text` into a file-name segment: what `alphabet` keeps
    /// stays, every other byte becomes `%XX` (upper-case hex). The result is at
    /// most `max` bytes (`usize::MAX` for no bound): it stops before the first
    /// kept character or `%XX` that would not fit, so an escape is never cut,
    /// though the bytes of one escaped character may be (a cut name is for
    /// matching, not for [`EscapeAlphabet::unescape`]).
    ///
    /// ```
    /// use chipset_store::EscapeAlphabet::{self, Portable, Readable};
    ///
    /// assert_eq!(Portable.escape("a/b.c é", usize::MAX), "a%2Fb%2Ec%20%C3%A9");
    /// assert_eq!(Readable.escape(".a/b.c é", usize::MAX), "%2Ea%2Fb.c%20é");
    /// assert_eq!(Portable.escape("/////", 8), "%2F%2F");
    /// assert_eq!(EscapeAlphabet::unescape("%2Ea%2Fb.c%20é").as_deref(), Some(".a/b.c é"));
    /// ```
    pub fn escape(self, text: &str, max: usize) -> String {
        let mut out = String::with_capacity(text.len().min(max));
        for (i, c) in text.char_indices() {
            if self.keeps(c, i == 0) {
                if out.len().saturating_add(c.len_utf8()) > max {
                    break;
                }
                out.push(c);
            } else {
                let mut buf = [0u8; 4];
                for b in c.encode_utf8(&mut buf).bytes() {
                    if out.len().saturating_add(3) > max {
                        return out;
                    }
                    let _ = write!(out, "%{b:02X}");
                }
            }
        }
        out
    }

    /// Reverses [`EscapeAlphabet::escape`] (either alphabet): every `%XX` becomes its
    /// byte. `None` when an escape is cut or not hex, or the bytes are not
    /// UTF-8.
    pub fn unescape(name: &str) -> Option<String> {
        let bytes = name.as_bytes();
        let mut out = Vec::with_capacity(bytes.len());
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] == b'%' {
                let hex = name.get(i + 1..i + 3)?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            } else {
                out.push(bytes[i]);
                i += 1;
            }
        }
        String::from_utf8(out).ok()
    }
}

impl EscapeAlphabet {
    /// FNV-1a, 64 bits, over `bytes`: stable across processes, builds and
    /// platforms (unlike std's hashers), for values other processes and
    /// versions must compute alike (nudge's lock stripe, bus's cut dedup names).
    /// Not a defence against chosen collisions: its users keep the full value
    /// beside the hash and check it.
    ///
    /// ```
    /// assert_eq!(chipset_store::EscapeAlphabet::fnv1a_64(*b"foobar"), 0x8594_4171_f739_67e8);
    /// ```
    pub fn fnv1a_64(bytes: impl IntoIterator<Item = u8>) -> u64 {
        bytes.into_iter().fold(0xcbf2_9ce4_8422_2325, |h: u64, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        })
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    const ALL: usize = usize::MAX;

    fn escape_name(text: &str, alphabet: EscapeAlphabet, max: usize) -> String {
        alphabet.escape(text, max)
    }

    fn unescape_name(name: &str) -> Option<String> {
        EscapeAlphabet::unescape(name)
    }

    /// Both alphabets are file-name contracts: pinned as literals
    /// (computed outside this code).
    #[test]
    fn alphabets_are_pinned() {
        use EscapeAlphabet::{Portable, Readable};
        for (text, portable, readable) in [
            ("sess-01_a", "sess-01_a", "sess-01_a"),
            ("a/b", "a%2Fb", "a%2Fb"),
            ("..", "%2E%2E", "%2E."),
            (".hidden", "%2Ehidden", "%2Ehidden"),
            ("v1.2", "v1%2E2", "v1.2"),
            ("100%", "100%25", "100%25"),
            ("a b:c", "a%20b%3Ac", "a%20b%3Ac"),
            ("ünï", "%C3%BCn%C3%AF", "ünï"),
            ("~!+=", "%7E%21%2B%3D", "%7E%21%2B%3D"),
            ("\u{1F600}/x", "%F0%9F%98%80%2Fx", "\u{1F600}%2Fx"),
            ("C:\\x", "C%3A%5Cx", "C%3A%5Cx"),
            ("a\nb\0", "a%0Ab%00", "a%0Ab%00"),
        ] {
            assert_eq!(escape_name(text, Portable, ALL), portable, "{text:?}");
            assert_eq!(escape_name(text, Readable, ALL), readable, "{text:?}");
        }
    }

    #[test]
    fn the_cut_never_splits_an_escape() {
        use EscapeAlphabet::{Portable, Readable};
        assert_eq!(
            escape_name(&"/".repeat(100), Portable, 40),
            "%2F".repeat(13)
        );
        assert_eq!(escape_name("abc", Portable, 0), "");
        assert_eq!(escape_name("ab/", Portable, 4), "ab");
        assert_eq!(escape_name("ab/", Portable, 5), "ab%2F");
        // Per byte: the escapes of one character may be cut between them.
        assert_eq!(escape_name("aé", Portable, 4), "a%C3");
        // A kept character is whole or absent.
        assert_eq!(escape_name("aé", Readable, 2), "a");
        assert_eq!(escape_name("aé", Readable, 3), "aé");
    }

    #[test]
    fn fnv_reference_vectors() {
        assert_eq!(EscapeAlphabet::fnv1a_64(*b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(EscapeAlphabet::fnv1a_64(*b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(EscapeAlphabet::fnv1a_64(*b"foobar"), 0x8594_4171_f739_67e8);
        assert_eq!(
            EscapeAlphabet::fnv1a_64("k".repeat(97).bytes()),
            0xd5ff_6937_fd62_842a
        );
    }

    /// A decode ends on any name (under a watchdog: an index that does not
    /// move on would loop for ever) and reads each escape once.
    #[test]
    fn a_decode_ends_and_reads_each_escape_once() {
        let decoded = chipset_testkit::returns("unescape_name", || {
            ["%41b%2Fc", "abc", "a%25"].map(unescape_name)
        });
        assert_eq!(
            decoded,
            [Some("Ab/c".into()), Some("abc".into()), Some("a%".into())]
        );
    }

    #[test]
    fn bad_escapes_do_not_decode() {
        assert_eq!(unescape_name("a%2"), None);
        assert_eq!(unescape_name("a%zz"), None);
        assert_eq!(unescape_name("%FF"), None);
        assert_eq!(unescape_name("%C3").as_deref(), None);
        assert_eq!(unescape_name("").as_deref(), Some(""));
    }

    proptest! {
        #[test]
        fn escaping_round_trips_to_a_safe_segment(text in "\\PC{1,40}|[./%\\\\ a-z]{1,20}") {
            for alphabet in [EscapeAlphabet::Portable, EscapeAlphabet::Readable] {
                let name = escape_name(&text, alphabet, ALL);
                prop_assert_eq!(unescape_name(&name), Some(text.clone()));
                // What validate_segment refuses, bar the length.
                prop_assert!(!name.starts_with('.') && name != "..", "{}", name);
                prop_assert!(!name.contains(['/', '\\']), "{}", name);
                prop_assert!(!name.chars().any(char::is_control), "{}", name);
            }
            let portable = escape_name(&text, EscapeAlphabet::Portable, ALL);
            prop_assert!(portable.is_ascii());
        }

        #[test]
        fn a_cut_is_a_prefix_within_bounds(text in "\\PC{0,40}", max in 0usize..60) {
            for alphabet in [EscapeAlphabet::Portable, EscapeAlphabet::Readable] {
                let full = escape_name(&text, alphabet, ALL);
                let cut = escape_name(&text, alphabet, max);
                prop_assert!(cut.len() <= max);
                prop_assert!(full.starts_with(&cut));
                // The last escape is whole.
                if let Some(i) = cut.rfind('%') {
                    prop_assert!(i + 3 <= cut.len(), "{}", cut);
                }
            }
        }
    }
}
