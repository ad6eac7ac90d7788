//! Test doubles for the I/O seam ([`IoBackend`](crate::IoBackend)), behind
//! the `testing` feature.
//!
//! - [`FaultIo`] fails the Nth call (optionally of given kinds) with a chosen
//!   errno, once or from then on (a disk that stays full).
//! - [`RecordIo`] performs every call for real and records it, then yields
//!   the states a power cut could have left ([`RecordIo::crash_states`]),
//!   following the ordering rules in the crate docs' Durability section.
//!
//! They live in the store, behind a feature, rather than in
//! `chipset-testkit`, so that they move with the trait they implement and
//! every crate's tests (which already depend on the store) can enable them
//! with one feature flag.

mod fault;
mod record;

pub use fault::{EIO, ENOSPC, Fault, FaultIo};
pub use record::{CrashState, Entry, RecordIo};
