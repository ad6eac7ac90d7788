//! The doctor's memory: counted by a global allocator that keeps a live
//! and a peak figure per thread, so that the tests running beside it on
//! other threads do not count. Timing-free: it counts bytes, not time.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use chipset_mail::{Mail, MailConfig};
use chipset_store::{DoctorMode, StateDir};

use crate::manifest_bytes;

/// The system allocator, counting the bytes each thread holds.
struct Counting;

thread_local! {
    // Const-initialised and without a destructor: reading them allocates
    // nothing, which an allocator's own bookkeeping must not.
    static LIVE: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

fn count(delta: isize) {
    let _ = LIVE.try_with(|live| {
        let now = live.get() + delta;
        live.set(now);
        let _ = PEAK.try_with(|peak| peak.set(peak.get().max(now)));
    });
}

fn size(n: usize) -> isize {
    isize::try_from(n).unwrap_or(isize::MAX)
}

// SAFETY: every call goes straight to `System` with the caller's arguments;
// the counting beside it only touches this thread's two cells.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract is `System`'s.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            count(size(layout.size()));
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as `alloc`.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            count(size(layout.size()));
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as `alloc`.
        unsafe { System.dealloc(ptr, layout) };
        count(-size(layout.size()));
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as `alloc`.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            count(size(new_size) - size(layout.size()));
        }
        p
    }
}

#[global_allocator]
static COUNTING: Counting = Counting;

/// Runs `f` and returns its result and the most heap this thread held
/// during it beyond what it held before.
fn peak_during<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let start = LIVE.with(Cell::get);
    PEAK.with(|p| p.set(start));
    let out = f();
    let peak = PEAK.with(Cell::get);
    (out, usize::try_from(peak - start).unwrap_or(0))
}

const MESSAGES: usize = 2_000;
const BODY: usize = 4 * 1024;

/// Plants `MESSAGES` notifies of `BODY` bytes each in four inboxes, with
/// no manifest: every message is a `messaging-missing-sent-event` that
/// the fix reconciles from the message itself.
fn no_manifest(root: &std::path::Path) -> Mail {
    let inbox = root.join("mail/inbox");
    let body = "b".repeat(BODY);
    for n in 0..MESSAGES {
        let id = format!("{}-{n:08x}-0000-4000-8000-{n:012x}", 1_772_706_900_000 + n);
        let to = format!("agent-{}", n % 4);
        std::fs::create_dir_all(inbox.join(&to)).unwrap();
        let message = serde_json::json!({
            "body": body,
            "created_at": "2026-03-05T10:35:00.123Z",
            "expects_reply": false,
            "from": "critic",
            "id": id,
            "in_reply_to": null,
            "kind": "notify",
            "phase": "t",
            "priority": "normal",
            "round": 1,
            "subject": "s",
            "to": to,
        });
        std::fs::write(
            inbox.join(&to).join(format!("{id}.json")),
            message.to_string(),
        )
        .unwrap();
    }
    Mail::with_config(StateDir::open(root).unwrap(), MailConfig::default())
}

/// Regression (issue 31, part 5): `doctor --fix` on a lost manifest read
/// every message without a `sent` event whole and held them all, with
/// their events and one buffer of every line, before appending; at
/// 100,000 messages that was 136 MB. Now it holds under half of the
/// messages' bodies at its peak (it reads each again, one at a time, and
/// appends a chunk at a time), and the check before it does too.
#[test]
fn the_doctor_never_holds_every_message_body() {
    let tmp = tempfile::tempdir().unwrap();
    let mail = no_manifest(tmp.path());
    let bodies = MESSAGES * BODY;
    let mut found = 0;
    let (report, check) = peak_during(|| {
        mail.doctor_to(DoctorMode::Check, &mut |_| found += 1)
            .unwrap()
    });
    assert_eq!((report.scanned, found), (MESSAGES, MESSAGES));
    assert!(
        check < bodies / 2,
        "the check held {check} bytes at its peak, over half of the {bodies} bytes of bodies"
    );

    let mut fixed = 0;
    let (report, fix) = peak_during(|| {
        mail.doctor_to(DoctorMode::Fix, &mut |f| fixed += usize::from(f.is_fixed()))
            .unwrap()
    });
    assert_eq!((report.scanned, fixed), (MESSAGES, MESSAGES));
    assert!(
        fix < bodies / 2,
        "the fix held {fix} bytes at its peak, over half of the {bodies} bytes of bodies"
    );
    // Every event was appended, and the next check is clean.
    let manifest = String::from_utf8(manifest_bytes(&mail)).unwrap();
    assert_eq!(manifest.lines().count(), MESSAGES);
    assert!(mail.doctor(DoctorMode::Check).unwrap().is_clean());
}
