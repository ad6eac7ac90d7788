//! How chipset's front ends report a failure: one line saying what was
//! refused and why, and whether the caller's input was at fault.
//!
//! The command line (`chipset`) and the MCP server (`chipset-mcp`) are two
//! thin shells over the same libraries; this crate is the one place that
//! turns the libraries' typed errors into what those shells show, so an
//! agent reads the same sentence whether it ran `chipset hook touch a` in a
//! shell (`chipset: error: …`, exit status 1) or called the `hook_touch`
//! tool (an `isError` result holding the same text).
//!
//! ```
//! use chipset_failure::{Class, Failure};
//!
//! let bad = chipset_store::AgentId::new("a/b").unwrap_err();
//! let failure = Failure::from(bad);
//! assert_eq!(failure.class(), Class::Usage);
//! assert_eq!(failure.exit_status(), 2);
//!
//! let missing = chipset_nudge::Error::ReminderNotFound { id: "x".into() };
//! let failure = Failure::from(missing);
//! assert_eq!(failure.class(), Class::Refused);
//! assert_eq!(failure.to_string(), "no reminder with id `x`");
//! ```
//!
//! # Classes
//!
//! A [`Failure`] is a [`Class::Usage`] error when the input was at fault (a
//! malformed id, a subject that is not kebab-case, an unregistered reminder
//! kind, a payload that is not JSON): the command line exits 2. Anything else
//! is [`Class::Refused`]: a transition the state does not allow, an id that
//! does not exist, a corrupt file where a clean one is needed, an I/O
//! failure; the command line exits 1.
//!
//! # Messages
//!
//! The message is the error and its sources joined by `: ` (the libraries
//! never repeat a source in their own message), and [`Failure`]'s `Display`
//! joins its lines into one. The refusals that the shells themselves decide
//! (acting on an empty hook, a nudge held behind an abort, unreadable files
//! in a listing) have named constructors here, so both shells word them
//! alike.

#![forbid(unsafe_code)]

use std::error::Error as StdError;
use std::fmt;
use std::path::Path;

use chipset_store::{AgentId, Corruption, MaybeCommitted, ReadOutcome};

/// The command line's exit status for [`Class::OutcomeUnknown`].
pub const OUTCOME_UNKNOWN: u8 = 3;

/// Whether a failure is the caller's input, a refusal, or of unknown outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Class {
    /// The input was at fault: an argument or id the operation cannot take.
    Usage,
    /// The operation was refused, or failed for another reason.
    Refused,
    /// The outcome is unknown: the change was made but is not known to be
    /// durable (its commit point's sync failed). A retry with the same id is
    /// safe; the message names what was written.
    OutcomeUnknown,
}

/// Why an operation failed, as one line and a [`Class`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    class: Class,
    message: String,
}

impl Failure {
    /// Returns a usage failure: an argument the operation cannot take.
    pub fn usage(message: impl Into<String>) -> Self {
        Failure {
            class: Class::Usage,
            message: message.into(),
        }
    }

    /// Returns a refusal or other failure.
    pub fn refused(message: impl Into<String>) -> Self {
        Failure {
            class: Class::Refused,
            message: message.into(),
        }
    }

    /// Returns the failure's class.
    pub fn class(&self) -> Class {
        self.class
    }

    /// Returns the command line's exit status for it: 2 for usage, 3 for
    /// an unknown outcome, 1 otherwise.
    pub fn exit_status(&self) -> u8 {
        match self.class {
            Class::Usage => 2,
            Class::Refused => 1,
            Class::OutcomeUnknown => OUTCOME_UNKNOWN,
        }
    }

    /// Returns `self` as [`Class::OutcomeUnknown`] when `unknown`.
    fn unknown_if(mut self, unknown: bool) -> Self {
        if unknown {
            self.class = Class::OutcomeUnknown;
        }
        self
    }

    /// Refuses `op` (`touch`, `complete`, …) on `agent`'s hook, which holds no work.
    pub fn hook_empty(agent: &AgentId, op: &str) -> Self {
        Failure::refused(format!(
            "cannot {op} the hook of `{agent}`: it is empty (no work is assigned)"
        ))
    }

