//! ARCHITECTURE.md's code map names every source file of every crate, in
//! that crate's section, so the map cannot drift from the code unnoticed:
//! a new, moved or renamed module fails this test until the map says what
//! it is (issue 13).
//!
//! A file counts as named when its section mentions `name.rs` or, in
//! backticks, `name` (how the map refers to modules such as `hook` or
//! `attention`). `lib.rs`, `main.rs` and `mod.rs` are the crate or folder
//! itself; a folder's other files are named like any other.

#![allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    reason = "the test reads the repository's own sources and docs, not a state root"
)]

use std::fs;
use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The text of the code map's section for `crates/{krate}`.
fn section<'a>(map: &'a str, krate: &str) -> &'a str {
    let head = format!("### `crates/{krate}`");
    let start = map
        .find(&head)
        .unwrap_or_else(|| panic!("ARCHITECTURE.md has no section `{head}`"));
    let rest = &map[start + head.len()..];
    let end = rest
        .find("\n## ")
        .into_iter()
        .chain(rest.find("\n### "))
        .min();
    &rest[..end.unwrap_or(rest.len())]
}

#[test]
fn the_code_map_names_every_source_file() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let map = fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let mut crates: Vec<_> = fs::read_dir(root.join("crates"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    crates.sort();
    assert!(crates.len() >= 10, "found only {crates:?}");
    let mut missing = Vec::new();
    let mut checked = 0;
    for krate in &crates {
        let text = section(&map, krate);
        let mut files = Vec::new();
        rust_files(&root.join("crates").join(krate).join("src"), &mut files);
        for file in files {
            let name = file.file_name().unwrap().to_str().unwrap();
            if matches!(name, "lib.rs" | "main.rs" | "mod.rs") {
                continue;
            }
            checked += 1;
            let stem = name.trim_end_matches(".rs");
            if !text.contains(name) && !text.contains(&format!("`{stem}`")) {
                missing.push(file.strip_prefix(root).unwrap().display().to_string());
            }
        }
    }
    assert!(checked > 50, "checked only {checked} files");
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md's code map does not name these files in their crate's section: {missing:#?}"
    );
}

/// The `name.rs` words of `text`.
fn file_words(text: &str) -> Vec<&str> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
        .map(|w| w.trim_end_matches('.'))
        .filter(|w| w.len() > 3 && w.ends_with(".rs"))
        .collect()
}

#[test]
fn every_file_the_code_map_names_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let map = fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let mut stale = Vec::new();
    let mut checked = 0;
    for entry in fs::read_dir(root.join("crates")).unwrap() {
        let krate = entry.unwrap().file_name().into_string().unwrap();
        let mut files = Vec::new();
        rust_files(&root.join("crates").join(&krate).join("src"), &mut files);
        let names: Vec<_> = files
            .iter()
            .map(|f| f.file_name().unwrap().to_str().unwrap().to_owned())
            .collect();
        for word in file_words(section(&map, &krate)) {
            checked += 1;
            if !names.iter().any(|n| n == word) {
                stale.push(format!("crates/{krate}: {word}"));
            }
        }
    }
    assert!(checked > 50, "checked only {checked} names");
    assert!(
        stale.is_empty(),
        "ARCHITECTURE.md's code map names files its crate does not have: {stale:#?}"
    );
}

#[test]
fn a_section_ends_at_the_next_heading() {
    let map = "### `crates/a` (x)\nfoo.rs\n### `crates/b`\nbar.rs\n## Cross\nbaz.rs";
    assert!(section(map, "a").contains("foo.rs"));
    assert!(!section(map, "a").contains("bar.rs"));
    assert!(section(map, "b").contains("bar.rs"));
    assert!(!section(map, "b").contains("baz.rs"));
    assert_eq!(
        file_words("`judge.rs` is (`tests.rs`: x) lib.rs."),
        ["judge.rs", "tests.rs", "lib.rs"]
    );
}

/// Issue 27: a map a newcomer reads in one sitting. Figures and logs
/// belong in `docs/results/`, not here.
#[test]
fn the_map_stays_under_twenty_thousand_characters() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let map = fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let chars = map.chars().count();
    assert!(chars <= 20_000, "ARCHITECTURE.md has {chars} characters");
}

/// The facade's docs hold every re-exported crate's pages: a newcomer's
/// `cargo doc --no-deps -p chipset` documents no other crate, and a
/// re-export that is not inlined is a bare `pub use` line there, its
/// modules' links dead text.
#[test]
fn the_facade_inlines_every_crate_it_re_exports() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lib = fs::read_to_string(root.join("src/lib.rs")).unwrap();
    let lines: Vec<&str> = lib.lines().map(str::trim).collect();
    let mut re_exports = 0;
    for (i, line) in lines.iter().enumerate() {
        if line.starts_with("pub use chipset_") && line.contains(" as ") {
            re_exports += 1;
            assert_eq!(
                i.checked_sub(1).map(|p| lines[p]),
                Some("#[doc(inline)]"),
                "src/lib.rs: `{line}` is not inlined"
            );
        }
    }
    assert!(re_exports >= 11, "found only {re_exports} re-exports");
}
