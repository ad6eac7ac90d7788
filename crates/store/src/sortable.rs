//! Sortable ids: `{unix-ms}-{uuid-v4}`.

use std::fmt;
use std::sync::Mutex;

use uuid::Uuid;

use crate::error::{Error, Result};
use crate::time::Clock;

/// An id of the form `{unix-ms}-{uuid-v4}`, for example
/// `1730000000123-9b3e0c1a-5d2f-4e1b-8a6c-0123456789ab`.
///
/// Ids from [`SortableId::generate`] sort as strings in the order they were
/// made within a process, even when the clock stalls or steps back: the
/// millisecond part never goes backwards, and within one millisecond the 122
/// random bits of the UUID count up from a fresh random start (as ULID's
/// monotonic mode does). Across processes they are unique with overwhelming
/// probability and sort by time to the millisecond.
///
/// ```
/// use chipset_store::{ManualClock, SortableId, Timestamp};
/// let clock = ManualClock::new(Timestamp::from_unix_ms(1_730_000_000_123));
/// let a = SortableId::generate(&clock);
/// let b = SortableId::generate(&clock); // same millisecond
/// assert!(a < b);
/// assert!(a.as_str().starts_with("1730000000123-"));
/// ```
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SortableId(String);

/// The last id handed out in this process: (millisecond, 122 random bits).
static LAST: Mutex<(i64, u128)> = Mutex::new((i64::MIN, 0));

const RANDOM_BITS: u32 = 122;
const RANDOM_MAX: u128 = (1u128 << RANDOM_BITS) - 1;

impl SortableId {
    /// Returns a new id, strictly greater than every id this process made before.
    pub fn generate(clock: &dyn Clock) -> Self {
        let now = clock.now().unix_ms().max(0);
        let mut last = LAST.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let (ms, bits) = next(*last, now, random_bits);
        *last = (ms, bits);
        drop(last);
        SortableId(format!("{ms:013}-{}", to_uuid(bits).hyphenated()))
    }

    /// Returns the millisecond part.
    pub fn unix_ms(&self) -> i64 {
        self.0
            .split_once('-')
            .and_then(|(ms, _)| ms.parse().ok())
            .unwrap_or(0)
    }

    /// Returns the id as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Parses an id made by any writer that follows the format.
///
/// # Errors
///
/// [`Error::InvalidId`] when `text` is not digits, a hyphen and a UUID.
impl std::str::FromStr for SortableId {
    type Err = Error;
    fn from_str(text: &str) -> Result<Self> {
        let invalid = |rule| Error::InvalidId {
            kind: "sortable id",
            value: text.to_owned(),
            rule,
        };
        let (ms, uuid) = text
            .split_once('-')
            .ok_or_else(|| invalid("must be `{unix-ms}-{uuid}`"))?;
        if ms.is_empty() || ms.len() > 19 || !ms.bytes().all(|b| b.is_ascii_digit()) {
            return Err(invalid("must start with the unix time in milliseconds"));
        }
        Uuid::try_parse(uuid).map_err(|_| invalid("must end with a hyphenated UUID"))?;
        Ok(SortableId(text.to_owned()))
    }
}

impl From<SortableId> for String {
    fn from(id: SortableId) -> String {
        id.0
    }
}

/// The (millisecond, random bits) of the id after `last` when the clock
/// reads `now`: a fresh random start in a later millisecond, else the next
/// count in the last one (the clock stalled or stepped back), else, at the
/// top of the count, a fresh start in the millisecond after it.
fn next(last: (i64, u128), now: i64, fresh: impl FnOnce() -> u128) -> (i64, u128) {
    if now > last.0 {
        (now, fresh())
    } else if last.1 < RANDOM_MAX {
        (last.0, last.1 + 1)
    } else {
        // 2^122 ids in one millisecond: borrow the next millisecond.
        (last.0 + 1, fresh())
    }
}

fn random_bits() -> u128 {
    // Leave headroom so a burst within one millisecond rarely reaches the top.
    (Uuid::new_v4().as_u128() & RANDOM_MAX) >> 1
}

/// Spreads 122 bits over a UUID's random positions, keeping their order, and
/// sets the version (4) and variant bits.
fn to_uuid(bits: u128) -> Uuid {
    let high = (bits >> 74) & ((1 << 48) - 1); // 48 bits before the version nibble
    let mid = (bits >> 62) & ((1 << 12) - 1); // 12 bits between version and variant
    let low = bits & ((1 << 62) - 1); // 62 bits after the variant
    Uuid::from_u128((high << 80) | (0x4 << 76) | (mid << 64) | (0b10 << 62) | low)
}

impl fmt::Display for SortableId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for SortableId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;
    use crate::time::{ManualClock, Timestamp};

    #[test]
    fn uuid_part_is_a_v4_uuid() {
        let clock = ManualClock::new(Timestamp::from_unix_ms(1));
        let id = SortableId::generate(&clock);
        let (ms, uuid) = id.as_str().split_once('-').unwrap();
        assert_eq!(ms.len(), 13);
        let uuid = Uuid::parse_str(uuid).unwrap();
        assert_eq!(uuid.get_version_num(), 4);
        assert_eq!(uuid.get_variant(), uuid::Variant::RFC4122);
        assert!(id.as_str().parse::<SortableId>().is_ok());
    }

    #[test]
    fn bit_spreading_keeps_order() {
        let samples = [
            0u128,
            1,
            2,
            (1 << 62) - 1,
            1 << 62,
            1 << 74,
            RANDOM_MAX - 1,
            RANDOM_MAX,
        ];
        for pair in samples.windows(2) {
            let a = to_uuid(pair[0]).hyphenated().to_string();
            let b = to_uuid(pair[1]).hyphenated().to_string();
            assert!(a < b, "{a} !< {b}");
        }
    }

