//! The console's tests: each view drawn from a fixed state and clock
//! (insta snapshots), the keys, the dashboard over HTTP and in a
//! browser, and bad input.

#![allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    reason = "tests remove the state root and drive the binary as another program would"
)]

mod browser;
mod peers;
mod serve;
mod server;
mod team;
mod views;
