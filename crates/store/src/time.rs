//! Instants, the clock trait, and the two clocks.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::error::{Error, Result};

/// An instant with millisecond precision, written as RFC 3339 UTC.
///
/// Timestamps serialize as `2026-03-05T10:35:00.123Z` (what JavaScript's
/// `toISOString` gives), parse from any RFC 3339 form (`Z` or an offset, any
/// number of fractional digits, truncated to milliseconds), and compare as
/// instants, never as strings.
///
/// ```
/// use chipset_store::Timestamp;
/// let a = "2026-03-05T10:35:00Z".parse::<Timestamp>()?;
/// let b = "2026-03-05T11:35:00.000+01:00".parse::<Timestamp>()?;
/// assert_eq!(a, b);
/// assert_eq!(a.to_string(), "2026-03-05T10:35:00.000Z");
/// # Ok::<(), chipset_store::Error>(())
/// ```
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(i64);

impl Timestamp {
    /// The Unix epoch.
    pub const EPOCH: Timestamp = Timestamp(0);

    /// Returns the instant `ms` milliseconds after the Unix epoch.
    pub const fn from_unix_ms(ms: i64) -> Self {
        Timestamp(ms)
    }

    /// Returns milliseconds since the Unix epoch.
    pub const fn unix_ms(self) -> i64 {
        self.0
    }

    /// Returns how long after `earlier` this instant is, or zero if it is not later.
    pub fn since(self, earlier: Timestamp) -> Duration {
        Duration::from_millis(u64::try_from(self.0.saturating_sub(earlier.0)).unwrap_or(0))
    }

    fn datetime(self) -> OffsetDateTime {
        // Out-of-range instants are clamped to what RFC 3339 can write.
        let nanos = i128::from(self.0) * 1_000_000;
        OffsetDateTime::from_unix_timestamp_nanos(nanos).unwrap_or(if self.0 < 0 {
            OffsetDateTime::UNIX_EPOCH
        } else {
            OffsetDateTime::new_utc(
                time::Date::from_calendar_date(9999, time::Month::December, 31)
                    .expect("valid date"),
                time::Time::MIDNIGHT,
            )
        })
    }
}

/// Moves the instant forward by a duration, saturating.
impl std::ops::Add<Duration> for Timestamp {
    type Output = Timestamp;
    fn add(self, d: Duration) -> Timestamp {
        Timestamp(self.0.saturating_add(duration_ms(d)))
    }
}

/// Moves the instant back by a duration, saturating.
impl std::ops::Sub<Duration> for Timestamp {
    type Output = Timestamp;
    fn sub(self, d: Duration) -> Timestamp {
        Timestamp(self.0.saturating_sub(duration_ms(d)))
    }
}

fn duration_ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

impl Timestamp {
    /// The text of this instant (`2026-03-05T10:35:00.123Z`, the year
    /// clamped to 0-9999), written digit by digit: thousands of them go
    /// into every large listing and cache, and `core::fmt` costs several
    /// times as much.
    fn text(self) -> Text {
        let dt = self.datetime();
        let mut out = *b"0000-00-00T00:00:00.000Z";
        let mut put = |at: usize, width: usize, value: u32| {
            let mut value = value;
            for byte in out[at..at + width].iter_mut().rev() {
                *byte = b'0' + (value % 10) as u8;
                value /= 10;
            }
        };
        put(0, 4, dt.year().clamp(0, 9999).unsigned_abs());
        put(5, 2, u32::from(u8::from(dt.month())));
        put(8, 2, u32::from(dt.day()));
        put(11, 2, u32::from(dt.hour()));
        put(14, 2, u32::from(dt.minute()));
        put(17, 2, u32::from(dt.second()));
        put(20, 3, u32::from(dt.millisecond()));
        Text(out)
    }
}

/// A [`Timestamp`]'s text: ASCII digits and separators only.
struct Text([u8; 24]);

impl Text {
    fn as_str(&self) -> &str {
        // Only ASCII is ever written into it.
        std::str::from_utf8(&self.0).unwrap_or("0000-00-00T00:00:00.000Z")
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.text().as_str())
    }
}

