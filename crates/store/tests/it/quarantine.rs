//! Quarantine: a bad file moved aside or copied aside into
//! `.quarantine/` beside it, never deleted, and listed.

use std::fs;
use std::os::unix::fs::symlink;

use chipset_store::{Channel, Error};
use chipset_testkit::TempState;

/// A copy into quarantine keeps the file where it is, for a repair that
/// replaces it in one write; a second copy in the same millisecond gets
/// the next suffix, and anything but a regular file is moved instead.
#[test]
fn quarantine_copy_keeps_the_file_and_copies_its_bytes() {
    let t = TempState::new();
    let dir = t.state.channel_dir(Channel::new("pool")).unwrap();
    let path = dir.join_static("table.json");
    fs::write(&path, "{torn").unwrap();
    let cap = t.state.read_cap();
    let first = t.state.quarantine_copy(&path, cap).unwrap();
    let second = t.state.quarantine_copy(&path, cap).unwrap();
    assert_eq!(fs::read_to_string(&path).unwrap(), "{torn", "left in place");
    assert_eq!(first.parent().unwrap(), dir.as_path().join(".quarantine"));
    assert!(
        first.to_str().unwrap().ends_with("-table.json"),
        "{first:?}"
    );
    assert_ne!(first, second);
    for copy in [&first, &second] {
        assert_eq!(fs::read_to_string(copy).unwrap(), "{torn");
    }
    assert!(matches!(
        t.state
            .quarantine_copy(&dir.join_static("missing.json"), cap),
        Err(Error::NotFound { .. })
    ));
    let outside = t.scratch("target");
    fs::write(&outside, "elsewhere").unwrap();
    let link = dir.join_static("link.json");
    symlink(&outside, &link).unwrap();
    let moved = t.state.quarantine_copy(&link, cap).unwrap();
    assert!(fs::symlink_metadata(&link).is_err(), "a symlink is moved");
    assert!(
        fs::symlink_metadata(&moved)
            .unwrap()
            .file_type()
            .is_symlink()
    );
}

/// A file over the store's read cap but within the caller's (a pool table
/// may be 32 MiB) is copied, not moved: moved, a failure before the
/// repair's write would leave the path empty. Over the caller's cap it is
/// moved, as garbage no reader of the caller's takes.
#[test]
fn quarantine_copy_copies_up_to_the_callers_cap() {
    let t = TempState::new();
    let dir = t.state.channel_dir(Channel::new("pool")).unwrap();
    let path = dir.join_static("table.json");
    let big = usize::try_from(t.state.read_cap()).unwrap() + 1;
    let bytes = vec![b'{'; big];
    fs::write(&path, &bytes).unwrap();
    let cap = t.state.read_cap() * 2;
    let copy = t.state.quarantine_copy(&path, cap).unwrap();
    assert_eq!(fs::read(&path).unwrap(), bytes, "left in place");
    assert_eq!(fs::read(&copy).unwrap(), bytes, "copied whole");
    let moved = t.state.quarantine_copy(&path, cap / 4).unwrap();
    assert!(fs::symlink_metadata(&path).is_err(), "over the cap: moved");
    assert_eq!(fs::read(&moved).unwrap(), bytes);
}

#[test]
fn quarantine_moves_aside_and_deletes_nothing() {
    let t = TempState::new();
    let dir = t.state.channel_dir(Channel::new("hooks")).unwrap();
    let path = dir.join_static("bad.json");
    fs::write(&path, "not json").unwrap();
    let first = t.state.quarantine(&path).unwrap();
    assert!(!path.exists());
    assert_eq!(first.parent().unwrap(), dir.as_path().join(".quarantine"));
    assert!(
        first
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .ends_with("-bad.json")
    );
    assert_eq!(fs::read_to_string(&first).unwrap(), "not json");

    // A second bad file of the same name in the same millisecond keeps both.
    fs::write(&path, "also bad").unwrap();
    let second = t.state.quarantine(&path).unwrap();
    assert_ne!(first, second);
    assert_eq!(fs::read_to_string(&second).unwrap(), "also bad");
    assert_eq!(fs::read_to_string(&first).unwrap(), "not json");

    // Listings do not show the quarantine folder.
    assert!(t.state.list(&dir).unwrap().is_empty());
    assert!(matches!(
        t.state.quarantine(&path),
        Err(Error::NotFound { .. })
    ));

    // A symlink can be quarantined too (moved, not followed).
    let outside = t.scratch("target");
    fs::write(&outside, "keep").unwrap();
    symlink(&outside, &path).unwrap();
    let moved = t.state.quarantine(&path).unwrap();
    assert!(
        fs::symlink_metadata(&moved)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(fs::read_to_string(&outside).unwrap(), "keep");
}

/// What `quarantine` moved aside is visible through `list_quarantine`,
/// though no `StatePath` can name the folder; a `.quarantine` that is not a
/// directory is an error there, never "nothing quarantined".
#[test]
fn the_quarantine_folder_is_listed_without_a_state_path_to_it() {
    let t = TempState::new();
    let inbox = t.state.channel_dir(Channel::new("mail")).unwrap();
    assert!(!t.state.has_quarantine(&inbox).unwrap());
    assert_eq!(t.state.list_quarantine(&inbox).unwrap(), None);
    let bad = inbox.join_static("bad.json");
    t.state.write_bytes(&bad, b"{").unwrap();
    let moved = t.state.quarantine(&bad).unwrap();
    assert!(t.state.has_quarantine(&inbox).unwrap());
    assert_eq!(t.state.list_quarantine(&inbox).unwrap(), Some(vec![moved]));
    let other = t.state.channel_dir(Channel::new("bus")).unwrap();
    fs::write(other.as_path().join(".quarantine"), "not a folder").unwrap();
    assert!(t.state.has_quarantine(&other).unwrap());
    assert!(matches!(
        t.state.list_quarantine(&other),
        Err(Error::NotADirectory { .. })
    ));
}