    /// Returns the assignment `agent`'s hook holds now, for `op` to act
    /// on: refused when the hook is empty, or when the caller named another
    /// bead or generation (`--bead`, `--generation`; `bead`, `generation`
    /// over MCP), since that work was taken away or replaced.
    ///
    /// # Errors
    ///
    /// A refusal naming what was asked for and what the hook holds; the
    /// hook's own errors (a corrupt hook, a store failure).
    pub fn held(
        hooks: &chipset_hook::Hooks,
        agent: &AgentId,
        op: &str,
        bead: Option<&chipset_hook::BeadId>,
        generation: Option<u64>,
    ) -> Result<chipset_hook::Assignment, Self> {
        let held = hooks
            .current(agent)?
            .ok_or_else(|| Failure::hook_empty(agent, op))?;
        let bead_differs = bead.is_some_and(|b| *b != held.work.bead_id);
        let generation_differs = generation.is_some_and(|g| g != held.generation);
        if !bead_differs && !generation_differs {
            return Ok(held);
        }
        let asked = match (bead, generation) {
            (Some(b), Some(g)) => format!("`{b}` (generation {g})"),
            (Some(b), None) => format!("`{b}`"),
            (None, Some(g)) => format!("generation {g}"),
            (None, None) => unreachable!("a difference needs a fence"),
        };
        Err(Failure::refused(format!(
            "cannot {op} {asked} on the hook of `{agent}`: it holds `{}` (generation {}) now, \
             so that work was taken away or replaced; nothing changed",
            held.work.bead_id, held.generation
        )))
    }

    /// Refuses to show `agent`'s hook, whose file is unreadable.
    pub fn hook_unreadable(agent: &AgentId, corrupt: &Corruption) -> Self {
        Failure::refused(format!(
            "the hook of `{agent}` is unreadable: {corrupt}; `chipset doctor --fix` quarantines it"
        ))
    }

    /// Refuses a nudge to `to`: an unprocessed abort from `pending_from` holds.
    pub fn nudge_held(to: &AgentId, pending_from: &str) -> Self {
        Failure::refused(format!(
            "nudge to `{to}` not sent: an unprocessed abort from `{pending_from}` is pending, \
             and only another abort replaces it"
        ))
    }

    /// Refuses a nudge to `to` for a reason this version does not know.
    pub fn nudge_not_sent(to: &AgentId) -> Self {
        Failure::refused(format!("nudge to `{to}` not sent"))
    }

    /// Refuses to read `agent`'s latest nudge, which is unreadable.
    pub fn nudge_unreadable(agent: &AgentId, corrupt: &Corruption) -> Self {
        Failure::refused(format!(
            "the latest nudge of `{agent}` is unreadable: {corrupt}; \
             `chipset doctor --fix` quarantines it"
        ))
    }

    /// Refuses to read `agent`'s nudge for a reason this version does not know.
    pub fn nudge_not_read(agent: &AgentId) -> Self {
        Failure::refused(format!("cannot read the nudge of `{agent}`"))
    }

    /// Refuses an answer from `agent`, who has no nudge.
    pub fn no_nudge_to_answer(agent: &AgentId) -> Self {
        Failure::refused(format!("`{agent}` has no nudge to answer"))
    }

    /// Returns the nudge `agent` is to answer, from what its `latest.json`
    /// read as; refuses when there is none, or it is unreadable or of a kind
    /// this version does not know.
    pub fn nudge_to_answer<T>(agent: &AgentId, latest: ReadOutcome<T>) -> Result<T, Self> {
        match latest {
            ReadOutcome::Missing => Err(Failure::no_nudge_to_answer(agent)),
            ReadOutcome::Corrupt(c) => Err(Failure::nudge_unanswerable(agent, &c)),
            ReadOutcome::Unsupported(u) => Err(Failure::refused(format!("cannot answer: {u}"))),
            ReadOutcome::Value(n) => Ok(n),
        }
    }

    /// Refuses an answer from `agent`, whose latest nudge is unreadable.
    pub fn nudge_unanswerable(agent: &AgentId, corrupt: &Corruption) -> Self {
        Failure::refused(format!(
            "cannot answer: the latest nudge of `{agent}` is unreadable: {corrupt}"
        ))
    }

