//! Real processes: eight agents draining a pool of 1,000 items, and SIGKILL
//! while an agent claims, releases and finishes items; on both backends
//! (`fs::*`, `pg::*`).

use std::collections::{BTreeMap, HashMap};

use std::path::Path;
use std::process::Child;
use std::thread;
use std::time::Duration;

use chipset_hook::{HookStatus, Hooks};
use chipset_pool::{ItemId, NewItem, Pool, ReadyFilter, WorkState};
use chipset_store::{AgentId, ReadOutcome, StateDir, StateOptions};
use chipset_testkit::{self as kit, TempState};

use crate::place::{Place, pool_of, root_of_spec};

const ENTRY: &str = "procs::child_entry";

/// Marks a child's own lines, apart from what the test harness prints.
const MARK: &str = "pool> ";

fn own_lines(child: &mut Child) -> impl Iterator<Item = String> + use<> {
    kit::own_lines(child, MARK)
}

/// An agent: claims until the pool is empty, completing each item on its
/// hook before the next claim (which records it done).
fn role_drain(pool: &Pool, hooks: &Hooks, me: &AgentId, out: &mut dyn FnMut(String)) {
    while let Some(c) = pool.claim_next(me, &ReadyFilter::new()).unwrap() {
        assert!(!c.existing, "a fresh claim each time");
        out(format!("claimed {}", c.entry.id));
        hooks.activate(&c.assignment).unwrap();
        hooks.complete(&c.assignment).unwrap();
    }
}

/// Claims, releases, finishes and completes items (until killed), posting
/// more when the pool runs dry.
fn role_churn(pool: &Pool, hooks: &Hooks, me: &AgentId, steps: u64, out: &mut dyn FnMut(String)) {
    out("churning".into());
    for n in 0..steps {
        let Some(c) = pool.claim_next(me, &ReadyFilter::new()).unwrap() else {
            let id = ItemId::new(format!("more-{n}-{}", std::process::id())).unwrap();
            pool.post(me, &NewItem::new("more").with_id(id)).unwrap();
            continue;
        };
        match n % 3 {
            0 => {
                pool.release(me, &c.entry.id, "churn").unwrap();
            }
            1 => {
                pool.done(me, &c.entry.id).unwrap();
            }
            _ => {
                let _ = hooks.activate(&c.assignment);
                let _ = hooks.complete(&c.assignment);
            }
        }
    }
}

#[test]
fn child_entry() {
    if let Some(role) = kit::child_role() {
        let state = open(root_of_spec(role.arg(0)), role.name == "drain");
        let (pool, hooks) = pool_of(role.arg(0), &state);
        let me = AgentId::new(role.arg(1)).unwrap();
        let mut out = |line: String| kit::say(MARK, &line);
        match role.name.as_str() {
            "drain" => {
                out("ready".into());
                kit::wait_for_file(Path::new(role.arg(2)));
                role_drain(&pool, &hooks, &me, &mut out);
                out("empty".into());
            }
            "churn" => role_churn(&pool, &hooks, &me, u64::MAX, &mut out),
            other => panic!("unknown role {other}"),
        }
        return;
    }
    // Not a child: run the roles in-process on tiny inputs.
    let t = TempState::new();
    let (pool, hooks) = Place::fs().open(&t.state);
    post(&pool, 3);
    let mut lines = Vec::new();
    role_drain(&pool, &hooks, &kit::agent("a"), &mut |l| lines.push(l));
    assert_eq!(lines, ["claimed i0", "claimed i1", "claimed i2"]);
    lines.clear();
    role_churn(&pool, &hooks, &kit::agent("c"), 6, &mut |l| lines.push(l));
    assert_eq!(lines, ["churning"]);
}

fn post(pool: &Pool, count: usize) {
    let items: Vec<NewItem> = (0..count)
        .map(|n| NewItem::new(format!("item {n}")).with_id(ItemId::new(format!("i{n}")).unwrap()))
        .collect();
    pool.post_many(&kit::agent("lead"), &items).unwrap();
}

/// Opens the state root; the drain race skips syncs: it tests the locks
/// (exactly-once claims), not durability, and eight processes waiting on
/// a thousand fsyncs each would only make it slow. The SIGKILL test syncs.
fn open(root: &str, no_sync: bool) -> StateDir {
    let options = if no_sync {
        StateOptions {
            io: kit::NoSyncIo::shared(),
            ..StateOptions::default()
        }
    } else {
        StateOptions::default()
    };
    StateDir::open_with(root, options).unwrap()
}

/// Every hook's item, and how many hooks hold each.
fn on_hooks(hooks: &Hooks) -> HashMap<String, usize> {
    let mut count = HashMap::new();
    for read in hooks.list().unwrap().into_values() {
        match read {
            ReadOutcome::Value(h) => {
                if let Some(w) = h.state.work() {
                    *count.entry(w.bead_id.to_string()).or_default() += 1;
                }
            }
            ReadOutcome::Missing => {}
            other => panic!("unreadable hook: {other:?}"),
        }
    }
    count
}

