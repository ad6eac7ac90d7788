//! The worker's completion report, kept until it is delivered.
//!
//! The summary the work returned exists nowhere but in the report, so it
//! is written to `loop/worker/reports/{agent}.json` before the hook is
//! completed; the `completion-report` mail (under an id fixed by the
//! assignment) and its `work-completed` wake-up go out after, and the
//! record is removed once both did. A failure after the completion leaves
//! the record, and the next [`Worker::run_once`] sends what is missing
//! before it picks up: the mail channel returns a report already
//! delivered as it is, so nothing is lost and nothing is sent twice, also
//! after a crash at any point.

use chipset_bus::{EventId, NewEvent, Priority as BusPriority};
use chipset_hook::{Assignment, HookStatus};
use chipset_mail::{MessageId, NewMessage};
use chipset_store::{ReadOutcome, Timestamp};
use serde::{Deserialize, Serialize};

use super::{WorkOutcome, Worker};
use crate::error::{Error, Result};
use crate::files::task_of;
use crate::format::{COMPLETION_REPORT, IncidentKey, LoopMessage, WORK_COMPLETED_EVENT, fixed_id};

/// A completion report not yet delivered:
/// `loop/worker/reports/{agent}.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct PendingReport {
    /// The assignment the work was done for.
    pub(crate) assignment: Assignment,
    /// What the work returned.
    pub(crate) summary: String,
    /// When the work returned: the report's `completed_at` when the hook
    /// no longer holds the assignment to say when it was completed.
    pub(crate) finished_at: Timestamp,
}

/// The id of the `completion-report` mail of `a`: a [`fixed_id`] at the
/// time it was assigned with the prefix `c0391e7e-0001`, keyed by the
/// assignment (agent, bead, generation).
fn report_id(a: &Assignment) -> Result<MessageId> {
    let key = IncidentKey::of(a).to_string();
    Ok(MessageId::new(fixed_id(
        a.work.assigned_at,
        "c0391e7e-0001",
        &key,
    ))?)
}

impl Worker {
    /// Completes the hook and reports the work: the report's record first,
    /// then the hook, the mail and the wake-up, then the record removed.
    pub(super) fn complete(&self, assignment: Assignment, summary: String) -> Result<WorkOutcome> {
        let files = self.channels.files();
        let mut held = files.lock::<PendingReport>(&files.report(&self.me))?;
        let pending = PendingReport {
            assignment: assignment.clone(),
            summary,
            finished_at: files.now()?,
        };
        held.write(pending.clone())?;
        let hook = match self.channels.hooks.complete(&assignment) {
            Ok(h) => h,
            Err(chipset_hook::Error::StaleAssignment { .. }) => {
                tracing::warn!(agent = %self.me, bead = %assignment.work.bead_id, "completion refused: the work was taken away");
                // Nothing is reported: the record goes with the work (one
                // left by a failure here goes out late, which the
                // dispatcher ignores, rather than be lost).
                if let Err(e) = held.remove() {
                    tracing::warn!(agent = %self.me, error = %e, "the report of work taken away stays");
                }
                return Err(Error::Stale {
                    assignment: Box::new(assignment),
                });
            }
            // The hook is not completed (or its outcome is unknown, which
            // the hook's error says): the record stays for the retry.
            Err(e) => return Err(e.into()),
        };
        // The hook is completed: a failure from here on is partly done,
        // and the record makes the report go out at the next pickup.
        let completed_at = hook.last_activity;
        let report = self
            .deliver(&pending, completed_at)
            .map_err(|e| Error::partly("work completion", e))?;
        if let Err(e) = held.remove() {
            tracing::warn!(agent = %self.me, error = %e, "reported, but the report's record stays (the next pickup removes it)");
        }
        self.archive_assignment_mail(&assignment);
        tracing::info!(agent = %self.me, bead = %assignment.work.bead_id, %report, "work completed and reported");
        Ok(WorkOutcome::Completed {
            assignment,
            report,
            completed_at,
        })
    }

    /// Sends the report a failure or a crash left undelivered, if any,
    /// and removes its record. One whose assignment the hook still holds
    /// unfinished is left: the work resumes, and its completion replaces it.
    pub(super) fn deliver_pending(&self) -> Result<()> {
        let files = self.channels.files();
        let path = files.report(&self.me);
        if files.read::<PendingReport>(&path)?.is_none() {
            return Ok(());
        }
        let mut held = files.lock::<PendingReport>(&path)?;
        let Some(pending) = held.current().cloned() else {
            return Ok(());
        };
        let completed_at = match self.channels.hooks.read(&self.me)? {
            ReadOutcome::Value(h)
                if h.assignment()
                    .is_some_and(|a| a.same_fence(&pending.assignment)) =>
            {
                if h.state.status() != HookStatus::Completed {
                    return Ok(());
                }
                h.last_activity
            }
            // The hook moved on (cleared after the completion was
            // verified): the report is late, never lost.
            ReadOutcome::Value(_) | ReadOutcome::Missing => pending.finished_at,
            // The pickup reports an unreadable hook.
            _ => return Ok(()),
        };
        let report = self.deliver(&pending, completed_at)?;
        if let Err(e) = held.remove() {
            tracing::warn!(agent = %self.me, error = %e, "reported, but the report's record stays (the next pickup removes it)");
        }
        tracing::info!(agent = %self.me, bead = %pending.assignment.work.bead_id, %report, "work reported after a failure");
        Ok(())
    }

