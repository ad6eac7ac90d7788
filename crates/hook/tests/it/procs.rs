//! Real processes: eight dispatchers racing for one hook, an agent touching
//! while the dispatcher takes its work away, and SIGKILL mid-transition.
//! The races run on a directory and, when `CHIPSET_TEST_PG` names a server,
//! on PostgreSQL (issue 30) from the same bodies.

use std::fs;
use std::path::Path;
use std::process::Child;
use std::thread;
use std::time::Duration;

use chipset_hook::{Error, HookStatus, Hooks, Pickup};
use chipset_store::DoctorMode;
use chipset_store::ReadOutcome;
use chipset_store::{AgentId, Classify, ErrorKind};
use chipset_testkit::{self as kit, Jitter, TempState};

use crate::ReadExt;
use crate::place::{Place, hooks_of};
use crate::{agent, bead};

const ENTRY: &str = "procs::child_entry";

/// Marks a child's own lines, apart from what the test harness prints.
const MARK: &str = "hook> ";

fn print(line: &str) {
    kit::say(MARK, line);
}

/// Returns a child's own lines, without the mark.
fn own_lines(child: &mut Child) -> impl Iterator<Item = String> + use<> {
    kit::own_lines(child, MARK)
}

/// A dispatcher: assigns `bead` to `agent` and says whether it won.
fn role_assign(hooks: &Hooks, agent: &AgentId, bead_name: &str, out: &mut dyn FnMut(String)) {
    let me = AgentId::new(format!("dispatcher-{bead_name}")).unwrap();
    match hooks.assign(agent, bead(bead_name), "race", Some(&me)) {
        Ok(held) => out(format!("won {bead_name} {}", held.generation)),
        Err(e) => match e {
            Error::AlreadyAssigned {
                status, bead_id, ..
            } => {
                out(format!("refused {status} {bead_id}"));
            }
            _ => panic!("unexpected error: {e}"),
        },
    }
}

/// An agent: picks its work up, then touches it until the touch is refused
/// as stale (or `max` touches).
fn role_toucher(hooks: &Hooks, agent: &AgentId, max: u64, out: &mut dyn FnMut(String)) {
    let Pickup::Started(held) = hooks.pickup(agent).unwrap() else {
        panic!("no pending work to start");
    };
    out("started".into());
    for n in 0..max {
        match hooks.touch(&held) {
            Ok(hook) => assert_eq!(hook.state.status(), HookStatus::Active),
            Err(e) if e.kind() == ErrorKind::Stale => return out(format!("stale {n}")),
            Err(e) => panic!("unexpected error: {e}"),
        }
        if n == 0 {
            out("touching".into());
        }
    }
    out(format!("done {max}"));
}

/// Both sides in one process: drives the hook round its whole lifecycle
/// (with some reassignments), printing the generation after each change.
fn role_cycler(hooks: &Hooks, agent: &AgentId, steps: u64, out: &mut dyn FnMut(String)) {
    let mayor = AgentId::new("mayor").unwrap();
    for n in 0..steps {
        let hook = match hooks.read(agent).unwrap() {
            ReadOutcome::Value(h) => h,
            ReadOutcome::Missing => chipset_hook::Hook::missing(agent.clone()),
            ReadOutcome::Corrupt(c) => panic!("corrupt hook: {c}"),
            ReadOutcome::Unsupported(u) => panic!("unsupported hook: {u}"),
        };
        let held = hook.assignment();
        let after = match (hook.state.status(), held) {
            (HookStatus::Empty, _) => {
                let title = "x".repeat(1 + (n as usize * 97) % crate::MAX_TITLE);
                let a = hooks
                    .assign(agent, bead(&format!("c{n}")), title, Some(&mayor))
                    .unwrap();
                a.generation
            }
            (HookStatus::Pending, Some(a)) if n % 7 == 0 => {
                hooks.reassign(&a).unwrap().hook.generation
            }
            (HookStatus::Pending, Some(_)) => match hooks.pickup(agent).unwrap() {
                Pickup::Started(a) => a.generation,
                other => panic!("pickup of pending work gave {other:?}"),
            },
            (HookStatus::Active, Some(a)) if n % 3 == 0 => hooks.complete(&a).unwrap().generation,
            (HookStatus::Active, Some(a)) => hooks.touch(&a).unwrap().generation,
            (HookStatus::Completed, Some(a)) => hooks.clear(&a).unwrap().generation,
            (status, None) => panic!("{status} hook without work"),
            (status, Some(_)) => panic!("a status this test does not know: {status}"),
        };
        out(format!("gen {after}"));
    }
}

