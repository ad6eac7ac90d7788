//! The examples keep the state directory they print: a path printed for
//! the reader to look at must still be there when the example exits.

#![allow(
    clippy::disallowed_methods,
    reason = "the test removes the directory an example kept, outside the store's API"
)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// The built example binaries sit in `target/<profile>/examples/`, beside
/// this test's `deps/` directory; `cargo test` builds them.
fn example(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let profile_dir = exe.parent().and_then(|deps| deps.parent()).unwrap();
    profile_dir.join("examples").join(name)
}

#[test]
fn examples_keep_the_state_directory_they_print() {
    // Regression: nubosloop and store_tour printed a temporary directory
    // that was deleted when they exited.
    for name in ["nubosloop", "store_tour"] {
        let out = Command::new(example(name)).output().unwrap();
        let stdout = String::from_utf8(out.stdout).unwrap();
        assert!(out.status.success(), "{name}: {stdout}");
        let printed = stdout
            .lines()
            .find_map(|l| l.strip_prefix("state directory: "))
            .unwrap_or_else(|| panic!("{name} prints no state directory: {stdout}"));
        let root = Path::new(printed);
        assert!(root.is_dir(), "{name} printed `{printed}`, which is gone");
        // Clean up what the example kept for its reader.
        std::fs::remove_dir_all(root.parent().unwrap()).unwrap();
    }
}
