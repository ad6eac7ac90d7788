//! chipset facade.
pub use chipset_store as store;
