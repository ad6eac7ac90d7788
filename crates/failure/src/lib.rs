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
//! A library error's class follows from its [`ErrorKind`] ([`Class::of`]).
//! A [`Failure`] is a [`Class::Usage`] error when the input was at fault
//! ([`ErrorKind::Invalid`]: a malformed id, a subject that is not
//! kebab-case, an unregistered reminder kind, a payload that is not JSON):
//! the command line exits 2. It is
//! [`Class::OutcomeUnknown`] when the change may have been made: exit 3.
//! Anything else is [`Class::Refused`]: a transition the state does not
//! allow, an id that does not exist, a corrupt file where a clean one is
//! needed, an I/O failure; the command line exits 1.
//!
//! # Messages
//!
//! The message is the error and its sources joined by `: ` (a library's
//! message does not repeat its source; a source whose text the message
//! already ends with is not said twice), and [`Failure`]'s `Display`
//! joins its lines into one. The refusals that the shells themselves decide
//! (acting on an empty hook, a nudge held behind an abort, unreadable files
//! in a listing) have named constructors here, so both shells word them
//! alike.

#![forbid(unsafe_code)]

use std::collections::BTreeMap;
use std::error::Error as StdError;
use std::fmt;
use std::path::PathBuf;

use chipset_store::{AgentId, Classify, Corruption, ErrorKind, Listing, ReadOutcome};

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

impl Class {
    /// Returns the class of a failure of `kind`: [`Class::Usage`] for
    /// [`ErrorKind::Invalid`], [`Class::OutcomeUnknown`] for
    /// [`ErrorKind::OutcomeUnknown`], and [`Class::Refused`] for the rest.
    pub fn of(kind: ErrorKind) -> Class {
        match kind {
            ErrorKind::Invalid => Class::Usage,
            ErrorKind::OutcomeUnknown => Class::OutcomeUnknown,
            _ => Class::Refused,
        }
    }
}

/// Why an operation failed, as one line and an [`ErrorKind`] (from which
/// its [`Class`] follows).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    kind: ErrorKind,
    message: String,
}

impl Failure {
    /// Returns a usage failure: an argument the operation cannot take.
    pub fn usage(message: impl Into<String>) -> Self {
        Failure::new(ErrorKind::Invalid, message)
    }

    /// Returns a refusal or other failure.
    pub fn refused(message: impl Into<String>) -> Self {
        Failure::new(ErrorKind::Refused, message)
    }