    /// Fails a listing of `agent`'s queue that met `count` unreadable files,
    /// the first at `first` with `problem`.
    pub fn unreadable_queue(agent: &AgentId, count: usize, first: &Path, problem: &str) -> Self {
        Failure::refused(format!(
            "{} in the queue of `{agent}` ({}: {problem}); `chipset doctor --fix` quarantines them",
            plural(count, "unreadable file"),
            first.display(),
        ))
    }

    /// Fails a listing of reminders that met `count` unreadable files, the
    /// first described by `first`.
    pub fn unreadable_reminders(count: usize, first: &dyn fmt::Display) -> Self {
        Failure::refused(format!(
            "{} ({first}); `chipset doctor --fix` quarantines them",
            plural(count, "unreadable reminder file")
        ))
    }

    /// Returns a failure of `class` whose message is `error` and its
    /// sources, for errors this crate has no `From` for.
    pub fn from_error(class: Class, error: &dyn StdError) -> Self {
        Failure {
            class,
            message: chain(error),
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // One line, whatever the message holds.
        let mut first = true;
        for line in self.message.lines().filter(|l| !l.trim().is_empty()) {
            if !first {
                f.write_str(" ")?;
            }
            f.write_str(line.trim())?;
            first = false;
        }
        Ok(())
    }
}

impl StdError for Failure {}

/// Returns `n thing` or `n things`.
pub fn plural(n: usize, thing: &str) -> String {
    if n == 1 {
        format!("{n} {thing}")
    } else {
        format!("{n} {thing}s")
    }
}

/// Returns the error and its sources joined by `: ` (the libraries never
/// repeat a source in their own message).
fn chain(error: &dyn StdError) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(s) = source {
        let next = s.to_string();
        if !text.ends_with(&next) {
            text.push_str(": ");
            text.push_str(&next);
        }
        source = s.source();
    }
    text
}

fn store_class(e: &chipset_store::Error) -> Class {
    match e {
        chipset_store::Error::InvalidId { .. } | chipset_store::Error::InvalidTimestamp { .. } => {
            Class::Usage
        }
        _ => Class::Refused,
    }
}

impl From<chipset::Error> for Failure {
    fn from(e: chipset::Error) -> Self {
        match e {
            chipset::Error::Store(e) => e.into(),
            chipset::Error::Hook(e) => e.into(),
            chipset::Error::Nudge(e) => e.into(),
            chipset::Error::Mail(e) => e.into(),
            chipset::Error::Bus(e) => e.into(),
            chipset::Error::Directory(e) => e.into(),
            chipset::Error::Loop(e) => e.into(),
            chipset::Error::Pool(e) => e.into(),
            chipset::Error::Search(e) => e.into(),
            chipset::Error::Lease(e) => e.into(),
            // The backend's own errors, and any the door adds: a refusal,
            // or an unknown outcome as the door's error says.
            other => {
                let unknown = other.is_outcome_unknown();
                Failure::from_error(Class::Refused, &other).unknown_if(unknown)
            }
        }
    }
}

impl From<chipset_store::Error> for Failure {
    fn from(e: chipset_store::Error) -> Self {
        Failure::from_error(store_class(&e), &e).unknown_if(e.is_outcome_unknown())
    }
}

impl From<chipset_hook::Error> for Failure {
    fn from(e: chipset_hook::Error) -> Self {
        let class = match &e {
            chipset_hook::Error::Store(s) => store_class(s),
            chipset_hook::Error::InvalidTitle { .. } => Class::Usage,
            _ => Class::Refused,
        };
        Failure::from_error(class, &e).unknown_if(e.is_outcome_unknown())
    }
}

impl From<chipset_nudge::Error> for Failure {
    fn from(e: chipset_nudge::Error) -> Self {
        use chipset_nudge::Error as E;
        let class = match &e {
            E::Store(s) => store_class(s),
            E::UnknownKind { .. }
            | E::SourceTypeMismatch { .. }
            | E::BlockingSeverity
            | E::EmptySourceId
            | E::InvalidField { .. }
            | E::NotAResolvingVerb { .. } => Class::Usage,
            _ => Class::Refused,
        };
        Failure::from_error(class, &e).unknown_if(e.is_outcome_unknown())
    }
}

