//! Real processes: eight agents racing for one exclusive path, and SIGKILL
//! while leases are granted and released. Both run on a directory and,
//! when `CHIPSET_TEST_PG` names a server, on PostgreSQL (issue 30) from the
//! same bodies.

use std::fs;
use std::path::Path;
use std::process::Child;
use std::thread;
use std::time::Duration;

use chipset_lease::{Error, LeaseMode, LeaseRequest, Leases};
use chipset_store::AgentId;
use chipset_testkit::{self as kit, TempState};

use crate::place::Place;

const ENTRY: &str = "procs::child_entry";

/// Marks a child's own lines, apart from what the test harness prints.
const MARK: &str = "lease> ";

fn print(line: &str) {
    kit::say(MARK, line);
}

fn own_lines(child: &mut Child) -> impl Iterator<Item = String> + use<> {
    kit::own_lines(child, MARK)
}

/// An agent: leases `src/auth/**` exclusively and says whether it won.
fn role_acquire(leases: &Leases, me: &AgentId, out: &mut dyn FnMut(String)) {
    let req = LeaseRequest::new(me.clone(), LeaseMode::Exclusive, ["src/auth/**"]);
    match leases.acquire(&req) {
        Ok(a) => out(format!("won {}", a.lease.token)),
        Err(Error::Conflict { conflicts }) => out(format!("refused {}", conflicts[0].holder)),
        Err(e) => panic!("unexpected error: {e}"),
    }
}

/// Acquires, renews and releases leases forever (until killed).
fn role_churn(leases: &Leases, me: &AgentId, steps: u64, out: &mut dyn FnMut(String)) {
    for n in 0..steps {
        let req = LeaseRequest::new(me.clone(), LeaseMode::Exclusive, [format!("f{}", n % 50)])
            .with_reason("x".repeat(usize::try_from(n % 300).unwrap()));
        let l = leases.acquire(&req).unwrap().lease;
        leases.renew(me, l.token, Duration::from_secs(60)).unwrap();
        if n % 3 != 0 {
            let _ = leases.release(me, l.token).unwrap();
        }
        if n == 0 {
            out("churning".into());
        }
    }
}

#[test]
fn child_entry() {
    if let Some(role) = kit::child_role() {
        let (leases, _) = Place::open_spec(role.arg(0));
        let me = AgentId::new(role.arg(1)).unwrap();
        let mut out = |line: String| print(&line);
        match role.name.as_str() {
            "acquire" => {
                out("ready".into());
                kit::wait_for_file(Path::new(role.arg(2)));
                role_acquire(&leases, &me, &mut out);
            }
            "churn" => role_churn(&leases, &me, u64::MAX, &mut out),
            other => panic!("unknown role {other}"),
        }
        return;
    }
    // Not a child: run the roles in-process on tiny inputs.
    let t = TempState::new();
    let leases = Leases::new(t.state.clone());
    let mut lines = Vec::new();
    role_acquire(&leases, &kit::agent("a"), &mut |l| lines.push(l));
    role_acquire(&leases, &kit::agent("b"), &mut |l| lines.push(l));
    role_churn(&leases, &kit::agent("c"), 4, &mut |l| lines.push(l));
    assert_eq!(lines, ["won 1", "refused a", "churning"]);
}

#[test]
fn eight_agents_at_once_exactly_one_wins_the_exclusive_path() {
    eight_agents_race(&Place::fs());
}

#[test]
fn eight_agents_on_postgres_exactly_one_wins_the_exclusive_path() {
    if let Some(place) = Place::pg("eight_agents_on_postgres") {
        eight_agents_race(&place);
    }
}

/// Eight agents lease one exclusive path at once: one wins with the first
/// token, seven are refused naming the winner.
fn eight_agents_race(place: &Place) {
    let t = TempState::new();
    let go = t.scratch("go");
    let mut children: Vec<Child> = (0..8)
        .map(|i| {
            let args = [
                place.spec(t.state.root()),
                format!("agent-{i}"),
                go.to_str().unwrap().into(),
            ];
            kit::spawn(ENTRY, "acquire", &args)
        })
        .collect();
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
    assert_eq!(won, ["won 1"], "{lines:?}");
    let leases = place.open(&t.state);
    let live = leases.live().unwrap();
    assert_eq!(live.len(), 1);
    let refused = format!("refused {}", live[0].holder);
    assert_eq!(
        lines.iter().filter(|l| **l == refused).count(),
        7,
        "{lines:?}"
    );
    if place.is_pg() {
        // Nothing went through the local root.
        assert!(!t.state.root().join("leases").exists());
    }
}

#[test]
fn sigkill_at_any_point_leaves_every_lease_readable() {
    sigkill_churn(&Place::fs());
}

#[test]
fn sigkill_on_postgres_at_any_point_leaves_every_lease_readable() {
    if let Some(place) = Place::pg("sigkill_on_postgres") {
        sigkill_churn(&place);
    }
}

/// A churning process killed at random points: every lease still reads,
/// tokens are unique, and the next grant's token is larger than any.
fn sigkill_churn(place: &Place) {
    let t = TempState::new();
    let leases = place.open(&t.state);
    let mut jitter = kit::Jitter::new(kit::Jitter::seed_from_time());
    for round in 0..6 {
        let mut child = kit::spawn(
            ENTRY,
            "churn",
            &[place.spec(t.state.root()), "churner".to_owned()],
        );
        let mut lines = own_lines(&mut child);
        assert_eq!(lines.next().as_deref(), Some("churning"));
        thread::sleep(Duration::from_millis(5 + jitter.below(40)));
        kit::kill9(&mut child);
        let all = leases
            .list()
            .unwrap_or_else(|e| panic!("round {round}: {e}"));
        let mut tokens: Vec<u64> = all.iter().map(|l| l.token).collect();
        tokens.dedup();
        assert_eq!(tokens.len(), all.len());
        // The next grant still gets a larger token than any recorded.
        let me = kit::agent("after");
        let next = leases
            .acquire(&LeaseRequest::new(
                me.clone(),
                LeaseMode::Shared,
                [format!("z{round}")],
            ))
            .unwrap()
            .lease;
        assert!(tokens.iter().all(|t| *t < next.token));
    }
}
