//! The vocabulary of the dispatcher's pure core: the events a ledger entry
//! sees, the effects and commands the core asks of the shell, and the
//! transition that carries them.

use chipset_hook::BeadId;
use chipset_hook::{Assignment, Hook};
use chipset_mail::MessageId;
use chipset_store::{AgentId, ReadOutcome, Timestamp};

use super::DispatchAction;
use crate::format::LedgerEntry;

/// What happens to a ledger entry: a message that arrived, or what the
/// shell saw or did on the entry's behalf (the answer to a [`LedgerCommand`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub(crate) enum LedgerEvent {
    /// A completion report about `assignment` (by mail or bus), with the
    /// completion time it names.
    Report {
        /// The assignment reported completed.
        assignment: Assignment,
        /// When the agent says it completed.
        completed_at: Option<Timestamp>,
    },
    /// A health escalation about `assignment`.
    Escalation {
        /// The assignment of the silent agent.
        assignment: Assignment,
    },
    /// The tick's sweep looks at the entry.
    Sweep,
    /// The dispatcher chose `agent` for a queued entry, the assignment mail
    /// to go under `mail`.
    Choose {
        /// The idle agent.
        agent: AgentId,
        /// The id the `work-assignment` mail will be sent under.
        mail: MessageId,
    },
    /// The agent's hook as read for [`LedgerCommand::Adopt`].
    Adopt(ReadOutcome<Hook>),
    /// The agent's hook as read for [`LedgerCommand::Check`].
    Check(ReadOutcome<Hook>),
    /// The agent's hook as read for [`LedgerCommand::Verify`].
    Verify {
        /// The hook.
        hook: ReadOutcome<Hook>,
        /// The completion time a report named, if one did.
        completed_at: Option<Timestamp>,
    },
    /// The hook took the assignment ([`LedgerCommand::Assign`] succeeded).
    Hooked(Assignment),
    /// The agent's hook refused the assignment (not empty, or unreadable).
    Refused,
    /// The `work-assignment` mail went out under this id ([`LedgerCommand::Mail`]).
    Mailed(MessageId),
    /// The hook was reassigned, or had let go of the work already
    /// ([`LedgerCommand::TakeAway`]).
    TookAway,
    /// The hook could not be reassigned because the agent completed the
    /// work just in time ([`LedgerCommand::TakeAway`]).
    FoundCompleted,
    /// The hook was cleared, or had moved on already ([`LedgerCommand::Clear`]).
    Cleared,
}

/// A side effect the shell carries out around the entry's write.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub(crate) enum LedgerEffect {
    /// Send the `work-assignment` mail under `mail` (a second send of the
    /// same id is a no-op).
    SendAssignment {
        /// The assignment.
        assignment: Assignment,
        /// Its id.
        mail: MessageId,
    },
    /// Wake the agent with a `work-assigned` bus event, under the id of
    /// the assignment's mail (a second publish of it is a no-op).
    Wake {
        /// The assignment.
        assignment: Assignment,
        /// The id of its `work-assignment` mail, which the event takes.
        mail: MessageId,
    },
    /// Give `agent` no new work (`agents.json`), if it is not suspended yet.
    Suspend {
        /// The silent agent.
        agent: AgentId,
        /// The bead it went silent on.
        bead_id: BeadId,
    },
    /// Send the agent an `abort` about the taken assignment (best effort).
    Abort(Assignment),
    /// The bead is done and its hook cleared: later sweeps skip it.
    Finished(BeadId),
}

/// What the shell does next for the entry, feeding the result back as the
/// next [`LedgerEvent`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub(crate) enum LedgerCommand {
    /// Nothing more for this entry now.
    Stop,
    /// Read `agent`'s hook and feed it back as [`LedgerEvent::Adopt`].
    Adopt(AgentId),
    /// Read `agent`'s hook and feed it back as [`LedgerEvent::Check`].
    Check(AgentId),
    /// Read `agent`'s hook and feed it back as [`LedgerEvent::Verify`]
    /// with `completed_at`.
    Verify {
        /// The agent.
        agent: AgentId,
        /// The completion time a report named, if one did.
        completed_at: Option<Timestamp>,
    },
    /// Put the entry's bead on `agent`'s hook: [`LedgerEvent::Hooked`] or
    /// [`LedgerEvent::Refused`].
    Assign(AgentId),
    /// Send the `work-assignment` mail (a new id): [`LedgerEvent::Mailed`].
    Mail(Assignment),
    /// Reassign the hook: [`LedgerEvent::TookAway`] or
    /// [`LedgerEvent::FoundCompleted`].
    TakeAway(Assignment),
    /// Clear the hook: [`LedgerEvent::Cleared`].
    Clear(Assignment),
}

/// The answer of [`ledger_transition`](super::ledger_transition()), carried out in field order: `before`, then
/// the durable write of `entry` (when some), then `after`, then `action`
/// reported, then `next`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub(crate) struct LedgerTransition {
    /// Effects that must happen before the write.
    pub(crate) before: Vec<LedgerEffect>,
    /// The entry to write; `None` leaves the file as it is.
    pub(crate) entry: Option<LedgerEntry>,
    /// Effects after the write.
    pub(crate) after: Vec<LedgerEffect>,
    /// What to report.
    pub(crate) action: Option<DispatchAction>,
    /// What the shell does next.
    pub(crate) next: LedgerCommand,
}

impl LedgerTransition {
    pub(super) fn stay() -> Self {
        LedgerTransition {
            before: Vec::new(),
            entry: None,
            after: Vec::new(),
            action: None,
            next: LedgerCommand::Stop,
        }
    }

    pub(super) fn then(next: LedgerCommand) -> Self {
        LedgerTransition {
            next,
            ..LedgerTransition::stay()
        }
    }

    pub(super) fn write(entry: LedgerEntry) -> Self {
        LedgerTransition {
            entry: Some(entry),
            ..LedgerTransition::stay()
        }
    }

    pub(super) fn report(action: DispatchAction) -> Self {
        LedgerTransition {
            action: Some(action),
            ..LedgerTransition::stay()
        }
    }
}
