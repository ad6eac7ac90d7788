//! Path leases: an agent leases paths or globs of a project, exclusive or
//! shared, for a while, so that two agents do not edit the same files.
//!
//! ```
//! use std::time::Duration;
//! use chipset_lease::{Error, LeaseMode, LeaseRequest, Leases};
//! use chipset_store::{AgentId, StateDir};
//!
//! let tmp = tempfile::tempdir()?;
//! let leases = Leases::new(StateDir::open(tmp.path())?);
//! let (alice, bob) = (AgentId::new("alice")?, AgentId::new("bob")?);
//!
//! // Alice leases the auth module for an hour.
//! let req = LeaseRequest::new(alice.clone(), LeaseMode::Exclusive, ["src/auth/**"])
//!     .with_ttl(Duration::from_secs(3600))
//!     .with_reason("rewrite login");
//! let granted = leases.acquire(&req)?.lease;
//!
//! // Bob cannot lease a file inside it: he is told who holds it and until when.
//! let refused = leases.acquire(&LeaseRequest::new(bob.clone(), LeaseMode::Shared, ["src/auth/login.rs"]));
//! let Err(Error::Conflict { conflicts }) = refused else { panic!("expected a conflict") };
//! assert_eq!(conflicts[0].holder, alice);
//!
//! // The pre-commit check: Bob's commit of that file is refused, Alice's is not.
//! assert_eq!(leases.check(&bob, &["src/auth/login.rs"])?.len(), 1);
//! assert!(leases.check(&alice, &["src/auth/login.rs"])?.is_empty());
//!
//! // Renew and release check the fencing token.
//! leases.renew(&alice, granted.token, Duration::from_secs(600))?;
//! leases.release(&alice, granted.token)?;
//! assert!(leases.list()?.is_empty());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Leases
//!
//! A [`Lease`] names one or more [`LeasePath`]s relative to a project root,
//! a [`LeaseMode`], a holder agent, a reason and an expiry (TTL default
//! [`DEFAULT_TTL`], 30 minutes, within [`MIN_TTL`]..=[`MAX_TTL`]). Two
//! leases of different agents conflict when a path of one overlaps a path
//! of the other and at least one is exclusive; an agent's own leases never
//! conflict with each other. An expired lease never blocks.
//!
//! [`Leases::acquire`] grants a request or returns
//! [`Error::Conflict`] with **every** conflicting lease (holder,
//! paths, expiry) and changes nothing. A grant drops the expired leases
//! from the table.
//!
//! # Fencing
//!
//! Every grant carries a token from a counter stored in the table, so
//! tokens only increase, across processes and restarts. The token names
//! the lease: [`Leases::renew`] and [`Leases::release`] take it and check
//! the holder. A holder whose lease expired and was pruned by another grant
//! gets [`Error::Fenced`] from renew, and so cannot extend it over the
//! new holder; an expired lease no grant has pruned yet renews only when no
//! live lease conflicts with it. Any agent may [`Leases::force_release`] a
//! lease with a reason; its holder gets a mail (`notify`, subject
//! `lease-force-released`), which accumulates, unlike a latest-wins nudge.
//!
//! # Retries
//!
//! After any failure, an unknown outcome included, the same call again is
//! safe and applies once: an acquire returns the lease the first attempt
//! granted (same token, `existing`), a renew sets the expiry from its own
//! time, a release answers [`Released::AlreadyGone`], and a forced release
//! sends its notice (under an id the lease fixes, before the lease is
//! removed) at most once, whoever finishes it.
//!
//! # Paths and globs
//!
//! See [`LeasePath`]: normalised, relative, never escaping the root. Two
//! patterns are judged to overlap by an over-approximation
//! ([`LeasePath::overlaps`]): literal-prefix comparison up to the first
//! glob metacharacter, in both directions, with literal paths compared
//! component by component. It may refuse two leases that could not touch
//! the same file (`src/*.rs` and `src/auth/**`); it never lets two
//! overlapping ones through. The commit check ([`Leases::check`]) is exact:
//! concrete paths are matched with `globset`.
//!
//! # Bounds
//!
//! At most [`MAX_PATHS`] paths per lease, [`MAX_PATTERN_LEN`] bytes per
//! path, [`MAX_REASON`] bytes of reason; the whole table must fit the
//! state's read cap ([`Error::TableFull`]). Bad input is a typed
//! error and writes nothing.
//!
//! # File layout and durability
//!
//! One file, `leases/table.json` (canonical JSON: `format`, `next_token`,
//! `leases` with `token`, `holder`, `mode`, `paths`, `reason`,
//! `acquired_at`, `renewed_at`, `expires_at`), changed only by a
//! compare-and-swap on the storage seam (`chipset_backend::Backend`): read
//! the table and its version, decide, then create it or replace it at that
//! version, deciding again when another writer came first. On a directory
//! the replace is the store's: a kernel lock on `leases/.table.json.lock`
//! (the lock [`StateDir::update`](chipset_store::StateDir::update) takes),
//! then a durable replace. A process killed at any point leaves the old
//! table or the new one, whole. A corrupt table is an error for every
//! operation, [`Leases::check`] included: it never reads as "nothing
//! leased". [`Leases::doctor`] reports it and, to fix, moves it into
//! `leases/.quarantine/` and restarts the token counter above any token
//! granted before.
//!
//! # On a server
//!
//! [`Leases::with_backend`] puts the table on another backend: on
//! PostgreSQL (issue 30) it is one row, swapped at its version, so grants
//! stay linearizable and tokens monotonic across hosts, and every time a
//! lease is judged by (grant, renewal, expiry, [`Leases::check`]) is the
//! server's clock, not each host's; a forced release's mail goes to the
//! server too (`chipset_mail::Mail::with_backend`). The doctor checks the
//! table's row there, and a fix moves a corrupt one aside into
//! `leases/quarantine/`.

#![forbid(unsafe_code)]

mod error;
mod format;
mod pattern;
mod store;
mod transition;

use std::time::Duration;

pub use error::{Error, Result};
pub use format::{Lease, LeaseMode, TABLE_FORMAT};
pub use pattern::{LeasePath, MAX_PATTERN_LEN};
pub use store::Leases;
pub use transition::{Acquired, Blocked, LeaseRequest, Released};

impl Leases {
    /// The lease channel's directory under the state root: `leases/`.
    pub const CHANNEL: chipset_store::Channel = chipset_store::Channel::new("leases");
}

/// The TTL of a lease whose request names none: 30 minutes.
pub const DEFAULT_TTL: Duration = Duration::from_secs(30 * 60);
/// The shortest TTL accepted: 1 second.
pub const MIN_TTL: Duration = Duration::from_secs(1);
/// The longest TTL accepted: 7 days.
pub const MAX_TTL: Duration = Duration::from_secs(7 * 24 * 3600);
/// The most paths one lease may name.
pub const MAX_PATHS: usize = 256;
/// The longest reason accepted, in bytes.
pub const MAX_REASON: usize = 1024;