impl From<chipset_mail::Error> for Failure {
    fn from(e: chipset_mail::Error) -> Self {
        use chipset_mail::Error as E;
        let class = match &e {
            E::Store(s) => store_class(s),
            E::InvalidSubject { .. }
            | E::InvalidAgentName { .. }
            | E::RoundTooLarge { .. }
            | E::BodyTooLarge { .. }
            | E::MessageTooLarge { .. }
            | E::UnknownRecipient { .. }
            | E::EmptyGroup
            | E::GroupTooLarge { .. }
            | E::InvalidGroupId { .. }
            | E::InvalidMessageId { .. } => Class::Usage,
            _ => Class::Refused,
        };
        Failure::from_error(class, &e).unknown_if(e.is_outcome_unknown())
    }
}

impl From<chipset_bus::Error> for Failure {
    fn from(e: chipset_bus::Error) -> Self {
        use chipset_bus::Error as E;
        let class = match &e {
            E::Store(s) => store_class(s),
            E::InvalidField { .. } => Class::Usage,
            _ => Class::Refused,
        };
        Failure::from_error(class, &e).unknown_if(e.is_outcome_unknown())
    }
}

impl From<chipset_loop::Error> for Failure {
    fn from(e: chipset_loop::Error) -> Self {
        let class = match &e {
            chipset_loop::Error::Store(s) => store_class(s),
            _ => Class::Refused,
        };
        // A store's unknown outcome, a channel's, or a tick cut part way.
        Failure::from_error(class, &e).unknown_if(e.is_outcome_unknown())
    }
}

impl From<chipset_lease::Error> for Failure {
    fn from(e: chipset_lease::Error) -> Self {
        let class = match &e {
            chipset_lease::Error::Store(s) => store_class(s),
            _ if e.is_usage() => Class::Usage,
            _ => Class::Refused,
        };
        Failure::from_error(class, &e).unknown_if(e.is_outcome_unknown())
    }
}

impl From<chipset::search::Error> for Failure {
    fn from(e: chipset::search::Error) -> Self {
        match e {
            chipset::search::Error::Store(s) => s.into(),
            other if other.is_usage() => Failure::from_error(Class::Usage, &other),
            other => Failure::from_error(Class::Refused, &other),
        }
    }
}

impl From<chipset::directory::Error> for Failure {
    fn from(e: chipset::directory::Error) -> Self {
        use chipset::directory::Error as E;
        match e {
            E::Store(s) => s.into(),
            E::Hook(h) => h.into(),
            E::Bus(b) => b.into(),
            other if other.is_usage() => Failure::from_error(Class::Usage, &other),
            // A list changed in part, or a server's unknown outcome.
            other => {
                let unknown = other.is_outcome_unknown();
                Failure::from_error(Class::Refused, &other).unknown_if(unknown)
            }
        }
    }
}

