//! The store watcher: notifications, targets that appear later, and the
//! rescan that catches what notifications miss.

use std::fs;
use std::thread;
use std::time::Duration;

use chipset_store::{Channel, WatchConfig, WatchTarget, WatchWake, Watcher};
use chipset_testkit::TempState;
use serde_json::json;

/// Long enough that a test never passes by a rescan it did not ask for.
const LONG: Duration = Duration::from_secs(600);
/// A wait that ends only if something is reported.
const PATIENT: Duration = Duration::from_secs(30);

fn notified() -> WatchConfig {
    WatchConfig {
        notify: true,
        rescan_interval: LONG,
    }
}

/// Waits until the watcher reports a change at `path` (a rescan is not
/// enough: the point is that notifications saw it).
fn changed_at(w: &mut Watcher, path: &std::path::Path) -> bool {
    for _ in 0..100 {
        match w.wait(PATIENT) {
            WatchWake::Changed(paths) if paths.iter().any(|p| p == path) => return true,
            WatchWake::Changed(_) => continue,
            WatchWake::Rescan | WatchWake::TimedOut => return false,
        }
    }
    false
}

#[test]
fn a_file_target_reports_its_own_changes_only() {
    let tmp = TempState::new();
    let hooks = tmp.state.channel_dir(Channel::new("hooks")).unwrap();
    let mine = hooks.join_static("alpha.json");
    let other = hooks.join_static("beta.json");
    let mut w = Watcher::new(&tmp.state, [WatchTarget::File(mine.clone())], notified()).unwrap();
    assert!(w.is_notified());
    tmp.state.write_json(&other, &json!({"x": 1})).unwrap();
    tmp.state.write_json(&mine, &json!({"x": 1})).unwrap();
    match w.wait(PATIENT) {
        WatchWake::Changed(paths) => assert!(paths.iter().all(|p| *p == mine), "{paths:?}"),
        other => panic!("expected a change, got {other:?}"),
    }
}

#[test]
fn nothing_changed_times_out() {
    let tmp = TempState::new();
    let dir = tmp.state.channel_dir(Channel::new("bus")).unwrap();
    let mut w = Watcher::new(&tmp.state, [WatchTarget::Dir(dir.clone())], notified()).unwrap();
    assert_eq!(w.wait(Duration::from_millis(30)), WatchWake::TimedOut);
}

#[test]
fn a_target_that_appears_later_is_watched_through_its_ancestor() {
    let tmp = TempState::new();
    let inbox = tmp.at("mail/inbox/alpha");
    let mut w = Watcher::new(&tmp.state, [WatchTarget::Dir(inbox.clone())], notified()).unwrap();
    // Watching created nothing.
    assert!(!tmp.state.root().join("mail").exists());
    let msg = inbox.join_static("m1.json");
    let writer = {
        let state = tmp.state.clone();
        let msg = msg.clone();
        thread::spawn(move || state.write_json(&msg, &json!({"m": 1})).unwrap())
    };
    // Each wake-up is a hint to look: look until the message is seen.
    let mut seen = false;
    for _ in 0..100 {
        let wake = w.wait(PATIENT);
        assert_ne!(wake, WatchWake::TimedOut);
        if msg.exists() {
            seen = true;
            break;
        }
    }
    writer.join().unwrap();
    assert!(seen);
    // From now on the inbox itself is watched.
    let msg2 = inbox.join_static("m2.json");
    tmp.state.write_json(&msg2, &json!({"m": 2})).unwrap();
    assert!(changed_at(&mut w, &msg2));
}

#[test]
fn a_tree_target_sees_new_subdirectories() {
    let tmp = TempState::new();
    let open = tmp.at("reminders/open");
    tmp.state.ensure_dir(&open).unwrap();
    let mut w = Watcher::new(&tmp.state, [WatchTarget::Tree(open.clone())], notified()).unwrap();
    let file = tmp.at("reminders/open/wrap_session/session/s1.json");
    tmp.state.write_json(&file, &json!({"r": 1})).unwrap();
    let mut seen = false;
    for _ in 0..100 {
        if let WatchWake::Changed(paths) = w.wait(PATIENT) {
            assert!(paths.iter().all(|p| p.starts_with(&open)));
            if file.exists() {
                seen = true;
                break;
            }
        }
    }
    assert!(seen);
}