impl fmt::Debug for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// Parses any RFC 3339 timestamp (`text.parse::<Timestamp>()`).
///
/// # Errors
///
/// [`Error::InvalidTimestamp`] when `text` is not RFC 3339.
impl std::str::FromStr for Timestamp {
    type Err = Error;
    fn from_str(text: &str) -> Result<Self> {
        let dt = OffsetDateTime::parse(text, &Rfc3339).map_err(|_| Error::InvalidTimestamp {
            value: text.to_owned(),
        })?;
        let ms = dt.unix_timestamp_nanos().div_euclid(1_000_000);
        Ok(Timestamp(i64::try_from(ms).map_err(|_| {
            Error::InvalidTimestamp {
                value: text.to_owned(),
            }
        })?))
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(self.text().as_str())
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let text = std::borrow::Cow::<'de, str>::deserialize(d)?;
        text.parse::<Timestamp>().map_err(serde::de::Error::custom)
    }
}

/// A source of the current time. Every crate takes time from one, so loops
/// can be simulated on a [`ManualClock`] without sleeping.
pub trait Clock: Send + Sync + fmt::Debug {
    /// Returns the current instant.
    fn now(&self) -> Timestamp;
}

/// A shared, type-erased clock.
pub(crate) type SharedClock = Arc<dyn Clock>;

/// The wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        since_epoch(SystemTime::now())
    }
}

/// The instant a system time names, before the epoch too (a clock set back).
fn since_epoch(t: SystemTime) -> Timestamp {
    let ms = match t.duration_since(UNIX_EPOCH) {
        Ok(d) => duration_ms(d),
        Err(e) => -duration_ms(e.duration()),
    };
    Timestamp(ms)
}

/// A clock that moves only when told to. Clones share the same time.
///
/// ```
/// use std::time::Duration;
/// use chipset_store::{Clock, ManualClock, Timestamp};
/// let clock = ManualClock::new(Timestamp::from_unix_ms(1_000));
/// clock.advance(Duration::from_secs(60));
/// assert_eq!(clock.now().unix_ms(), 61_000);
/// ```
#[derive(Debug, Clone)]
pub struct ManualClock(Arc<AtomicI64>);

impl ManualClock {
    /// Returns a clock stopped at `start`.
    pub fn new(start: Timestamp) -> Self {
        ManualClock(Arc::new(AtomicI64::new(start.0)))
    }

    /// Moves the clock forward by `d`.
    pub fn advance(&self, d: Duration) {
        self.0.fetch_add(duration_ms(d), Ordering::SeqCst);
    }