    #[test]
    fn clock_stepping_back_does_not_reorder() {
        let clock = ManualClock::new(Timestamp::from_unix_ms(5_000_000_000_000));
        let a = SortableId::generate(&clock);
        clock.set(Timestamp::from_unix_ms(4_000_000_000_000));
        let b = SortableId::generate(&clock);
        assert!(a < b);
    }

    #[test]
    fn parse_rejects_other_shapes() {
        for bad in [
            "",
            "123",
            "abc-9b3e",
            "12-not-a-uuid",
            "-9b3e0c1a-5d2f-4e1b-8a6c-0123456789ab",
            // A good UUID after a millisecond part that is not digits.
            "abc-9b3e0c1a-5d2f-4e1b-8a6c-0123456789ab",
            "12a-9b3e0c1a-5d2f-4e1b-8a6c-0123456789ab",
            // Twenty digits: more than any i64 millisecond needs.
            "10000000000000000000-9b3e0c1a-5d2f-4e1b-8a6c-0123456789ab",
        ] {
            assert!(bad.parse::<SortableId>().is_err(), "{bad}");
        }
    }

    /// The layout is a contract between processes and versions: the bits
    /// land in a UUID's random positions in order, around the version (4)
    /// and variant (`10`) bits, pinned as literals.
    #[test]
    fn bits_land_in_the_uuid_as_pinned() {
        for (bits, uuid) in [
            (0, "00000000-0000-4000-8000-000000000000"),
            (1, "00000000-0000-4000-8000-000000000001"),
            ((1 << 62) - 1, "00000000-0000-4000-bfff-ffffffffffff"),
            (1 << 62, "00000000-0000-4001-8000-000000000000"),
            (1 << 74, "00000000-0001-4000-8000-000000000000"),
            (
                0x0123_4567_89ab_cdef_fedc_ba98_7654_3210,
                "48d159e2-6af3-47bf-bedc-ba9876543210",
            ),
            (RANDOM_MAX, "ffffffff-ffff-4fff-bfff-ffffffffffff"),
        ] {
            assert_eq!(to_uuid(bits).hyphenated().to_string(), uuid, "{bits:#x}");
        }
        assert_eq!(RANDOM_MAX, 0x03ff_ffff_ffff_ffff_ffff_ffff_ffff_ffff);
    }

    #[test]
    fn next_counts_up_within_a_millisecond_and_starts_fresh_after() {
        let fresh = || 77;
        // A later millisecond: a fresh random start.
        assert_eq!(next((5, 1_000), 6, fresh), (6, 77));
        // The same millisecond, or the clock stepped back: count up.
        assert_eq!(next((5, 1_000), 5, fresh), (5, 1_001));
        assert_eq!(next((5, 1_000), 4, fresh), (5, 1_001));
        assert_eq!(next((5, RANDOM_MAX - 1), 5, fresh), (5, RANDOM_MAX));
        // The count at its top: borrow the next millisecond, start fresh.
        assert_eq!(next((5, RANDOM_MAX), 5, fresh), (6, 77));
        assert_eq!(next((5, RANDOM_MAX), 3, fresh), (6, 77));
        // The first id of a process (nothing made before).
        assert_eq!(next((i64::MIN, 0), 0, fresh), (0, 77));
    }

    /// A fresh start is random and leaves at least half the count free, so
    /// a burst within one millisecond does not reach the top.
    #[test]
    fn fresh_starts_are_random_and_leave_headroom() {
        let starts: HashSet<u128> = (0..1_000).map(|_| random_bits()).collect();
        // 121 random bits: a repeat in a thousand draws is beyond chance.
        assert_eq!(starts.len(), 1_000);
        assert!(starts.iter().all(|&b| b <= RANDOM_MAX >> 1));
        // And they use the whole lower half, not a fixed part of it: the
        // top bit of the half is set in some draws, bit 0 in some.
        assert!(starts.iter().any(|&b| b >> 120 == 1));
        assert!(starts.iter().any(|&b| b & 1 == 1));
    }

    #[test]
    fn ids_in_different_milliseconds_start_from_different_randoms() {
        let clock = ManualClock::new(Timestamp::from_unix_ms(9_000_000_000_000));
        let a = SortableId::generate(&clock);
        clock.advance(std::time::Duration::from_millis(1));
        let b = SortableId::generate(&clock);
        assert_eq!(b.unix_ms(), a.unix_ms() + 1);
        let random = |id: &SortableId| id.as_str()[14..].to_owned();
        assert_ne!(random(&a), random(&b));
    }

    #[test]
    fn parse_keeps_the_text_and_reads_its_millisecond() {
        let text = "1730000000123-9b3e0c1a-5d2f-4e1b-8a6c-0123456789ab";
        let id = text.parse::<SortableId>().unwrap();
        assert_eq!(id.as_str(), text);
        assert_eq!(id.unix_ms(), 1_730_000_000_123);
        assert_eq!(id.to_string(), text);
        assert_eq!(format!("{id:?}"), format!("{text:?}"));
        assert_eq!(String::from(id), text);
        // Nineteen digits (every i64 millisecond) parse.
        let max = "9223372036854775807-9b3e0c1a-5d2f-4e1b-8a6c-0123456789ab";
        assert_eq!(max.parse::<SortableId>().unwrap().unix_ms(), i64::MAX);
    }
}