fn eight_agents_drain_a_thousand_items_each_claimed_exactly_once(place: &Place) {
    let t = TempState::with_options(StateOptions {
        io: kit::NoSyncIo::shared(),
        ..StateOptions::default()
    });
    let (pool, hooks) = place.open(&t.state);
    post(&pool, 1000);
    let go = t.scratch("go");
    let started = std::time::Instant::now();
    let mut children: Vec<Child> = (0..8)
        .map(|i| {
            let args = [
                place.spec(t.state.root()),
                format!("agent-{i}"),
                go.to_str().unwrap().into(),
            ];
            kit::spawn(ENTRY, "drain", &args)
        })
        .collect();
    let mut outputs: Vec<_> = children.iter_mut().map(own_lines).collect();
    for out in &mut outputs {
        assert_eq!(out.next().as_deref(), Some("ready"));
    }
    std::fs::write(&go, "").unwrap();
    let readers: Vec<_> = outputs
        .into_iter()
        .map(|out| thread::spawn(move || out.collect::<Vec<String>>()))
        .collect();
    for child in &mut children {
        kit::wait_ok(child, Duration::from_secs(600));
    }
    let mut claims: BTreeMap<String, usize> = BTreeMap::new();
    let mut busy = 0;
    for reader in readers {
        let lines = reader.join().unwrap();
        assert_eq!(lines.last().map(String::as_str), Some("empty"));
        let mine = lines
            .iter()
            .filter_map(|l| l.strip_prefix("claimed "))
            .count();
        busy += usize::from(mine > 0);
        for id in lines.iter().filter_map(|l| l.strip_prefix("claimed ")) {
            *claims.entry(id.to_owned()).or_default() += 1;
        }
    }
    report_rate(place, claims.values().sum(), started.elapsed());
    assert_eq!(claims.len(), 1000, "every item claimed");
    assert!(claims.values().all(|n| *n == 1), "none claimed twice");
    assert!(busy > 1, "the agents shared the work");
    // Each agent's last claim found nothing ready: it recorded its own
    // item done and left it on its hook, completed. Every item is done.
    let list = pool.list().unwrap();
    assert_eq!(list.len(), 1000);
    assert!(
        list.iter().all(|l| l.entry.done.is_some()),
        "all recorded done"
    );
    for read in hooks.list().unwrap().into_values() {
        let ReadOutcome::Value(h) = read else {
            continue;
        };
        let status = h.state.status();
        assert!(
            matches!(status, HookStatus::Empty | HookStatus::Completed),
            "a hook holds work {status:?}"
        );
    }
}

/// Says how fast the agents claimed (each claim also activates and
/// completes the item on the hook): the race's figure for each backend.
fn report_rate(place: &Place, claims: usize, took: Duration) {
    let backend = if place.is_pg() {
        "postgres"
    } else {
        "directory"
    };
    #[allow(clippy::print_stderr, reason = "the race's figure, for the notes")]
    {
        eprintln!(
            "pool drain on {backend}: {claims} claims by 8 processes in {:.2} s, {:.0} claim cycles/s",
            took.as_secs_f64(),
            claims as f64 / took.as_secs_f64()
        );
    }
}

fn sigkill_at_any_point_leaves_every_item_readable_and_on_at_most_one_hook(place: &Place) {
    let t = TempState::new();
    let (pool, hooks) = place.open(&t.state);
    post(&pool, 40);
    let mut jitter = kit::Jitter::new(kit::Jitter::seed_from_time());
    for round in 0..6 {
        let args = [place.spec(t.state.root()), "churner".to_owned()];
        let mut child = kit::spawn(ENTRY, "churn", &args);
        let mut lines = own_lines(&mut child);
        assert_eq!(lines.next().as_deref(), Some("churning"));
        thread::sleep(Duration::from_millis(5 + jitter.below(60)));
        kit::kill9(&mut child);
        let list = pool.list().unwrap_or_else(|e| panic!("round {round}: {e}"));
        for l in &list {
            pool.item(&l.entry.id)
                .unwrap_or_else(|e| panic!("round {round}: {e}"));
        }
        let held = on_hooks(&hooks);
        assert!(held.values().all(|n| *n == 1), "round {round}: {held:?}");
        let claimed = list
            .iter()
            .filter(|l| matches!(l.state, WorkState::Claimed { .. }))
            .count();
        assert!(
            claimed <= 1,
            "round {round}: one agent holds at most one item"
        );
        if place.is_pg() {
            // A server has no log: each change is a swap of one row.
            continue;
        }
        // Claims, releases and dones fold the log too: it stays under a
        // quarter of the items (at least 16), a torn last line included.
        let log =
            std::fs::read_to_string(t.state.root().join("pool/log.jsonl")).unwrap_or_default();
        let bound = (list.len() / 4).max(16);
        assert!(
            log.lines().count() <= bound,
            "round {round}: {} log lines over {bound}",
            log.lines().count()
        );
    }
    // The pool converges: the dead agent's item is returned as a witness
    // would, and another agent drains the rest.
    if let Some(held) = hooks.current(&kit::agent("churner")).unwrap() {
        pool.return_stalled(&held, &kit::agent("witness"), "killed")
            .unwrap();
    }
    let after = kit::agent("after");
    while let Some(c) = pool.claim_next(&after, &ReadyFilter::new()).unwrap() {
        pool.done(&after, &c.entry.id).unwrap();
    }
    let list = pool.list().unwrap();
    assert!(
        list.iter()
            .all(|l| matches!(l.state, WorkState::Done { .. }))
    );
}

chipset_backend::both!(
    crate::place::Place;
    eight_agents_drain_a_thousand_items_each_claimed_exactly_once,
    sigkill_at_any_point_leaves_every_item_readable_and_on_at_most_one_hook,
);