impl From<chipset::pool::Error> for Failure {
    fn from(e: chipset::pool::Error) -> Self {
        use chipset::pool::Error as E;
        let unknown = e.is_outcome_unknown();
        match e {
            E::Store(s) => s.into(),
            E::Hook(h) => h.into(),
            other if other.is_usage() => Failure::from_error(Class::Usage, &other),
            other => Failure::from_error(Class::Refused, &other).unknown_if(unknown),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_ids_are_usage_errors_and_refusals_are_not() {
        let bad = chipset_store::AgentId::new("a/b").unwrap_err();
        assert_eq!(Failure::from(bad).exit_status(), 2);
        let missing = chipset_nudge::Error::ReminderNotFound { id: "x".into() };
        let e = Failure::from(missing);
        assert_eq!(e.exit_status(), 1);
        assert_eq!(e.class(), Class::Refused);
        assert_eq!(e.to_string(), "no reminder with id `x`");
        let unknown = chipset_store::Error::OutcomeUnknown {
            op: "sync directory",
            path: "/q/1-x.json".into(),
            source: std::io::Error::from_raw_os_error(5),
        };
        let e = Failure::from(unknown);
        assert_eq!(e.class(), Class::OutcomeUnknown);
        assert_eq!(e.exit_status(), OUTCOME_UNKNOWN);
        assert!(e.to_string().contains("/q/1-x.json"), "{e}");
    }

    /// A lease's unknown outcome through the door exits 3 as it does
    /// alone, and so does the backend's (a server's lost commit answer).
    #[test]
    fn a_lease_or_backend_unknown_outcome_through_the_door_exits_3() {
        let unknown = || chipset_store::Error::OutcomeUnknown {
            op: "sync directory",
            path: "/leases/table.json".into(),
            source: std::io::Error::from_raw_os_error(5),
        };
        let lease = chipset::Error::from(chipset::lease::Error::from(unknown()));
        assert_eq!(Failure::from(lease).exit_status(), 3);
        let backend = chipset::Error::from(chipset::backend::Error::OutcomeUnknown {
            op: "commit",
            key: "hooks/a".to_owned(),
            source: Box::new(std::io::Error::other("lost")),
        });
        assert_eq!(Failure::from(backend).exit_status(), 3);
    }

    /// A directory error through the door is classed as the directory's
    /// own: a store failure under it keeps its class and its unknown
    /// outcome.
    #[test]
    fn a_directory_error_through_the_door_keeps_its_class() {
        let door = |e: chipset_store::Error| {
            Failure::from(chipset::Error::from(chipset::directory::Error::from(e)))
        };
        let bad = chipset_store::AgentId::new("a/b").unwrap_err();
        assert_eq!(door(bad).exit_status(), 2);
        let unknown = chipset_store::Error::OutcomeUnknown {
            op: "sync directory",
            path: "/agents/a.json".into(),
            source: std::io::Error::from_raw_os_error(5),
        };
        let e = door(unknown);
        assert_eq!(e.class(), Class::OutcomeUnknown);
        assert!(e.to_string().contains("/agents/a.json"), "{e}");
    }

    /// A loop call cut part way, after a step changed something, is an
    /// unknown outcome, though the step that failed was refused.
    #[test]
    fn a_change_made_in_part_exits_3() {
        let refused = || chipset_loop::Error::AlreadySubmitted {
            bead: chipset_hook::BeadId::new("b-1").unwrap(),
        };
        assert_eq!(Failure::from(refused()).exit_status(), 1);
        let tick = chipset_loop::Error::PartlyDone {
            op: "dispatcher tick",
            source: Box::new(refused()),
        };
        let e = Failure::from(tick);
        assert_eq!(e.exit_status(), OUTCOME_UNKNOWN, "{e}");
        assert!(
            e.to_string()
                .starts_with("the dispatcher tick failed part way"),
            "{e}"
        );
    }

    #[test]
    fn a_mail_send_of_unknown_outcome_exits_3_and_names_the_id() {
        let id = chipset_mail::MessageId::new("1-x").unwrap();
        let e = Failure::from(chipset_mail::Error::OutcomeUnknown {
            ids: vec![id],
            source: chipset_store::Error::OutcomeUnknown {
                op: "sync directory",
                path: "/mail/inbox/b/1-x.json".into(),
                source: std::io::Error::from_raw_os_error(5),
            },
        });
        assert_eq!(e.exit_status(), OUTCOME_UNKNOWN);
        assert!(
            e.to_string()
                .starts_with("message `1-x` may have been sent"),
            "{e}"
        );
        let partly = Failure::from(chipset_nudge::Error::ResponseNotDelivered {
            sender: AgentId::new("w").unwrap(),
            source: Box::new(chipset_nudge::Error::ReminderNotFound { id: "x".into() }),
        });
        assert_eq!(partly.exit_status(), OUTCOME_UNKNOWN);
        // Same id, other content: a refusal.
        let taken = Failure::from(chipset_mail::Error::IdTaken {
            id: chipset_mail::MessageId::new("1-x").unwrap(),
            location: chipset_mail::Location::Archive,
        });
        assert_eq!(taken.exit_status(), 1);
    }

    #[test]
    fn messages_are_one_line_with_their_sources() {
        let io = std::io::Error::new(std::io::ErrorKind::PermissionDenied, "denied");
        let e = chipset_store::Error::io("open", "/x", io);
        assert_eq!(Failure::from(e).to_string(), "failed to open `/x`: denied");
        assert_eq!(
            Failure::usage("a\n  b\n\nc").to_string(),
            "a b c",
            "lines are joined"
        );
    }

    #[test]
    fn shell_refusals_name_the_agent() {
        let a = AgentId::new("a").unwrap();
        assert_eq!(
            Failure::hook_empty(&a, "touch").to_string(),
            "cannot touch the hook of `a`: it is empty (no work is assigned)"
        );
        assert_eq!(plural(1, "event"), "1 event");
        assert_eq!(plural(2, "event"), "2 events");
    }
}