#[test]
fn child_entry() {
    if let Some(role) = kit::child_role() {
        let hooks = hooks_of(role.arg(0));
        let agent = AgentId::new(role.arg(1)).unwrap();
        let mut out = |line: String| print(&line);
        match role.name.as_str() {
            "assign" => {
                out("ready".into());
                kit::wait_for_file(Path::new(role.arg(3)));
                role_assign(&hooks, &agent, role.arg(2), &mut out);
            }
            "toucher" => role_toucher(&hooks, &agent, role.parse(2), &mut out),
            "cycler" => role_cycler(&hooks, &agent, u64::MAX, &mut out),
            other => panic!("unknown role {other}"),
        }
        return;
    }
    // Not a child: run the roles in-process on tiny inputs.
    let t = TempState::new();
    let hooks = Hooks::new(t.state.clone());
    let a = agent("polecat");
    let mut lines = Vec::new();
    role_assign(&hooks, &a, "b1", &mut |l| lines.push(l));
    role_assign(&hooks, &a, "b2", &mut |l| lines.push(l));
    role_toucher(&hooks, &a, 2, &mut |l| lines.push(l));
    assert_eq!(
        lines,
        [
            "won b1 1",
            "refused pending b1",
            "started",
            "touching",
            "done 2"
        ]
    );
    let held = hooks.current(&a).unwrap().unwrap();
    hooks.reassign(&held).unwrap();
    hooks.assign(&a, bead("b3"), "t", None).unwrap();
    lines.clear();
    role_toucher(&hooks, &a, 1, &mut |l| lines.push(l));
    hooks
        .reassign(&hooks.current(&a).unwrap().unwrap())
        .unwrap();
    let Pickup::Idle = hooks.pickup(&a).unwrap() else {
        panic!("not idle")
    };
    lines.clear();
    role_cycler(&hooks, &a, 12, &mut |l| lines.push(l));
    assert_eq!(lines.len(), 12);
    assert!(matches!(hooks.read(&a).unwrap(), ReadOutcome::Value(_)));
}

#[test]
fn eight_dispatchers_at_once_one_wins_seven_are_refused() {
    dispatchers_race(&Place::fs(), 8);
}

#[test]
fn twelve_dispatchers_on_postgres_one_wins_eleven_are_refused() {
    if let Some(place) = Place::pg("twelve_dispatchers_on_postgres") {
        dispatchers_race(&place, 12);
    }
}

/// `n` dispatcher processes assign one hook at once, twice: exactly one wins.
fn dispatchers_race(place: &Place, n: usize) {
    let t = &place.t;
    let hooks = place.hooks();
    let a = agent("polecat");
    for round in 0..2 {
        if round == 1 {
            // The second race is on a hook file that exists and is empty.
            let held = hooks.current(&a).unwrap().unwrap();
            hooks.reassign(&held).unwrap();
        }
        let go = t.scratch(&format!("go-{round}"));
        let mut children: Vec<Child> = (0..n)
            .map(|i| {
                let args = [
                    place.spec(),
                    a.to_string(),
                    format!("r{round}-b{i}"),
                    go.to_str().unwrap().into(),
                ];
                kit::spawn(ENTRY, "assign", &args)
            })
            .collect();
        // Every dispatcher is up and waiting before the start line is drawn.
        let mut outputs: Vec<_> = children.iter_mut().map(own_lines).collect();
        for out in &mut outputs {
            assert_eq!(out.next().as_deref(), Some("ready"));
        }
        fs::write(&go, "").unwrap();
        let lines: Vec<String> = outputs.into_iter().flatten().collect();
        for child in &mut children {
            kit::wait_ok(child, Duration::from_secs(120));
        }
        let won: Vec<&String> = lines.iter().filter(|l| l.starts_with("won ")).collect();
        assert_eq!(won.len(), 1, "round {round}: {lines:?}");
        let winner = won[0].split(' ').nth(1).unwrap();
        let refused = format!("refused pending {winner}");
        assert_eq!(
            lines.iter().filter(|l| **l == refused).count(),
            n - 1,
            "round {round}: {lines:?}"
        );
        let held = hooks.current(&a).unwrap().unwrap();
        assert_eq!(held.work.bead_id.as_str(), winner);
        assert_eq!(
            held.work.assigned_by.unwrap().as_str(),
            format!("dispatcher-{winner}")
        );
        assert_eq!(held.generation, 1 + 2 * round);
    }
}

