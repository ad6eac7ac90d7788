//! Hook benchmarks, each beside a hand-written baseline of the same syscalls
//! in the same run:
//!
//! - `transition/*`: one hook transition (lock, read, check, durable replace)
//!   against a raw lock + durable replace (open the lock file, flock, create
//!   a temp, write, fsync, rename, fsync the directory). Goal: ≤ 1.2×.
//! - `scan/*`: listing 1,000 hooks and finding the stale ones, against a raw
//!   read-and-parse of every file in the directory.

#![allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    reason = "a bench times the store against plain std::fs and builds its fixtures with it"
)]

use std::fs::{self, File, OpenOptions};
use std::hint::black_box;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chipset_hook::BeadId;
use chipset_hook::{HookStatus, Hooks};
use chipset_store::{AgentId, ManualClock, StateDir, StateOptions, Timestamp};
use criterion::{Criterion, criterion_group, criterion_main};

const T0: i64 = 1_772_706_600_000;

fn open(dir: &Path) -> (Hooks, ManualClock) {
    let clock = ManualClock::new(Timestamp::from_unix_ms(T0));
    let state = StateDir::open_with(
        dir,
        StateOptions {
            clock: Arc::new(clock.clone()),
            ..StateOptions::default()
        },
    )
    .unwrap();
    (Hooks::new(state), clock)
}

/// The baseline: lock + durable replace with std only.
struct Raw {
    dir: std::path::PathBuf,
    n: u64,
}

impl Raw {
    fn replace(&mut self, bytes: &[u8]) {
        let lock = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(self.dir.join(".raw.json.lock"))
            .unwrap();
        lock.lock().unwrap();
        self.n += 1;
        let tmp = self.dir.join(format!(".raw.json.{}.tmp", self.n));
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
            .unwrap();
        f.write_all(bytes).unwrap();
        f.sync_all().unwrap();
        fs::rename(&tmp, self.dir.join("raw.json")).unwrap();
        File::open(&self.dir).unwrap().sync_all().unwrap();
        drop(lock);
    }
}

fn transitions(c: &mut Criterion) {
    let tmp = tempfile::tempdir().unwrap();
    let (hooks, clock) = open(&tmp.path().join("state"));
    let agent = AgentId::new("polecat-alpha").unwrap();
    let mayor = AgentId::new("mayor").unwrap();
    let bead = BeadId::new("gt-abc12").unwrap();
    let tick = || clock.advance(Duration::from_millis(1));

    let raw_dir = tmp.path().join("raw");
    fs::create_dir_all(&raw_dir).unwrap();
    let mut raw = Raw { dir: raw_dir, n: 0 };
    // A hook file's worth of bytes.
    let held = hooks
        .assign(&agent, bead.clone(), "Add README section", Some(&mayor))
        .unwrap();
    let bytes = fs::read(hooks.path(&agent)).unwrap();

    let mut g = c.benchmark_group("transition");
    g.bench_function("raw_lock_replace", |b| b.iter(|| raw.replace(&bytes)));
    hooks.activate(&held).unwrap();
    g.bench_function("touch", |b| {
        b.iter(|| {
            tick();
            hooks.touch(&held).unwrap()
        })
    });
    hooks.complete(&held).unwrap();
    hooks.clear(&held).unwrap();
    g.bench_function("raw_lock_replace_x4", |b| {
        b.iter(|| {
            for _ in 0..4 {
                raw.replace(&bytes);
            }
        })
    });
    g.bench_function("assign_activate_complete_clear", |b| {
        b.iter(|| {
            tick();
            let held = hooks
                .assign(&agent, bead.clone(), "Add README section", Some(&mayor))
                .unwrap();
            tick();
            hooks.activate(&held).unwrap();
            tick();
            hooks.complete(&held).unwrap();
            tick();
            hooks.clear(&held).unwrap()
        })
    });
    g.finish();
}