    /// Returns a failure of `kind`: for a shell's own refusal that is
    /// neither bad input nor a plain refusal (nothing found, an unreadable
    /// file).
    /// A message over 2,000 characters (one quoting a huge value) is cut.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        let mut message: String = message.into();
        if let Some((at, _)) = message.char_indices().nth(2000) {
            message.replace_range(at.., "…");
        }
        Failure { kind, message }
    }

    /// Returns the failure's kind: the library error's own, or the kind a
    /// shell's refusal names (a hook holding other work is stale, an
    /// unreadable file corrupt).
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// Returns the failure's class.
    pub fn class(&self) -> Class {
        Class::of(self.kind)
    }

    /// Returns the command line's exit status for it: 2 for usage, 3 for
    /// an unknown outcome, 1 otherwise.
    pub fn exit_status(&self) -> u8 {
        match self.class() {
            Class::Usage => 2,
            Class::Refused => 1,
            Class::OutcomeUnknown => OUTCOME_UNKNOWN,
        }
    }

    /// Refuses `op` (`touch`, `complete`, …) on `agent`'s hook, which holds no work.
    pub fn hook_empty(agent: &AgentId, op: &str) -> Self {
        Failure::refused(format!(
            "cannot {op} the hook of `{agent}`: it is empty (no work is assigned)"
        ))
    }

    /// Returns `agent`'s hook when it is empty right after the assignment
    /// of `generation`, which a clear or reassign took off: a retry of it
    /// has nothing left to do. `None` without a generation, else.
    ///
    /// # Errors
    ///
    /// A store failure; an unreadable hook is `None`, for [`Failure::held`].
    pub fn cleared_already(
        hooks: &chipset_hook::Hooks,
        agent: &AgentId,
        generation: Option<u64>,
    ) -> Result<Option<chipset_hook::Hook>, Self> {
        Ok(match (generation, hooks.read(agent)?) {
            (Some(g), ReadOutcome::Value(h))
                if h.state.status() == chipset_hook::HookStatus::Empty
                    && g.checked_add(1) == Some(h.generation) =>
            {
                Some(h)
            }
            _ => None,
        })
    }

    /// Returns this failure of `op` (`clear`, `reassign`) on `held`; when
    /// its outcome is unknown, with how to finish it: naming the generation
    /// ([`Failure::cleared_already`]), as the hook may be empty already.
    #[must_use]
    pub fn finish_clear(self, op: &str, held: &chipset_hook::Assignment) -> Self {
        if self.kind != ErrorKind::OutcomeUnknown {
            return self;
        }
        let (bead, generation) = (&held.work.bead_id, held.generation);
        let finish = format!("run it again with `--bead {bead} --generation {generation}`");
        Failure::new(
            self.kind,
            format!("{}; to finish the {op}, {finish}", self.message),
        )
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
        Err(Failure::new(
            ErrorKind::Stale,
            format!(
                "cannot {op} {asked} on the hook of `{agent}`: it holds `{}` (generation {}) now, \
             so that work was taken away or replaced; nothing changed",
                held.work.bead_id, held.generation
            ),
        ))
    }

    /// Refuses to show `agent`'s hook, whose file is unreadable.
    pub fn hook_unreadable(agent: &AgentId, corrupt: &Corruption) -> Self {
        Failure::new(
            ErrorKind::Corrupt,
            format!(
                "the hook of `{agent}` is unreadable: {corrupt}; `chipset doctor --fix` quarantines it"
            ),
        )
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
        Failure::new(
            ErrorKind::Corrupt,
            format!(
                "the latest nudge of `{agent}` is unreadable: {corrupt}; \
             `chipset doctor --fix` quarantines it"
            ),
        )
    }

    /// Refuses to read `agent`'s nudge for a reason this version does not know.
    pub fn nudge_not_read(agent: &AgentId) -> Self {
        Failure::refused(format!("cannot read the nudge of `{agent}`"))
    }

    /// Refuses an answer from `agent`, who has no nudge.
    pub fn no_nudge_to_answer(agent: &AgentId) -> Self {
        Failure::new(
            ErrorKind::NotFound,
            format!("`{agent}` has no nudge to answer"),
        )
    }

    /// Returns the nudge `agent` is to answer, from what its `latest.json`
    /// read as; refuses when there is none, or it is unreadable or of a kind
    /// this version does not know.
    pub fn nudge_to_answer<T>(agent: &AgentId, latest: ReadOutcome<T>) -> Result<T, Self> {
        match latest {
            ReadOutcome::Missing => Err(Failure::no_nudge_to_answer(agent)),
            ReadOutcome::Corrupt(c) => Err(Failure::nudge_unanswerable(agent, &c)),
            ReadOutcome::Unsupported(u) => Err(Failure::new(
                ErrorKind::Unsupported,
                format!("cannot answer: {u}"),
            )),
            ReadOutcome::Value(n) => Ok(n),
        }
    }

    /// Refuses an answer from `agent`, whose latest nudge is unreadable.
    pub fn nudge_unanswerable(agent: &AgentId, corrupt: &Corruption) -> Self {
        Failure::new(
            ErrorKind::Corrupt,
            format!("cannot answer: the latest nudge of `{agent}` is unreadable: {corrupt}"),
        )
    }

    /// Fails a listing of `agent`'s queue that met unreadable files
    /// (`unreadable`, as [`Pending::unreadable`](chipset_bus::Pending::unreadable)
    /// holds them): `None` when it met none. Only events this version
    /// does not know make it [`ErrorKind::Unsupported`] (the doctor leaves
    /// them in place); anything else [`ErrorKind::Corrupt`]. The message
    /// names the first.
    pub fn unreadable_queue(
        agent: &AgentId,
        unreadable: &BTreeMap<PathBuf, chipset_bus::Problem>,
    ) -> Option<Self> {
        let (first, problem) = unreadable.first_key_value()?;
        let unsupported =
            |p: &chipset_bus::Problem| matches!(p, chipset_bus::Problem::Unsupported(_));
        let (kind, fix) = doctor_for(unreadable.values().all(unsupported));
        Some(Failure::new(
            kind,
            format!(
                "{} in the queue of `{agent}` ({}: {problem}); {fix}",
                plural(unreadable.len(), "unreadable file"),
                first.display(),
            ),
        ))
    }

    /// Fails a listing of `what` (a noun: "reminder") that met files it
    /// could not read: `None` when it met none. Corrupt files make it
    /// [`ErrorKind::Corrupt`], only unsupported ones
    /// [`ErrorKind::Unsupported`]; the message names the first.
    pub fn unreadable<T>(listing: &Listing<T>, what: &str) -> Option<Self> {
        let first = listing.unreadable().next()?;
        let count = listing.unreadable().count();
        let (kind, fix) = doctor_for(listing.corrupt.is_empty());
        let noun = format!("unreadable {what} file");
        Some(Failure::new(
            kind,
            format!("{} ({first}); {fix}", plural(count, &noun)),
        ))
    }

    /// Returns a failure of `class` whose message is `error` and its
    /// sources, for errors this crate has no `From` for.
    pub fn from_error(class: Class, error: &dyn StdError) -> Self {
        let kind = match class {
            Class::Usage => ErrorKind::Invalid,
            Class::OutcomeUnknown => ErrorKind::OutcomeUnknown,
            Class::Refused => ErrorKind::Refused,
        };
        Failure::new(kind, chain(error))
    }

    /// Returns a failure of `error`'s own [`kind`](Classify::kind), whose
    /// message is `error` and its sources: for a classified error of a
    /// crate this one cannot depend on (the MCP server's, the console's).
    pub fn classified<E: Classify + StdError>(error: &E) -> Self {
        Failure::new(error.kind(), chain(error))
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // One line, whatever the message holds.
        let lines = self
            .message
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty());
        f.write_str(&lines.collect::<Vec<_>>().join(" "))
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

