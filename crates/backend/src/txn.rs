//! Several changes as one ([`Backend::transact`]) and a folder's values in
//! one read ([`Backend::read_all`]): what a channel needs when one of its
//! operations is more than one write (mail's send: the message, its reply
//! index entry, the archive of the request it answers, its manifest
//! events).
//!
//! The defaults here are the directory's: the steps in order, each with
//! the single operation's guarantees. PostgreSQL overrides both (one
//! transaction, one statement).

use crate::error::{Error, Result};
use crate::key::{Dir, Key};
use crate::seam::{Backend, Created, Version, Versioned, canonical_record, check_size};

/// One change of a [`Backend::transact`]. Each step means what the single
/// operation of its name means, except that a create of a key that holds a
/// value is a failure ([`Error::Exists`]), not [`Created::Existing`].
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub enum Step<'a> {
    /// Creates `key` holding `value`; fails with [`Error::Exists`] when it
    /// holds something.
    Create {
        /// The key.
        key: &'a Key,
        /// The value.
        value: &'a [u8],
    },
    /// Replaces `key`'s value if it is still at `expected`
    /// ([`Backend::replace`]).
    Replace {
        /// The key.
        key: &'a Key,
        /// The version read.
        expected: Version,
        /// The new value.
        value: &'a [u8],
    },
    /// Removes `key` if it is still at `expected`; a key holding nothing
    /// is no failure ([`Backend::remove`]).
    Remove {
        /// The key.
        key: &'a Key,
        /// The version read.
        expected: Version,
    },
    /// Moves `from`, still at `expected`, to the empty `to`
    /// ([`Backend::move_new`]).
    MoveNew {
        /// The source.
        from: &'a Key,
        /// The source's version read.
        expected: Version,
        /// The destination, which must hold nothing.
        to: &'a Key,
    },
    /// Appends `records` to the log `log` ([`Backend::append`]).
    Append {
        /// The log.
        log: &'a Key,
        /// The records, each one JSON value.
        records: &'a [&'a [u8]],
    },
}

/// The directory's [`Backend::transact`]: every value and record checked
/// first (bad input writes nothing), then the steps in order, stopping at
/// the first failure (the steps before it stay done). A failure of a later
/// step other than its refusal ([`Error::Conflict`], [`Error::Exists`],
/// [`Error::NotFound`], which its caller orders its steps for) comes after
/// the earlier steps changed something: it is [`Error::OutcomeUnknown`],
/// never a plain failure that changed nothing.
pub(crate) fn in_order<B: Backend + ?Sized>(
    backend: &B,
    steps: &[Step<'_>],
) -> Result<Vec<Option<Version>>> {
    for step in steps {
        match *step {
            Step::Create { key, value } | Step::Replace { key, value, .. } => {
                check_size(key, value.len())?;
            }
            Step::Append { log, records } => {
                for record in records {
                    canonical_record(log, record)?;
                }
            }
            Step::Remove { .. } | Step::MoveNew { .. } => {}
        }
    }
    let mut out = Vec::with_capacity(steps.len());
    for step in steps {
        let done = apply(backend, step).map_err(|e| match e {
            Error::Conflict { .. }
            | Error::Exists { .. }
            | Error::NotFound { .. }
            | Error::OutcomeUnknown { .. } => e,
            other if out.is_empty() => other,
            other => Error::OutcomeUnknown {
                op: "apply a transaction's later step to",
                key: step_key(step).to_string(),
                source: Box::new(other),
            },
        })?;
        out.push(done);
    }
    Ok(out)
}

/// The key a step changes (a move's source).
fn step_key<'a>(step: &Step<'a>) -> &'a Key {
    match *step {
        Step::Create { key, .. } | Step::Replace { key, .. } | Step::Remove { key, .. } => key,
        Step::MoveNew { from, .. } => from,
        Step::Append { log, .. } => log,
    }
}

/// One step of [`in_order`], as its single operation.
fn apply<B: Backend + ?Sized>(backend: &B, step: &Step<'_>) -> Result<Option<Version>> {
    Ok(match *step {
        Step::Create { key, value } => match backend.create(key, value)? {
            Created::New(v) => Some(v),
            Created::Existing(now) => {
                return Err(Error::Exists {
                    key: key.to_string(),
                    current: Some(now),
                });
            }
        },
        Step::Replace {
            key,
            expected,
            value,
        } => Some(backend.replace(key, expected, value)?),
        Step::Remove { key, expected } => {
            backend.remove(key, expected)?;
            None
        }
        Step::MoveNew { from, expected, to } => Some(backend.move_new(from, expected, to)?),
        Step::Append { log, records } => {
            backend.append(log, records)?;
            None
        }
    })
}

/// The directory's [`Backend::read_all`]: a listing, then each value (one
/// removed in between is left out).
pub(crate) fn one_by_one<B: Backend + ?Sized>(
    backend: &B,
    dir: &Dir,
) -> Result<Vec<(String, Versioned)>> {
    let mut out = Vec::new();
    for name in backend.list(dir)? {
        let key = dir.key(&name)?;
        if let Some(v) = backend.read(&key)? {
            out.push((name, v));
        }
    }
    Ok(out)
}
