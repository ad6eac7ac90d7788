//! The pure reminder decision.

use chipset_store::Timestamp;

use crate::config::{NagPolicy, NagRule, Occasion};
use crate::format::{Event, NagState};

/// Returns the indices of `pending` (in processing order) that are due for a
/// reminder now, and the reminder state to persist: due timed reminders are
/// stamped with `now`, and entries of events no longer pending are dropped.
pub(crate) fn due(
    pending: &[Event],
    state: &NagState,
    policy: &NagPolicy,
    occasion: Occasion,
    now: Timestamp,
) -> (Vec<usize>, NagState) {
    // Fields another writer added stay with the state.
    let mut next = NagState {
        extra: state.extra.clone(),
        ..NagState::default()
    };
    let mut indices = Vec::new();
    let mut priorities = pending.iter().map(|e| e.priority);
    let first = priorities.next();
    let one_priority = priorities.all(|p| Some(p) == first);
    for (i, event) in pending.iter().enumerate() {
        let last = state.reminded.get(&event.id).copied();
        let is_due = match policy.rule(event.priority) {
            NagRule::Every(interval) => {
                let since = last.unwrap_or(event.created_at);
                now >= since + interval
            }
            NagRule::AtPoll => occasion == Occasion::Poll,
            NagRule::AtPollWhenQuiet => occasion == Occasion::Poll && one_priority,
        };
        if is_due {
            indices.push(i);
        }
        // Only timed rules need a memory; poll rules fire on the caller's rhythm.
        if let NagRule::Every(_) = policy.rule(event.priority) {
            let stamp = if is_due { Some(now) } else { last };
            if let Some(t) = stamp {
                next.reminded.insert(event.id.clone(), t);
            }
        }
    }
    (indices, next)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{NewEvent, Priority};
    use chipset_store::{Clock, ManualClock};
    use std::time::Duration;

    fn event(clock: &ManualClock, p: Priority) -> Event {
        NewEvent::new("s", "k")
            .with_priority(p)
            .build(clock)
            .unwrap()
    }

    #[test]
    fn timed_rules_fire_after_their_interval_and_remember() {
        let clock = ManualClock::new(Timestamp::from_unix_ms(1_000_000));
        let crit = event(&clock, Priority::Critical);
        let high = event(&clock, Priority::High);
        let pending = vec![crit.clone(), high.clone()];
        let policy = NagPolicy::default();
        let at = |s: u64| clock.now() + Duration::from_secs(s);

        let (d, s1) = due(
            &pending,
            &NagState::default(),
            &policy,
            Occasion::Pause,
            at(10),
        );
        assert!(d.is_empty());
        assert!(s1.reminded.is_empty());

        let (d, s2) = due(&pending, &s1, &policy, Occasion::Pause, at(30));
        assert_eq!(d, [0]);
        assert_eq!(s2.reminded.get(&crit.id), Some(&at(30)));

        // A restart reads s2 back: no storm 5 s later.
        let (d, s3) = due(&pending, &s2, &policy, Occasion::Pause, at(35));
        assert!(d.is_empty());
        assert_eq!(s3, s2);

        let (d, s4) = due(&pending, &s3, &policy, Occasion::Pause, at(120));
        assert_eq!(d, [0, 1]);

        // The critical event is acknowledged: its entry goes.
        let (_, s5) = due(&pending[1..], &s4, &policy, Occasion::Pause, at(121));
        assert!(!s5.reminded.contains_key(&crit.id));
        assert!(s5.reminded.contains_key(&high.id));
    }

    #[test]
    fn poll_rules_fire_only_at_polls() {
        let clock = ManualClock::new(Timestamp::from_unix_ms(1_000_000));
        let normal = event(&clock, Priority::Normal);
        let low = event(&clock, Priority::Low);
        let policy = NagPolicy::default();
        let now = clock.now();
        let both = vec![normal, low.clone()];
        let (d, _) = due(&both, &NagState::default(), &policy, Occasion::Pause, now);
        assert!(d.is_empty());
        // Low waits while something else is pending.
        let (d, _) = due(&both, &NagState::default(), &policy, Occasion::Poll, now);
        assert_eq!(d, [0]);
        let (d, s) = due(&[low], &NagState::default(), &policy, Occasion::Poll, now);
        assert_eq!(d, [0]);
        assert!(s.reminded.is_empty());
    }
}
