//! How a bus behaves: windows, intervals and policies.

use std::time::Duration;

use chipset_store::{Timestamp, WatchConfig};

use crate::format::Priority;

/// A bus's settings. Every field has a default ([`BusConfig::default`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct BusConfig {
    /// The de-duplication window for publishes that do not set their own. Default 60 s.
    pub dedup_window: Duration,
    /// A presence whose `last_seen` is older than this is stale. Default 120 s.
    pub presence_stale_after: Duration,
    /// How a [`Waiter`](crate::Waiter) learns of new events: directory
    /// notifications (inotify on Linux; falling back to rescans alone when
    /// they are unavailable) or rescans only, and how often it lists the
    /// queue whatever the notifications say: the safety net, and the
    /// latency bound when notifications fail. Default: notifications, and a
    /// rescan every second.
    pub watch: WatchConfig,
    /// Temp files older than this are stale for [`Bus::doctor`](crate::Bus::doctor). Default 10 min.
    pub stale_temp_age: Duration,
}

impl Default for BusConfig {
    fn default() -> Self {
        BusConfig {
            dedup_window: Duration::from_secs(60),
            presence_stale_after: Duration::from_secs(120),
            watch: WatchConfig::default(),
            stale_temp_age: Duration::from_secs(600),
        }
    }
}

/// When an unacknowledged event of one priority is due for a reminder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NagRule {
    /// Every so often, whatever the occasion: first this long after it was
    /// published, then this long after each reminder.
    Every(Duration),
    /// At every poll ([`Occasion::Poll`]).
    AtPoll,
    /// At a poll, only when nothing of another priority is pending.
    AtPollWhenQuiet,
}

/// A reminder rule per priority. The bus uses the default on both
/// backends, which is the seed's cadence: critical every 30 s, high every
/// 2 min, normal at the next poll, low at the next poll when nothing else
/// is pending.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NagPolicy {
    /// For critical events.
    pub(crate) critical: NagRule,
    /// For high events.
    pub(crate) high: NagRule,
    /// For normal events.
    pub(crate) normal: NagRule,
    /// For low events.
    pub(crate) low: NagRule,
}

impl Default for NagPolicy {
    fn default() -> Self {
        NagPolicy {
            critical: NagRule::Every(Duration::from_secs(30)),
            high: NagRule::Every(Duration::from_secs(120)),
            normal: NagRule::AtPoll,
            low: NagRule::AtPollWhenQuiet,
        }
    }
}

impl NagPolicy {
    /// Returns the rule for `priority`.
    pub(crate) fn rule(&self, priority: Priority) -> NagRule {
        match priority {
            Priority::Critical => self.critical,
            Priority::High => self.high,
            Priority::Normal => self.normal,
            Priority::Low => self.low,
        }
    }
}

/// Why reminders are being asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Occasion {
    /// A natural pause (the agent is at a prompt): only timed rules fire.
    Pause,
    /// A regular poll cycle: timed rules and poll rules fire.
    Poll,
}

/// How much of the processed area [`Bus::prune`](crate::Bus::prune) keeps.
/// Limits left at `None` do not apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Retention {
    /// Keep at most this many processed events (the newest).
    pub max_count: Option<usize>,
    /// Keep at most this many bytes of processed events (the newest).
    pub max_bytes: Option<u64>,
    /// Remove processed events published longer ago than this.
    pub max_age: Option<Duration>,
    /// Remove de-duplication records accepted longer ago than this (choose
    /// it longer than any window in use, or the key will work again early).
    pub dedup_max_age: Option<Duration>,
}

impl Retention {
    /// Whether prune removes the `index`th newest processed event, of
    /// `len` bytes and published at `created` (unknown for an unreadable
    /// one, which no age removes), when the newer events it keeps hold
    /// `kept_bytes`.
    pub(crate) fn drops(
        &self,
        index: usize,
        kept_bytes: u64,
        len: u64,
        created: Option<Timestamp>,
        now: Timestamp,
    ) -> bool {
        let too_many = self.max_count.is_some_and(|n| index >= n);
        let too_big = self
            .max_bytes
            .is_some_and(|b| kept_bytes.saturating_add(len) > b);
        let too_old = self
            .max_age
            .zip(created)
            .is_some_and(|(age, at)| now.since(at) > age);
        too_many || too_big || too_old
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each priority's rule is the policy's field of that name.
    #[test]
    fn the_rule_for_a_priority_is_its_field() {
        let quiet = NagPolicy {
            critical: NagRule::Every(Duration::from_secs(1)),
            high: NagRule::AtPoll,
            normal: NagRule::Every(Duration::from_secs(2)),
            low: NagRule::AtPollWhenQuiet,
        };
        let rules = [
            Priority::Critical,
            Priority::High,
            Priority::Normal,
            Priority::Low,
        ]
        .map(|p| quiet.rule(p));
        assert_eq!(
            rules,
            [
                NagRule::Every(Duration::from_secs(1)),
                NagRule::AtPoll,
                NagRule::Every(Duration::from_secs(2)),
                NagRule::AtPollWhenQuiet
            ]
        );
    }
}
