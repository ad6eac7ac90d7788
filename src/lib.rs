//! chipset: crash-safe coordination for AI agents through a shared directory.
//!
//! This facade re-exports each crate as a module; see their docs.

#![forbid(unsafe_code)]

pub use chipset_bus as bus;
pub use chipset_hook as hook;
pub use chipset_loop as r#loop;
pub use chipset_mail as mail;
pub use chipset_nudge as nudge;
pub use chipset_store as store;