    /// Sends the `completion_report` mail under its fixed id (a report
    /// already there is the first delivery) and the high-priority
    /// `work-completed` wake-up under the same id, made from the report as
    /// delivered; returns the mail's id. A failure after the mail went out
    /// is partly done.
    fn deliver(&self, pending: &PendingReport, completed_at: Timestamp) -> Result<MessageId> {
        let assignment = &pending.assignment;
        let message = LoopMessage::CompletionReport {
            assignment: assignment.clone(),
            completed_at,
            summary: pending.summary.clone(),
        };
        let id = report_id(assignment)?;
        let draft = NewMessage::notify(
            self.me.clone(),
            self.dispatcher.clone(),
            task_of(&assignment.work.bead_id)?,
            COMPLETION_REPORT,
            message.to_body(),
        )
        .with_id(id.clone());
        let sent = match self.channels.mail.send(&draft) {
            Ok(sent) => sent,
            // Delivered before with another time (the hook had moved on
            // when this one was made): the first delivery is the report.
            Err(taken @ chipset_mail::Error::IdTaken { .. }) => {
                match self.channels.mail.find(&id)? {
                    Some(first) => first,
                    None => return Err(taken.into()),
                }
            }
            Err(e) => return Err(e.into()),
        };
        let message = LoopMessage::from_body(&sent.body).unwrap_or(message);
        let event = NewEvent::new(self.me.as_str(), WORK_COMPLETED_EVENT)
            .with_priority(BusPriority::High)
            .with_payload(message.to_payload())
            .with_dedup_key(format!(
                "{WORK_COMPLETED_EVENT}/{}",
                IncidentKey::of(assignment)
            ))
            .with_id(EventId::new(id.as_str())?);
        match self.channels.bus.publish(&self.dispatcher, &event) {
            Ok(_) => Ok(id),
            Err(e) => Err(Error::partly("work report", e.into())),
        }
    }
}

#[cfg(test)]
mod tests {
    use chipset_hook::{Assignment, BeadId, Hook, HookState, WorkItem};
    use chipset_store::{AgentId, Timestamp};

    use super::{PendingReport, report_id};

    fn assignment(generation: u64) -> Assignment {
        let at = Timestamp::from_unix_ms(1_772_706_900_000);
        let mayor = AgentId::new("mayor").unwrap();
        let work = WorkItem::new(BeadId::new("b-1").unwrap(), "work", at, Some(mayor));
        let hook = Hook::new(
            AgentId::new("w1").unwrap(),
            HookState::Active(work),
            at,
            generation,
        );
        hook.assignment().unwrap()
    }

    /// The record's form on disk, pinned: a newer version must read what
    /// an older one left undelivered.
    #[test]
    fn a_pending_report_is_its_assignment_summary_and_time() {
        let pending = PendingReport {
            assignment: assignment(1),
            summary: "done".to_owned(),
            finished_at: Timestamp::from_unix_ms(1_772_707_000_000),
        };
        let json = chipset_store::StateDir::to_canonical_json(&pending).unwrap();
        let value: serde_json::Value = serde_json::from_slice(&json).unwrap();
        assert_eq!(
            value,
            serde_json::json!({
                "assignment": {
                    "agent": "w1",
                    "generation": 1,
                    "work": {
                        "assigned_at": "2026-03-05T10:35:00.000Z",
                        "assigned_by": "mayor",
                        "bead_id": "b-1",
                        "title": "work",
                    },
                },
                "finished_at": "2026-03-05T10:36:40.000Z",
                "summary": "done",
            })
        );
        let back: PendingReport = serde_json::from_slice(&json).unwrap();
        assert_eq!(back, pending);
    }

    /// The report's id is the same for the same assignment (a resend is
    /// the first delivery), in the seed's form, and another per
    /// generation.
    #[test]
    fn a_report_id_is_fixed_by_its_assignment() {
        let id = report_id(&assignment(1)).unwrap();
        assert_eq!(id, report_id(&assignment(1)).unwrap());
        assert!(id.is_seed_form(), "{id}");
        assert_ne!(id, report_id(&assignment(2)).unwrap());
    }
}
