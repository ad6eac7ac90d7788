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
        let (ms, bits) = if now > last.0 {
            (now, random_bits())
        } else if last.1 < RANDOM_MAX {
            (last.0, last.1 + 1)
        } else {
            // 2^122 ids in one millisecond: borrow the next millisecond.
            (last.0 + 1, random_bits())
        };
        *last = (ms, bits);
        drop(last);
        SortableId(format!("{ms:013}-{}", to_uuid(bits).hyphenated()))
    }

    /// Parses an id made by any writer that follows the format.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidId`] when `text` is not digits, a hyphen and a UUID.
    pub fn parse(text: &str) -> Result<Self> {
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

    /// Returns the owned string.
    pub fn into_string(self) -> String {
        self.0
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
        assert!(SortableId::parse(id.as_str()).is_ok());
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
        ] {
            assert!(SortableId::parse(bad).is_err(), "{bad}");
        }
    }
}