fn scans(c: &mut Criterion) {
    let tmp = tempfile::tempdir().unwrap();
    let (hooks, clock) = open(&tmp.path().join("state"));
    let mayor = AgentId::new("mayor").unwrap();
    for i in 0..1000 {
        let agent = AgentId::new(format!("agent-{i:04}")).unwrap();
        clock.advance(Duration::from_secs(1));
        let held = hooks
            .assign(
                &agent,
                BeadId::new(format!("gt-{i}")).unwrap(),
                "work",
                Some(&mayor),
            )
            .unwrap();
        match i % 4 {
            0 => {}
            1 => drop(hooks.activate(&held).unwrap()),
            2 => {
                hooks.activate(&held).unwrap();
                hooks.complete(&held).unwrap();
            }
            _ => {
                hooks.activate(&held).unwrap();
                hooks.complete(&held).unwrap();
                hooks.clear(&held).unwrap();
            }
        }
    }
    let listed = hooks.list().unwrap();
    let count = |status| {
        listed
            .values()
            .filter(|read| HookStatus::of(read) == Some(status))
            .count()
    };
    assert_eq!(
        count(HookStatus::Pending) + count(HookStatus::Active),
        500,
        "half of the 1000 pending or active"
    );
    assert_eq!(count(HookStatus::Empty), 250);

    let mut g = c.benchmark_group("scan");
    g.bench_function("raw_read_parse_1000", |b| {
        b.iter(|| {
            let mut n = 0;
            for entry in fs::read_dir(hooks.dir()).unwrap() {
                let entry = entry.unwrap();
                if entry.file_name().to_string_lossy().starts_with('.') {
                    continue;
                }
                let v: serde_json::Value =
                    serde_json::from_slice(&fs::read(entry.path()).unwrap()).unwrap();
                n += usize::from(v["status"] == "active");
            }
            black_box(n)
        })
    });
    g.bench_function("list_1000", |b| b.iter(|| hooks.list().unwrap()));
    g.finish();
}

/// Disk syncs on a shared machine vary by several times from one second to
/// the next, so a ratio taken from two separate criterion runs is noisy. This
/// alternates a touch and a raw lock + replace 300 times (adjacent pairs see
/// the same disk weather) and prints the medians and the median pair ratio.
/// `HOOK_BENCH_DIR` picks the filesystem (for example `/dev/shm` to see the
/// cost without syncs).
fn interleaved(_c: &mut Criterion) {
    let base_dir = std::env::var_os("HOOK_BENCH_DIR").map_or_else(std::env::temp_dir, Into::into);
    let tmp = tempfile::tempdir_in(base_dir).unwrap();
    let (hooks, clock) = open(&tmp.path().join("state"));
    let agent = AgentId::new("polecat-alpha").unwrap();
    let held = hooks
        .assign(
            &agent,
            BeadId::new("gt-abc12").unwrap(),
            "Add README section",
            None,
        )
        .unwrap();
    hooks.activate(&held).unwrap();
    let bytes = fs::read(hooks.path(&agent)).unwrap();
    let raw_dir = tmp.path().join("raw");
    fs::create_dir_all(&raw_dir).unwrap();
    let mut raw = Raw { dir: raw_dir, n: 0 };
    let mut pairs = Vec::new();
    for i in 0..300 {
        let hook = || {
            clock.advance(Duration::from_millis(1));
            let t = Instant::now();
            hooks.touch(&held).unwrap();
            t.elapsed()
        };
        let mut base = || {
            let t = Instant::now();
            raw.replace(&bytes);
            t.elapsed()
        };
        pairs.push(if i % 2 == 0 {
            (hook(), base())
        } else {
            let b = base();
            (hook(), b)
        });
    }
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let ours = median(pairs.iter().map(|p| p.0.as_secs_f64() * 1e6).collect());
    let theirs = median(pairs.iter().map(|p| p.1.as_secs_f64() * 1e6).collect());
    let ratio = median(
        pairs
            .iter()
            .map(|p| p.0.as_secs_f64() / p.1.as_secs_f64())
            .collect(),
    );
    #[allow(clippy::print_stdout, reason = "a benchmark reports its figures")]
    {
        println!(
            "interleaved: touch median {ours:.0} us, raw lock+replace median {theirs:.0} us, \
             median pair ratio {ratio:.2}"
        );
    }
}

criterion_group!(benches, interleaved, transitions, scans);
criterion_main!(benches);
