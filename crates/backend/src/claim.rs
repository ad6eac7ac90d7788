//! The claim: take the first free row of a set, with the writes that claim
//! it, in one step (issue 30). On PostgreSQL `SELECT … FOR UPDATE SKIP
//! LOCKED` and the writes in one transaction; on a directory (the
//! trait's default) the set's lock and the writes in order.

use chipset_store::Timestamp;

use crate::error::{Error, Result};
use crate::key::{Dir, Key};
use crate::seam::{Backend, Created, Version, Versioned};

/// What to claim from: the rows of `dir` named in `candidates`, tried in
/// that order (the caller's priority order), and the lock that stands in
/// for row locks where a backend has none.
#[derive(Debug, Clone, Copy)]
pub struct Claim<'a> {
    /// The key whose lock serializes claims on a directory (the pool's
    /// `pool/table.json`, whose `.table.json.lock` every pool change
    /// takes). PostgreSQL locks the candidate rows instead, so claimers
    /// never wait on one another.
    pub lock: &'a Key,
    /// The folder that holds the candidates (`pool/items`).
    pub dir: &'a Dir,
    /// The names of the rows to try, most wanted first. A name that holds
    /// no value is skipped.
    pub candidates: &'a [String],
}

/// One write of a claim: a create (`expected` `None`: the key must hold
/// nothing) or a compare-and-swap replace at `expected`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimWrite {
    /// The key written (a hook).
    pub key: Key,
    /// The version it must still be at; `None` when it must be empty.
    pub expected: Option<Version>,
    /// The new value.
    pub value: Vec<u8>,
}

/// What a claim took.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Claimed {
    /// The candidate claimed.
    pub name: String,
    /// The version each write made, in order.
    pub versions: Vec<Version>,
}

/// The state as a claim's decision sees it: on PostgreSQL inside the
/// claim's transaction (each read sees every commit made before it, and
/// the candidate's row is locked), on a directory under the claim's lock.
pub trait ClaimView {
    /// Reads `key` (see [`Backend::read`]).
    ///
    /// # Errors
    ///
    /// As [`Backend::read`].
    fn read(&mut self, key: &Key) -> Result<Option<Versioned>>;

    /// Lists `dir` (see [`Backend::list`]).
    ///
    /// # Errors
    ///
    /// As [`Backend::list`].
    fn list(&mut self, dir: &Dir) -> Result<Vec<String>>;

    /// Returns the time on the backend's clock (see [`Backend::now`]).
    ///
    /// # Errors
    ///
    /// As [`Backend::now`].
    fn now(&mut self) -> Result<Timestamp>;
}

/// A claim's decision: given the view and a candidate (locked), the writes
/// that claim it, or `None` to try the next candidate.
pub type Decide<'a> = dyn FnMut(&mut dyn ClaimView, &str) -> Result<Option<Vec<ClaimWrite>>> + 'a;

/// The view under the claim's lock: the backend's plain reads.
struct LockedView<'a, B: ?Sized>(&'a B);

impl<B: Backend + ?Sized> ClaimView for LockedView<'_, B> {
    fn read(&mut self, key: &Key) -> Result<Option<Versioned>> {
        self.0.read(key)
    }

    fn list(&mut self, dir: &Dir) -> Result<Vec<String>> {
        self.0.list(dir)
    }

    fn now(&mut self) -> Result<Timestamp> {
        self.0.now()
    }
}

/// The claim under a lock, the trait's default and the directory's
/// claim: under the lock of `claim.lock`, each candidate that holds a
/// value is offered to `decide`; the first it accepts is claimed by its
/// writes, made in order with the seam's create and replace (on a
/// directory each a durable publish or swap). The lock is the one every
/// other change of the set takes, so no other claim or change interleaves.
/// A crash between two writes leaves the first: a claim whose decision
/// reads its own earlier writes (the pool's: a hook holding the item) is
/// finished or recognised by the retry.
pub(crate) fn locked_claim<B: Backend + ?Sized>(
    backend: &B,
    claim: &Claim<'_>,
    decide: &mut Decide<'_>,
) -> Result<Option<Claimed>> {
    let _guard = backend.lock(claim.lock)?;
    for name in claim.candidates {
        let row = claim.dir.key(name)?;
        if backend.read(&row)?.is_none() {
            continue;
        }
        let Some(writes) = decide(&mut LockedView(backend), name)? else {
            continue;
        };
        let mut versions = Vec::with_capacity(writes.len());
        for w in &writes {
            versions.push(match w.expected {
                None => match backend.create(&w.key, &w.value)? {
                    Created::New(v) => v,
                    Created::Existing(now) => {
                        return Err(Error::Conflict {
                            key: w.key.to_string(),
                            current: Some(now),
                        });
                    }
                },
                Some(v) => backend.replace(&w.key, v, &w.value)?,
            });
        }
        return Ok(Some(Claimed {
            name: name.clone(),
            versions,
        }));
    }
    Ok(None)
}
