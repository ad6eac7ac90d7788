//! Integration tests for chipset-store.

mod canonical;
mod files;
mod ids;
mod procs;
mod watch;
