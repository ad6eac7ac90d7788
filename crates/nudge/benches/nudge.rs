//! chipset-nudge operations beside hand-written raw baselines of the same syscalls.
//!
//! Compare within a group. Goals: a send at most 1.15x a raw durable replace
//! and a read at most 1.15x a raw read; listing open reminders with 100,000
//! resolved ones in the history at most 1.1x listing them with none.

#![allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    reason = "a bench times the store against plain std::fs and builds its fixtures with it"
)]

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use chipset_nudge::{
    KindRegistry, NewNudge, NewReminder, Nudge, NudgeType, Nudges, Reminder, ReminderFilter,
    ReminderId, Reminders, Resolution, Severity,
};
use chipset_store::{AgentId, StateDir, Timestamp};
use criterion::{Criterion, criterion_group, criterion_main};

static N: AtomicU64 = AtomicU64::new(0);

/// Raw durable replace: exclusive temp, write, fsync, rename, fsync directory.
fn raw_replace(dir: &Path, target: &Path, bytes: &[u8]) {
    let tmp = dir.join(format!(".raw.{}.tmp", N.fetch_add(1, Ordering::Relaxed)));
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .unwrap();
    f.write_all(bytes).unwrap();
    f.sync_all().unwrap();
    fs::rename(&tmp, target).unwrap();
    File::open(dir).unwrap().sync_all().unwrap();
}

/// `O_NOFOLLOW` on Linux.
fn libc_nofollow() -> i32 {
    0o400000
}

/// Raw read: read the file and parse it as a nudge.
fn raw_read(path: &Path) -> Nudge {
    serde_json::from_slice(&fs::read(path).unwrap()).unwrap()
}

/// Times `n` runs of `timed`, each followed by an untimed run of `other`.
fn paired(n: u64, timed: &dyn Fn(), other: &dyn Fn()) -> Duration {
    let mut total = Duration::ZERO;
    for _ in 0..n {
        let start = Instant::now();
        timed();
        total += start.elapsed();
        other();
    }
    total
}

fn agent(name: &str) -> AgentId {
    AgentId::new(name).unwrap()
}

fn draft() -> NewNudge {
    NewNudge::new(
        agent("witness-d3e4f"),
        NudgeType::HealthCheck,
        "You have hooked work (gt-abc12). Are you working on it?",
    )
    .requiring_response()
}

fn signals(c: &mut Criterion) {
    let tmp = tempfile::tempdir().unwrap();
    let state = StateDir::open(tmp.path().join("state")).unwrap();
    let nudges = Nudges::new(state.clone());
    let polecat = agent("polecat-alpha");
    let sent = nudges.send(&polecat, &draft()).unwrap();
    let bytes = chipset_store::StateDir::to_canonical_json(sent.nudge()).unwrap();
    let dir = nudges.agent_dir(&polecat);
    let raw_target = dir.as_path().join("raw.json");
    raw_replace(&dir, &raw_target, &bytes);

    let mut g = c.benchmark_group("nudge_send");
    g.bench_function("raw_replace", |b| {
        b.iter(|| raw_replace(&dir, &raw_target, &bytes))
    });
    g.bench_function("send", |b| {
        b.iter(|| nudges.send(&polecat, &draft()).unwrap())
    });
    // The disk is shared and noisy: here each timed operation alternates with
    // an untimed one of the other kind, so both see the same background.
    let raw = || raw_replace(&dir, &raw_target, &bytes);
    let send = || {
        let _ = nudges.send(&polecat, &draft()).unwrap();
    };
    g.bench_function("raw_replace_paired", |b| {
        b.iter_custom(|n| paired(n, &raw, &send))
    });
    g.bench_function("send_paired", |b| b.iter_custom(|n| paired(n, &send, &raw)));
    g.finish();

    // The agent has processed the latest nudge, so a poll reads both files.
    let current = nudges.read_latest(&polecat).unwrap().value().unwrap();
    nudges.mark_processed(&polecat, &current).unwrap();
    let agent_dir = nudges.agent_dir(&polecat).into_path_buf();
    let latest = agent_dir.join("latest.json");
    let processed = agent_dir.join("processed.json");
    let mut g = c.benchmark_group("nudge_read");
    g.bench_function("raw_read", |b| b.iter(|| raw_read(&latest)));
    // The same plus what the store adds for principle 4 (no symlinks inside
    // the root): an lstat of each directory below the root, and O_NOFOLLOW.
    let root = state.root().to_owned();
    g.bench_function("raw_read_symlink_checked", |b| {
        b.iter(|| {
            let mut dir = root.clone();
            for part in ["nudge", "polecat-alpha"] {
                dir.push(part);
                assert!(!fs::symlink_metadata(&dir).unwrap().file_type().is_symlink());
            }
            let mut f = OpenOptions::new()
                .read(true)
                .custom_flags(libc_nofollow())
                .open(&latest)
                .unwrap();
            let mut buf = Vec::new();
            f.read_to_end(&mut buf).unwrap();
            serde_json::from_slice::<Nudge>(&buf).unwrap()
        })
    });
    g.bench_function("raw_read_two", |b| {
        b.iter(|| {
            let n = raw_read(&latest);
            let r: serde_json::Value =
                serde_json::from_slice(&fs::read(&processed).unwrap()).unwrap();
            r["last"]["id"].as_str() == n.id.as_ref().map(|id| id.as_str())
        })
    });
    g.bench_function("read_latest", |b| {
        b.iter(|| nudges.read_latest(&polecat).unwrap())
    });
    g.bench_function("receive", |b| b.iter(|| nudges.receive(&polecat).unwrap()));
    // As for sends: microsecond reads drift with caches and CPU frequency, so
    // the goal is judged on alternating pairs.
    let raw = || {
        std::hint::black_box(raw_read(&latest));
    };
    let read = || {
        let _ = std::hint::black_box(nudges.read_latest(&polecat).unwrap());
    };
    g.bench_function("raw_read_paired", |b| {
        b.iter_custom(|n| paired(n, &raw, &read))
    });
    g.bench_function("read_latest_paired", |b| {
        b.iter_custom(|n| paired(n, &read, &raw))
    });
    g.finish();
}