/// The kind of a failure over unreadable files, and what the doctor does
/// for them: it leaves files this version does not know in place
/// (`all_unsupported`), and quarantines corrupt ones.
fn doctor_for(all_unsupported: bool) -> (ErrorKind, &'static str) {
    if all_unsupported {
        (ErrorKind::Unsupported, "`chipset doctor` names them")
    } else {
        (
            ErrorKind::Corrupt,
            "`chipset doctor --fix` moves the corrupt ones aside and names the rest",
        )
    }
}

/// Returns the error and its sources joined by `: `, skipping a source
/// the text already ends with (mail's backend error says its source's
/// message as its own).
pub fn chain(error: &dyn StdError) -> String {
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

/// Each chipset error becomes a [`Failure`] of its
/// [`kind`](Classify::kind).
macro_rules! from_classified {
    ($($error:ty),* $(,)?) => {$(
        impl From<$error> for Failure {
            fn from(e: $error) -> Self {
                Failure::classified(&e)
            }
        }
    )*};
}

from_classified!(
    chipset::Error,
    chipset_store::Error,
    chipset_hook::Error,
    chipset_nudge::Error,
    chipset_mail::Error,
    chipset_bus::Error,
    chipset_loop::Error,
    chipset_lease::Error,
    chipset::search::Error,
    chipset::directory::Error,
    chipset::pool::Error,
);

#[cfg(test)]
mod tests {
    use super::*;

    /// A clear whose outcome is unknown says how to finish it, and the
    /// same clear naming the generation then finds the work off the hook.
    #[test]
    fn an_unknown_clear_says_how_to_finish_it() {
        let tmp = tempfile::tempdir().unwrap();
        let hooks = chipset_hook::Hooks::new(chipset_store::StateDir::open(tmp.path()).unwrap());
        let agent = AgentId::new("a1").unwrap();
        let held = hooks
            .assign(&agent, "b0".parse().unwrap(), "T", None)
            .unwrap();
        let unknown = Failure::new(ErrorKind::OutcomeUnknown, "the outcome is unknown");
        assert_eq!(
            unknown.finish_clear("clear", &held).to_string(),
            "the outcome is unknown; to finish the clear, run it again with \
             `--bead b0 --generation 1`"
        );
        let long = Failure::refused("x".repeat(5000)).finish_clear("clear", &held);
        assert_eq!(long.to_string(), format!("{}…", "x".repeat(2000)), "cut");
        let done = |g| Failure::cleared_already(&hooks, &agent, g).unwrap();
        assert!(done(Some(1)).is_none(), "the work is still on the hook");
        hooks.reassign(&held).unwrap();
        assert_eq!(done(Some(1)).map(|h| h.generation), Some(2));
        for g in [None, Some(0), Some(2)] {
            assert!(done(g).is_none(), "{g:?}");
        }
    }

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

    /// A listing's failure says what the doctor does for what it met:
    /// quarantines corrupt files, names the ones this version does not know.
    #[test]
    fn unreadable_files_are_corrupt_unless_all_unsupported() {
        use chipset_bus::Problem;
        use chipset_store::{CorruptReason, Corruption, Listing, Unsupported};
        let agent = AgentId::new("a").unwrap();
        let mut queue = BTreeMap::new();
        assert!(Failure::unreadable_queue(&agent, &queue).is_none());
        queue.insert(
            PathBuf::from("q/2-x.json"),
            Problem::Unsupported("bus event priority `urgent`".into()),
        );
        let e = Failure::unreadable_queue(&agent, &queue).unwrap();
        assert_eq!(e.kind(), ErrorKind::Unsupported);
        assert!(
            e.to_string().ends_with("`chipset doctor` names them"),
            "{e}"
        );
        queue.insert(PathBuf::from("q/1-x.json"), Problem::ForeignName);
        let e = Failure::unreadable_queue(&agent, &queue).unwrap();
        assert_eq!(e.kind(), ErrorKind::Corrupt);
        assert!(
            e.to_string()
                .starts_with("2 unreadable files in the queue of `a` (q/1-x.json: "),
            "{e}"
        );

        let mut listing: Listing<()> = Listing::default();
        assert!(Failure::unreadable(&listing, "reminder").is_none());
        listing
            .unsupported
            .push(Unsupported::new("r/a.json", "reminder severity `x`"));
        let e = Failure::unreadable(&listing, "reminder").unwrap();
        assert_eq!(e.kind(), ErrorKind::Unsupported);
        listing.corrupt.push(Corruption {
            path: "r/b.json".into(),
            reason: CorruptReason::NotARegularFile,
        });
        let e = Failure::unreadable(&listing, "reminder").unwrap();
        assert_eq!(e.kind(), ErrorKind::Corrupt);
        assert!(
            e.to_string()
                .starts_with("2 unreadable reminder files (`r/b.json` is corrupt"),
            "{e}"
        );
    }

    /// The class follows from the kind alone.
    #[test]
    fn the_class_follows_from_the_kind() {
        assert_eq!(Class::of(ErrorKind::Invalid), Class::Usage);
        assert_eq!(Class::of(ErrorKind::OutcomeUnknown), Class::OutcomeUnknown);
        for kind in [
            ErrorKind::NotFound,
            ErrorKind::Refused,
            ErrorKind::Stale,
            ErrorKind::Corrupt,
            ErrorKind::Unsupported,
            ErrorKind::Io,
        ] {
            assert_eq!(Class::of(kind), Class::Refused, "{kind:?}");
        }
    }

    /// A failure keeps the library error's kind, and a shell's refusal
    /// names its own, so an MCP client can act on it.
    #[test]
    fn a_failure_keeps_its_kind() {
        let missing = chipset_nudge::Error::ReminderNotFound { id: "x".into() };
        assert_eq!(Failure::from(missing).kind(), ErrorKind::NotFound);
        let agent = AgentId::new("a").unwrap();
        let corrupt = Corruption {
            path: "nudges/a/latest.json".into(),
            reason: chipset_store::CorruptReason::Unparsable("EOF".into()),
        };
        let unreadable = Failure::nudge_unreadable(&agent, &corrupt);
        assert_eq!(unreadable.kind(), ErrorKind::Corrupt);
        assert_eq!(unreadable.exit_status(), 1);
        assert_eq!(Failure::usage("bad").kind(), ErrorKind::Invalid);
        assert_eq!(
            Failure::hook_empty(&agent, "touch").kind(),
            ErrorKind::Refused
        );
    }

    /// The search index is a cache: its store's unknown outcome changed no
    /// channel, so it exits 1. A directory error wrapping the bus's unknown
    /// outcome is one, alone and through the door.
    #[test]
    fn a_wrapped_unknown_outcome_is_one_where_a_channel_changed() {
        let unknown = || chipset_store::Error::OutcomeUnknown {
            op: "sync directory",
            path: "/x/1.json".into(),
            source: std::io::Error::from_raw_os_error(5),
        };
        let search = chipset::search::Error::from(unknown());
        assert_eq!(search.kind(), ErrorKind::Io);
        assert_eq!(Failure::from(search).exit_status(), 1);
        let directory = || chipset::directory::Error::from(chipset_bus::Error::from(unknown()));
        assert!(directory().is_outcome_unknown());
        assert_eq!(Failure::from(directory()).exit_status(), 3);
        let door = chipset::Error::from(directory());
        assert_eq!(Failure::from(door).exit_status(), 3);
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
        let e = Failure::from(chipset_loop::Error::PartlyDone {
            op: "dispatcher tick",
            source: Box::new(refused()),
        });
        assert_eq!(e.exit_status(), OUTCOME_UNKNOWN, "{e}");
        // The reason, from the source chain, is said once.
        let said = "the dispatcher tick failed part way, after changing state";
        assert_eq!(e.to_string(), format!("{said}: {}", refused()));
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
        assert_eq!(e.to_string().matches("os error 5").count(), 1, "{e}");
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