/// A watcher without notifications (a watch that could not be set up)
/// still wakes: by the rescan.
#[test]
fn without_notifications_the_rescan_wakes() {
    let tmp = TempState::new();
    let dir = tmp.state.channel_dir(Channel::new("nudge")).unwrap();
    let config = WatchConfig {
        notify: false,
        rescan_interval: Duration::from_millis(20),
    };
    let mut w = Watcher::new(&tmp.state, [WatchTarget::Dir(dir.clone())], config).unwrap();
    assert!(!w.is_notified());
    tmp.state
        .write_json(&dir.join_static("x.json"), &json!({}))
        .unwrap();
    assert_eq!(w.wait(PATIENT), WatchWake::Rescan);
}

/// A watched directory removed and made again: the old watch died with
/// the old directory; the watcher watches the new one.
#[test]
fn a_directory_made_again_is_watched_again() {
    let tmp = TempState::new();
    let queue = tmp.at("bus/alpha/queue");
    tmp.state.ensure_dir(&queue).unwrap();
    let mut w = Watcher::new(&tmp.state, [WatchTarget::Dir(queue.clone())], notified()).unwrap();
    fs::remove_dir(&queue).unwrap();
    // The removal is reported (the target's directory went away).
    assert_ne!(w.wait(PATIENT), WatchWake::TimedOut);
    tmp.state.ensure_dir(&queue).unwrap();
    // Its making is reported too; from then on the new directory is watched.
    assert_ne!(w.wait(PATIENT), WatchWake::TimedOut);
    let event = queue.join_static("e1.json");
    tmp.state.write_json(&event, &json!({})).unwrap();
    assert!(changed_at(&mut w, &event));
}

/// A target outside the root cannot be named (a `WatchTarget` holds a
/// `StatePath`); one reached through a symlinked directory is refused.
#[test]
fn targets_through_a_symlink_are_refused() {
    let tmp = TempState::new();
    let elsewhere = tmp.scratch("elsewhere");
    fs::create_dir(&elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, tmp.state.root().join("mail")).unwrap();
    let inbox = tmp.at("mail/inbox");
    let err = Watcher::new(&tmp.state, [WatchTarget::Dir(inbox.clone())], notified()).unwrap_err();
    assert!(matches!(err, chipset_store::Error::Symlink { .. }), "{err}");
}

/// A tree target whose directory is also watched for another target (as
/// the way to a file not there yet, or as a file target's own directory)
/// stays recursive, whichever target comes first: a file in a subdirectory
/// made after the watcher is reported.
#[test]
fn a_tree_shared_with_another_target_stays_recursive() {
    for file_first in [true, false] {
        let tmp = TempState::new();
        let open = tmp.at("reminders/open");
        tmp.state.ensure_dir(&open).unwrap();
        let (file, tree) = if file_first {
            // Its directory is not there: watched through `open`.
            (
                tmp.at("reminders/open/later/y.json"),
                WatchTarget::Tree(open.clone()),
            )
        } else {
            (
                tmp.at("reminders/open/y.json"),
                WatchTarget::Tree(open.clone()),
            )
        };
        let targets = if file_first {
            [WatchTarget::File(file.clone()), tree]
        } else {
            [tree, WatchTarget::File(file.clone())]
        };
        let mut w = Watcher::new(&tmp.state, targets, notified()).unwrap();
        let sub = tmp.at("reminders/open/new");
        tmp.state.ensure_dir(&sub).unwrap();
        let deep = sub.join_static("z.json");
        // The new subdirectory's own watch is placed just after it is
        // reported: write again until the file itself is reported.
        let mut seen = false;
        for n in 0..50 {
            tmp.state.write_json(&deep, &json!({ "n": n })).unwrap();
            if reported_within(&mut w, &deep, Duration::from_millis(500)) {
                seen = true;
                break;
            }
        }
        assert!(seen, "file_first: {file_first}");
    }
}

/// Whether `path` is reported before a wait of `pause` passes with nothing.
fn reported_within(w: &mut Watcher, path: &std::path::Path, pause: Duration) -> bool {
    for _ in 0..100 {
        match w.wait(pause) {
            WatchWake::Changed(paths) if paths.iter().any(|p| p == path) => return true,
            WatchWake::Changed(_) => continue,
            WatchWake::Rescan | WatchWake::TimedOut => return false,
        }
    }
    false
}
