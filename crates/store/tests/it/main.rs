//! Integration tests for chipset-store.

#![allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    reason = "tests plant, corrupt and inspect files as another program would, outside the store's API"
)]

mod files;
mod ids;
mod log;
mod paths;
mod procs;
mod published;
mod seam;
mod seam_calls;
mod watch;