const OPEN: usize = 20;
const HISTORY: usize = 100_000;

/// A root with `OPEN` open reminders and `history` resolved ones. The
/// history is written with plain writes (no syncs): only listing is measured.
fn reminder_root(history: usize) -> (tempfile::TempDir, Reminders) {
    let tmp = tempfile::tempdir().unwrap();
    let state = StateDir::open(tmp.path().join("state")).unwrap();
    let reminders = Reminders::new(state.clone(), KindRegistry::preset());
    for i in 0..OPEN {
        reminders
            .open(&NewReminder {
                tenant_id: "tenant".into(),
                project_id: Some("project".into()),
                kind: "wrap_session".into(),
                source_type: "session".into(),
                source_id: format!("live-{i}"),
                message: "Wrap this session".into(),
                ..NewReminder::default()
            })
            .unwrap();
    }
    let dir: PathBuf = state.root().join("reminders").join("history");
    fs::create_dir_all(&dir).unwrap();
    for i in 0..history {
        let id = ReminderId::new(format!(
            "{:013}-00000000-0000-4000-8000-{i:012}",
            1_700_000_000_000u64 + i as u64
        ))
        .unwrap();
        let at = Timestamp::from_unix_ms(1_700_000_000_000 + i as i64);
        let r = Reminder {
            id: id.clone(),
            tenant_id: "tenant".into(),
            project_id: Some("project".into()),
            kind: "wrap_session".into(),
            source_type: "session".into(),
            source_id: format!("old-{i}"),
            message: "Wrap this session".into(),
            actions: vec!["wrap".into(), "ignore".into()],
            severity: Severity::Nudge,
            created_at: at,
            resolved_at: Some(at),
            resolved_by_verb: Some("prism_wrap".into()),
            resolution: Some(Resolution::AutoCleared),
            resolution_note: None,
            snooze_until: None,
            metadata: Default::default(),
            extra: Default::default(),
        };
        fs::write(
            dir.join(format!("{id}.json")),
            chipset_store::StateDir::to_canonical_json(&r).unwrap(),
        )
        .unwrap();
    }
    (tmp, reminders)
}

fn reminders(c: &mut Criterion) {
    let (_empty_tmp, empty) = reminder_root(0);
    let (_full_tmp, full) = reminder_root(HISTORY);
    let filter = ReminderFilter::default();
    assert_eq!(empty.list(&filter).unwrap().items.len(), OPEN);
    assert_eq!(full.list(&filter).unwrap().items.len(), OPEN);
    let mut g = c.benchmark_group("reminders_list_open");
    g.bench_function("no_history", |b| b.iter(|| empty.list(&filter).unwrap()));
    g.bench_function("history_100k", |b| b.iter(|| full.list(&filter).unwrap()));
    g.finish();
}

criterion_group!(benches, signals, reminders);
criterion_main!(benches);