/// An agent touches in a loop; the dispatcher takes the work away (and,
/// with `then_assign`, hands the hook new work at once). The agent's touches
/// turn stale and the hook is never active again.
fn touch_race(place: &Place, then_assign: bool) {
    let hooks = place.hooks();
    let a = agent("polecat");
    hooks.assign(&a, bead("old"), "t", None).unwrap();
    let mut child = kit::spawn(
        ENTRY,
        "toucher",
        &[place.spec(), a.to_string(), "100000000".into()],
    );
    let mut lines = own_lines(&mut child);
    assert_eq!(lines.next().unwrap(), "started");
    assert_eq!(lines.next().unwrap(), "touching");
    thread::sleep(Duration::from_millis(30));

    let held = hooks.current(&a).unwrap().unwrap();
    let taken = hooks.reassign(&held).unwrap();
    assert_eq!(taken.was, HookStatus::Active);
    let want = if then_assign {
        hooks.assign(&a, bead("new"), "t", None).unwrap();
        HookStatus::Pending
    } else {
        HookStatus::Empty
    };
    let mut checks = 0;
    while child.try_wait().unwrap().is_none() {
        assert_eq!(
            hooks.read(&a).unwrap().status(),
            Some(want),
            "revived after {checks} checks"
        );
        checks += 1;
    }
    let rest: Vec<String> = lines.collect();
    kit::wait_ok(&mut child, Duration::from_secs(60));
    assert!(rest.len() == 1 && rest[0].starts_with("stale "), "{rest:?}");
    let hook = hooks.read(&a).unwrap().hook().unwrap().clone();
    assert_eq!(hook.state.status(), want);
    assert_eq!(
        hook.generation,
        held.generation + 1 + u64::from(then_assign)
    );
    if then_assign {
        assert_eq!(hook.state.work().unwrap().bead_id.as_str(), "new");
    }
}

#[test]
fn late_touches_never_revive_a_hook_taken_away() {
    touch_race(&Place::fs(), false);
}

#[test]
fn late_touches_never_touch_the_next_assignment() {
    touch_race(&Place::fs(), true);
}

#[test]
fn late_touches_on_postgres_never_revive_a_hook_taken_away() {
    if let Some(place) = Place::pg("late_touches_on_postgres_never_revive") {
        touch_race(&place, false);
    }
}

#[test]
fn late_touches_on_postgres_never_touch_the_next_assignment() {
    if let Some(place) = Place::pg("late_touches_on_postgres_never_touch_the_next") {
        touch_race(&place, true);
    }
}

#[test]
fn sigkill_mid_transitions_leaves_a_legal_hook() {
    sigkill_race(&Place::fs());
}

#[test]
fn sigkill_mid_transitions_on_postgres_leaves_a_legal_hook() {
    if let Some(place) = Place::pg("sigkill_mid_transitions_on_postgres") {
        sigkill_race(&place);
    }
}

/// A cycler process killed at random moments, 30 times: the hook is
/// always legal and its generation never goes back.
fn sigkill_race(place: &Place) {
    let seed = Jitter::seed_from_time();
    let mut jitter = Jitter::new(seed);
    let t = &place.t;
    let hooks = place.hooks();
    let a = agent("polecat");
    let mut acknowledged = 0u64;
    let mut last_generation = 0u64;
    for round in 0..30 {
        let mut child = kit::spawn(ENTRY, "cycler", &[place.spec(), a.to_string()]);
        let (tx, rx) = std::sync::mpsc::channel();
        let lines = own_lines(&mut child);
        let reader = thread::spawn(move || lines.for_each(|l| tx.send(l).unwrap_or(())));
        let mut seen = Vec::new();
        if place.is_pg() {
            // A child on PostgreSQL connects first, which takes a while on
            // a busy machine: the kill falls after its first transition.
            seen.extend(rx.recv_timeout(Duration::from_secs(60)));
        }
        thread::sleep(Duration::from_millis(20 + jitter.below(60)));
        kit::kill9(&mut child);
        reader.join().unwrap();
        for line in seen.into_iter().chain(rx.try_iter()) {
            acknowledged = line.strip_prefix("gen ").unwrap().parse().unwrap();
        }
        let ctx = format!("seed {seed} round {round}");
        match hooks.read(&a).unwrap() {
            ReadOutcome::Value(hook) => {
                // The acknowledged change or a later one is on disk; generations never go back.
                assert!(
                    hook.generation >= acknowledged,
                    "{ctx}: {hook:?} after gen {acknowledged}"
                );
                assert!(
                    hook.generation >= last_generation,
                    "{ctx}: generation went back"
                );
                last_generation = hook.generation;
            }
            ReadOutcome::Missing => assert_eq!(acknowledged, 0, "{ctx}: hook vanished"),
            ReadOutcome::Corrupt(c) => panic!("{ctx}: {c}"),
            ReadOutcome::Unsupported(u) => panic!("{ctx}: {u}"),
        }
        if !place.is_pg() {
            let names = t.state.list(hooks.dir()).unwrap();
            assert!(
                names.iter().all(|n| n == "polecat.json"),
                "{ctx}: {names:?}"
            );
        }
    }
    assert!(
        last_generation > 0,
        "seed {seed}: the cycler never got going"
    );
    if !place.is_pg() {
        // The doctor and the temp sweep are the directory's (not yet on the seam).
        assert!(hooks.doctor(DoctorMode::Check).unwrap().is_clean());
        t.state
            .sweep_temps(&t.state.root_path(), Duration::ZERO, DoctorMode::Fix)
            .unwrap();
    }
}
