//! The storage seam under chipset's channels (issue 30).
//!
//! Every channel (hook, nudge, mail, bus, the loops, pool, leases) needs
//! the same few operations on its state: a versioned read,
//! create-if-absent, compare-and-swap replace, durable append, ordered
//! listing, a lock, a clock and a wake-up. [`Backend`] is that set, with
//! two implementations: [`FsBackend`] on a directory (chipset-store's
//! files, byte for byte) and `PgBackend` on PostgreSQL (feature
//! `postgres`).
//!
//! ```
//! use chipset_backend::{Backend, Created, Dir, FsBackend};
//!
//! let tmp = tempfile::tempdir()?;
//! let backend = FsBackend::open(tmp.path())?;
//! let key = Dir::new("hooks")?.key("alice.json")?;
//! let Created::New(v1) = backend.create(&key, b"{\"status\": \"empty\"}\n")? else {
//!     unreachable!()
//! };
//! let v2 = backend.replace(&key, v1, b"{\"status\": \"pending\"}\n")?;
//! // A stale version is refused: nothing is lost.
//! assert!(backend.replace(&key, v1, b"{}\n").is_err());
//! assert_eq!(backend.read(&key)?.unwrap().version, v2);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Names
//!
//! A [`Dir`] is a channel and its folders, a [`Key`] one value or log in
//! a dir; every segment is checked as a file name. On a directory a key is
//! the file `{root}/{dir}/{name}`; on PostgreSQL the row `(dir, name)`.
//! Names reach the server only as parameters, never in SQL text.
//!
//! # Guarantees
//!
//! Both backends keep the same contract, which the conformance suite
//! (`tests/it/conformance.rs`) checks from one set of test bodies:
//!
//! - of racing creators of one key exactly one wins;
//! - a replace or remove against a stale [`Version`] changes nothing;
//! - appends are whole, in order, and batches never interleave;
//! - listings are in byte order;
//! - a lock excludes every other holder, in any process, and dies with
//!   its holder;
//! - a change returns only once durable (synced, or committed);
//! - [`Error::OutcomeUnknown`] means "maybe committed": the retry with
//!   the same key and value answers as the first attempt did.
//!
//! # Choosing the client
//!
//! `PgBackend` uses the blocking `postgres` crate, sfackler's synchronous
//! wrapper of `tokio-postgres`: the workspace's API is synchronous (each
//! channel's I/O layer is a locked read-decide-write on the caller's
//! thread), and this client keeps its runtime inside, so no caller needs
//! one. `sqlx` would bring an async-only API, a larger tree and
//! compile-time query checking against a live database that CI would need
//! while building.

#![forbid(unsafe_code)]

mod claim;
mod error;
mod fs;
mod key;
#[cfg(feature = "postgres")]
mod pg;
mod seam;
#[cfg(feature = "testing")]
pub mod testing;
mod txn;
#[cfg(feature = "tokio")]
mod wait_async;

pub use claim::{Claim, ClaimView, ClaimWrite, Claimed, Decide};
pub use error::{Error, Result, Source};
pub use fs::FsBackend;
pub use key::{Dir, Key, MAX_SEGMENT};
#[cfg(feature = "postgres")]
pub use pg::{PgBackend, PgOptions, SCHEMA_VERSION};
pub use seam::{
    Backend, Created, LockGuard, LogPos, LogRead, MAX_VALUE, Version, Versioned, Wait, Wake,
};
pub use txn::Step;
#[cfg(feature = "tokio")]
pub use wait_async::AsyncWait;