    /// Sets the clock to `t`, which may be earlier than now (a clock step back).
    pub fn set(&self, t: Timestamp) {
        self.0.store(t.0, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        Timestamp(self.0.load(Ordering::SeqCst))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_like_to_iso_string() {
        let t = "2026-03-05T10:35:00.123Z".parse::<Timestamp>().unwrap();
        assert_eq!(t.to_string(), "2026-03-05T10:35:00.123Z");
        assert_eq!(Timestamp::EPOCH.to_string(), "1970-01-01T00:00:00.000Z");
    }

    #[test]
    fn parses_any_rfc3339_form_as_an_instant() {
        let base = "2026-03-05T10:35:00Z".parse::<Timestamp>().unwrap();
        for text in [
            "2026-03-05T10:35:00.000Z",
            "2026-03-05T10:35:00.0001Z",
            "2026-03-05T12:35:00+02:00",
            "2026-03-05t10:35:00z",
        ] {
            assert_eq!(text.parse::<Timestamp>().unwrap(), base, "{text}");
        }
        assert!("2026-03-05 10:35".parse::<Timestamp>().is_err());
    }

    #[test]
    fn compares_as_instants_not_strings() {
        let a = "2026-03-05T10:35:00+01:00".parse::<Timestamp>().unwrap();
        let b = "2026-03-05T10:00:00Z".parse::<Timestamp>().unwrap();
        // As strings a > b, as instants a is earlier.
        assert!(a < b);
    }

    #[test]
    fn arithmetic_saturates() {
        let t = Timestamp::from_unix_ms(1_000);
        assert_eq!((t + Duration::from_secs(1)).unix_ms(), 2_000);
        assert_eq!((t - Duration::from_secs(2)).unix_ms(), -1_000);
        assert_eq!(
            Timestamp::from_unix_ms(i64::MAX) + Duration::from_secs(1),
            Timestamp::from_unix_ms(i64::MAX)
        );
        assert_eq!(t.since(t + Duration::from_secs(5)), Duration::ZERO);
        assert_eq!(
            (t + Duration::from_secs(5)).since(t),
            Duration::from_secs(5)
        );
    }

    /// Instants beyond what RFC 3339 can write are clamped: before the
    /// epoch's range to the epoch, after it to the last day of year 9999.
    #[test]
    fn out_of_range_instants_are_written_clamped() {
        assert_eq!(
            Timestamp::from_unix_ms(i64::MIN).to_string(),
            "1970-01-01T00:00:00.000Z"
        );
        assert_eq!(
            Timestamp::from_unix_ms(i64::MAX).to_string(),
            "9999-12-31T00:00:00.000Z"
        );
        // Within the range, before the epoch too, they are written as they are.
        assert_eq!(
            Timestamp::from_unix_ms(-1).to_string(),
            "1969-12-31T23:59:59.999Z"
        );
    }

    /// The text written digit by digit is what `core::fmt` wrote, for
    /// instants across the whole range (years before 0 and after 9999
    /// clamped as before), and it is what serializing writes.
    #[test]
    fn the_text_is_what_the_format_string_wrote() {
        let old = |t: Timestamp| {
            let dt = t.datetime();
            format!(
                "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
                dt.year().clamp(0, 9999),
                u8::from(dt.month()),
                dt.day(),
                dt.hour(),
                dt.minute(),
                dt.second(),
                dt.millisecond()
            )
        };
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut checked = 0;
        for ms in [
            i64::MIN,
            -377_705_116_800_001,
            -62_167_219_200_001,
            -1,
            0,
            1,
            253_402_300_799_999,
            253_402_300_800_000,
            i64::MAX,
        ] {
            let t = Timestamp::from_unix_ms(ms);
            assert_eq!(t.to_string(), old(t), "{ms}");
            checked += 1;
        }
        for _ in 0..20_000 {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            // Across +-10,000 years around the epoch.
            let ms = (x >> 1) as i64 % 315_569_520_000_000;
            let t = Timestamp::from_unix_ms(if x & 1 == 0 { ms } else { -ms });
            assert_eq!(t.to_string(), old(t), "{}", t.unix_ms());
            let json = serde_json::to_string(&t).unwrap();
            assert_eq!(json, format!("\"{}\"", old(t)));
            checked += 1;
        }
        assert_eq!(checked, 20_009);
    }

    #[test]
    fn debug_and_from_str_use_the_rfc3339_form() {
        let t = Timestamp::from_unix_ms(1_772_706_900_123);
        assert_eq!(format!("{t:?}"), "2026-03-05T10:35:00.123Z");
        assert_eq!("2026-03-05T10:35:00.123Z".parse::<Timestamp>().unwrap(), t);
        assert!("yesterday".parse::<Timestamp>().is_err());
    }

    #[test]
    fn the_system_clock_reads_times_before_the_epoch_as_negative() {
        let ms = Duration::from_millis(1_500);
        assert_eq!(since_epoch(UNIX_EPOCH + ms).unix_ms(), 1_500);
        assert_eq!(since_epoch(UNIX_EPOCH - ms).unix_ms(), -1_500);
        assert_eq!(since_epoch(UNIX_EPOCH), Timestamp::EPOCH);
    }

    #[test]
    fn a_manual_clock_moves_only_when_told_and_clones_share_it() {
        let clock = ManualClock::new(Timestamp::from_unix_ms(10_000));
        let other = clock.clone();
        assert_eq!(clock.now().unix_ms(), 10_000);
        clock.advance(Duration::from_millis(250));
        assert_eq!(other.now().unix_ms(), 10_250);
        other.set(Timestamp::from_unix_ms(3_000));
        assert_eq!(clock.now().unix_ms(), 3_000);
    }

    #[test]
    fn serde_round_trip() {
        let t = Timestamp::from_unix_ms(1_772_706_900_123);
        let json = serde_json::to_string(&t).unwrap();
        assert_eq!(json, "\"2026-03-05T10:35:00.123Z\"");
        assert_eq!(serde_json::from_str::<Timestamp>(&json).unwrap(), t);
    }
}
