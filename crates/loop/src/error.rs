//! The crate's one error type.

use std::path::PathBuf;

use chipset_hook::Assignment;
use chipset_hook::BeadId;
use chipset_store::{Classify, Corruption, ErrorKind, TaskId};

use crate::format::Phase;

/// A specialized result for loop operations.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything a loop operation can fail with.
///
/// Channel failures keep their own typed error ([`Error::Hook`],
/// [`Error::Nudge`], [`Error::Mail`], [`Error::Bus`]); a loop file that is
/// there but unreadable is [`Error::Corrupt`], never "nothing there".
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A filesystem operation on a loop file failed; it names the operation and the path.
    #[error(transparent)]
    Store(#[from] chipset_store::Error),
    /// A hook operation failed or was refused.
    #[error(transparent)]
    Hook(#[from] chipset_hook::Error),
    /// A nudge operation failed.
    #[error(transparent)]
    Nudge(#[from] chipset_nudge::Error),
    /// A mail operation failed or was refused.
    #[error(transparent)]
    Mail(#[from] chipset_mail::Error),
    /// A bus operation failed.
    #[error(transparent)]
    Bus(#[from] chipset_bus::Error),
    /// A work pool operation failed (the witness returning a stalled
    /// holder's item).
    #[error(transparent)]
    Pool(#[from] chipset_pool::Error),
    /// Reading the lease table (for a brief) failed.
    #[error(transparent)]
    Lease(#[from] chipset_lease::Error),
    /// A server's failure (issue 30) reading or writing a loop record:
    /// unreachable, refused, or an unknown outcome
    /// ([`Classify`](chipset_store::Classify)).
    #[error(transparent)]
    Backend(Box<chipset_backend::Error>),
    /// A loop file (`loop/…`) is there but unreadable; `doctor` moves it aside.
    #[error("loop state is corrupt: {0}")]
    Corrupt(Corruption),
    /// The work was taken away from this agent (cleared or reassigned): it
    /// can no longer touch or complete it, and nothing was reported as done.
    #[error("the work was taken away: {assignment} is no longer on the hook")]
    Stale {
        /// The assignment the agent held.
        assignment: Box<Assignment>,
    },
    /// A work item submitted to the dispatcher again under another title
    /// (the same request again is its retry, and returns the entry).
    #[error("work item `{bead}` is already in the dispatcher ledger")]
    AlreadySubmitted {
        /// The bead.
        bead: BeadId,
    },
    /// A work item the dispatcher does not know.
    #[error("work item `{bead}` is not in the dispatcher ledger")]
    UnknownBead {
        /// The bead.
        bead: BeadId,
    },
    /// A round operation called in the wrong phase.
    #[error("the round of task `{task}` is in phase {phase}; this step needs {expected}")]
    WrongPhase {
        /// The task.
        task: TaskId,
        /// The phase the round is in.
        phase: Phase,
        /// The phase the step needs.
        expected: Phase,
    },
    /// A channel handle given to a loop is on another state root than the
    /// loop's other handles ([`Channels`](crate::Channels)).
    #[error("the {channel} handle is on the state root `{found}`, not on the loop's root `{root}`")]
    MixedRoots {
        /// Which handle: `mail` or `bus`.
        channel: &'static str,
        /// Its state root.
        found: PathBuf,
        /// The loop's state root.
        root: PathBuf,
    },
    /// A call of many steps (a tick, a round's route or commit) failed part
    /// way, after a step of it had changed something: the steps taken stay
    /// taken and consistent, and the retry (the next tick, the same call
    /// again) goes on from them. Its outcome is unknown
    /// ([`Classify`](chipset_store::Classify)); `source` is the
    /// failure. A call that fails before changing anything returns the
    /// failure itself.
    #[error("the {op} failed part way, after changing state")]
    PartlyDone {
        /// The call: `dispatcher tick`, `witness tick`, `round route`,
        /// `round commit`, `work completion` (the hook completed, its
        /// report not sent), `work report` (the report mailed, its wake-up
        /// not published) or `nudge answer` (the nudge answered, not marked
        /// processed).
        op: &'static str,
        /// What failed.
        source: Box<Error>,
    },
    /// The round checkpoint on disk is not the one this handle holds: another
    /// orchestrator moved the round on. Reopen it.
    #[error("the round checkpoint of task `{task}` was changed by someone else; reopen the round")]
    Conflict {
        /// The task.
        task: TaskId,
    },
}

impl Error {
    /// Returns the error of a call of many steps that failed with `e`
    /// after a step of it changed something: `e` when its outcome is
    /// unknown already, else [`Error::PartlyDone`].
    pub(crate) fn partly(op: &'static str, e: Error) -> Error {
        use chipset_store::Classify as _;
        if e.is_outcome_unknown() {
            e
        } else {
            Error::PartlyDone {
                op,
                source: Box::new(e),
            }
        }
    }
}

/// The actions of a tick in progress, and whether a step of it changed
/// something (a write, a send, a publish that returned).
#[derive(Debug)]
pub(crate) struct Tick<A> {
    pub(crate) actions: Vec<A>,
    changed: bool,
}

impl<A> Tick<A> {
    pub(crate) fn new() -> Self {
        Tick {
            actions: Vec::new(),
            changed: false,
        }
    }

    pub(crate) fn push(&mut self, action: A) {
        self.actions.push(action);
    }

    pub(crate) fn extend(&mut self, actions: impl IntoIterator<Item = A>) {
        self.actions.extend(actions);
    }

    /// Notes that a step changed something.
    pub(crate) fn changed(&mut self) {
        self.changed = true;
    }

    /// Returns the error of a tick that failed with `e`: as it is when the
    /// tick changed nothing, or when its outcome is unknown already;
    /// otherwise [`Error::PartlyDone`], whose outcome is unknown (the steps
    /// taken before the failure stay taken).
    pub(crate) fn failed(&self, op: &'static str, e: Error) -> Error {
        if self.changed {
            Error::partly(op, e)
        } else {
            e
        }
    }

    /// Logs the tick's actions with `log` and returns them, or its error
    /// as [`Tick::failed`] says. A tick that failed after it changed
    /// something still logs the actions it took (best effort: a failure to
    /// log them is traced, and the tick's own error returned), so the log
    /// misses none of them; one that changed nothing logs nothing.
    pub(crate) fn finish(
        self,
        op: &'static str,
        result: Result<()>,
        log: impl FnOnce(&[A]) -> Result<()>,
    ) -> Result<Vec<A>> {
        match result {
            Ok(()) => match log(&self.actions) {
                Ok(()) => Ok(self.actions),
                Err(e) => Err(self.failed(op, e)),
            },
            Err(e) => {
                if self.changed
                    && !self.actions.is_empty()
                    && let Err(logged) = log(&self.actions)
                {
                    tracing::warn!(error = %logged, "{op}: could not log the actions it took");
                }
                Err(self.failed(op, e))
            }
        }
    }
}

impl From<Corruption> for Error {
    fn from(c: Corruption) -> Self {
        Error::Corrupt(c)
    }
}

impl Classify for Error {
    /// Classifies the failure as the channel that failed does, or as the
    /// loop's own. A call cut part way ([`Error::PartlyDone`]) may have
    /// made its change, as may a store's, a channel's or the server's
    /// unknown outcome: the loop's next step reads the record again, so
    /// retrying is safe.
    fn kind(&self) -> ErrorKind {
        match self {
            Error::Store(e) => e.kind(),
            Error::Hook(e) => e.kind(),
            Error::Nudge(e) => e.kind(),
            Error::Mail(e) => e.kind(),
            Error::Bus(e) => e.kind(),
            Error::Pool(e) => e.kind(),
            Error::Lease(e) => e.kind(),
            Error::Backend(e) => e.kind(),
            Error::Corrupt(_) => ErrorKind::Corrupt,
            Error::Stale { .. } | Error::Conflict { .. } => ErrorKind::Stale,
            Error::AlreadySubmitted { .. } | Error::WrongPhase { .. } => ErrorKind::Refused,
            Error::UnknownBead { .. } => ErrorKind::NotFound,
            Error::MixedRoots { .. } => ErrorKind::Invalid,
            Error::PartlyDone { .. } => ErrorKind::OutcomeUnknown,
        }
    }
}

#[cfg(test)]
mod tests {
    use chipset_store::{AgentId, CorruptReason};

    use super::*;

    fn corruption() -> Corruption {
        Corruption {
            path: "hooks/alpha.json".into(),
            reason: CorruptReason::Unparsable("EOF".into()),
        }
    }

    /// Each channel's corrupt file is a corrupt error of the loop; the
    /// loop's own refusals keep their kinds.
    #[test]
    fn a_channels_kind_is_the_loops() {
        let hook = chipset_hook::Error::Corrupt {
            agent: AgentId::new("alpha").unwrap(),
            op: "assign",
            corruption: corruption(),
        };
        for corrupt in [
            Error::Corrupt(corruption()),
            Error::Hook(hook),
            Error::Mail(chipset_mail::Error::Corrupt(corruption())),
            Error::Nudge(chipset_nudge::Error::Corrupt(corruption())),
        ] {
            assert_eq!(corrupt.kind(), ErrorKind::Corrupt, "{corrupt:?}");
        }
        let bead = chipset_hook::BeadId::new("b-1").unwrap();
        let task = TaskId::new("t1").unwrap();
        let cases = [
            (Error::Conflict { task: task.clone() }, ErrorKind::Stale),
            (
                Error::AlreadySubmitted { bead: bead.clone() },
                ErrorKind::Refused,
            ),
            (Error::UnknownBead { bead }, ErrorKind::NotFound),
            (
                Error::WrongPhase {
                    task,
                    phase: Phase::Critic,
                    expected: Phase::Executor,
                },
                ErrorKind::Refused,
            ),
        ];
        for (e, kind) in cases {
            assert_eq!(e.kind(), kind, "{e:?}");
            assert!(!e.is_outcome_unknown(), "{e:?}");
        }
    }

    #[test]
    fn a_lost_commit_of_a_loop_record_or_a_channel_is_an_unknown_outcome() {
        use chipset_store::Classify as _;
        let lost = chipset_backend::Error::OutcomeUnknown {
            op: "replace",
            key: "loop/witness/incidents/alice.json".to_owned(),
            source: "connection closed".into(),
        };
        assert!(Error::Backend(Box::new(lost)).is_outcome_unknown());
        let refused = chipset_backend::Error::NotFound {
            key: "loop/witness/incidents/alice.json".to_owned(),
        };
        assert!(!Error::Backend(Box::new(refused)).is_outcome_unknown());
        let hook_lost = chipset_backend::Error::OutcomeUnknown {
            op: "replace",
            key: "hooks/alice.json".to_owned(),
            source: "connection closed".into(),
        };
        let hook = chipset_hook::Error::Backend(Box::new(hook_lost));
        assert!(Error::Hook(hook).is_outcome_unknown());
    }
}
