//! Integration tests for chipset-store.

#![allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    reason = "tests plant, corrupt and inspect files as another program would, outside the store's API"
)]

mod batch_threads;
mod files;
mod ids;
mod log;
mod paths;
mod procs;
mod published;
mod quarantine;
mod seam;
mod seam_calls;
mod unnamed;
mod watch;

/// The names in `dir`, sorted.
pub(crate) fn names(dir: &std::path::Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    v.sort();
    v
}
