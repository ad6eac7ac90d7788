//! The claim (issue 30), written once and run on both backends: rows taken
//! in the caller's order, a conflicting write that changes nothing, and
//! threads and processes claiming a set, each row exactly once. On
//! PostgreSQL a claim whose commit is cut is unknown, and the retry with
//! the same claimer returns the first claim.

use std::collections::BTreeMap;
use std::sync::{Arc, Barrier};
use std::thread;

use chipset_backend::{Backend, Claim, ClaimView, ClaimWrite, Claimed, Created, Error, Key};
use chipset_store::Classify;
use chipset_testkit as kit;

use crate::support::{Fx, MARK, dir, key};
use chipset_backend::testing::Proxy;

chipset_backend::both!(
    crate::support::Fx;
    claims_take_rows_in_order_and_pass_over_refused_ones,
    a_conflicting_claim_write_changes_nothing,
    claim_race_threads_take_each_row_once,
    claim_race_processes_take_each_row_once,
);

/// How many rows a claimer offers at a time, from its own snapshot.
const WINDOW: usize = 32;

fn rows(b: &dyn Backend, n: usize) -> Vec<String> {
    let names: Vec<String> = (0..n).map(|i| format!("{i:05}.json")).collect();
    for name in &names {
        let _ = b.create(&key("q", name), b"{}\n").unwrap();
    }
    names
}

/// The row's owner marker, `owners/{row}`.
fn owner_key(name: &str) -> Key {
    key("owners", name)
}

/// Claims one row of `candidates` for `me`: the first with no owner gets
/// `owners/{row}` = `me` and `claims/{me}` = the row, in one claim. A
/// claimer that holds a row already (its `claims/{me}`) gets it back: the
/// retry of a claim that applied.
pub(crate) fn claim_one(b: &dyn Backend, me: &str, candidates: &[String]) -> Option<String> {
    let mine = key("claims", me);
    if let Some(held) = b.read(&mine).unwrap() {
        let name = String::from_utf8(held.value).unwrap();
        let _ = b.remove(&mine, held.version);
        return Some(name);
    }
    let (lock, q) = (key("q", "table.json"), dir("q"));
    let claim = Claim {
        lock: &lock,
        dir: &q,
        candidates,
    };
    let mut decide = |view: &mut dyn ClaimView, name: &str| {
        if view.read(&owner_key(name))?.is_some() {
            return Ok(None);
        }
        Ok(Some(vec![
            ClaimWrite {
                key: owner_key(name),
                expected: None,
                value: me.as_bytes().to_vec(),
            },
            ClaimWrite {
                key: mine.clone(),
                expected: None,
                value: name.as_bytes().to_vec(),
            },
        ]))
    };
    let claimed = b.claim(&claim, &mut decide).unwrap()?;
    let held = b.read(&mine).unwrap().unwrap();
    b.remove(&mine, held.version).unwrap();
    Some(claimed.name)
}

/// Claims rows of `names` for `me` until none is left, a window of its own
/// snapshot at a time; returns how many it claimed.
pub(crate) fn drain(b: &dyn Backend, me: &str, names: &[String]) -> usize {
    let mut claimed = 0;
    let mut at = 0;
    while at < names.len() {
        let end = (at + WINDOW).min(names.len());
        match claim_one(b, me, &names[at..end]) {
            Some(name) => {
                claimed += 1;
                at = names.binary_search(&name).unwrap() + 1;
            }
            None => at = end,
        }
    }
    // Rows passed over while another claimer held them: a last pass over
    // what has no owner yet.
    loop {
        let owned = b.list(&dir("owners")).unwrap();
        let free: Vec<String> = names
            .iter()
            .filter(|n| owned.binary_search(n).is_err())
            .cloned()
            .collect();
        if free.is_empty() || claim_one(b, me, &free).is_none() {
            return claimed;
        }
        claimed += 1;
    }
}

/// Every row has exactly one owner, and the owners' counts are `counts`.
fn each_row_once(b: &dyn Backend, names: &[String], counts: &BTreeMap<String, usize>) {
    let mut by_owner: BTreeMap<String, usize> = BTreeMap::new();
    for name in names {
        let owner = b
            .read(&owner_key(name))
            .unwrap()
            .unwrap_or_else(|| panic!("{name} was never claimed"));
        *by_owner
            .entry(String::from_utf8(owner.value).unwrap())
            .or_default() += 1;
    }
    assert_eq!(&by_owner, counts, "each claimer's count is what it owns");
    assert_eq!(counts.values().sum::<usize>(), names.len());
}

fn claims_take_rows_in_order_and_pass_over_refused_ones(fx: &Fx) {
    let b = fx.b.as_ref();
    let names = rows(b, 3);
    let mut offered = vec![
        "missing.json".to_owned(),
        names[1].clone(),
        names[0].clone(),
    ];
    // A name with no row is skipped; the next is taken.
    assert_eq!(
        claim_one(b, "alice", &offered).as_deref(),
        Some("00001.json")
    );
    // A claimed row is passed over by the decision.
    assert_eq!(claim_one(b, "bob", &offered).as_deref(), Some("00000.json"));
    assert_eq!(claim_one(b, "carol", &offered), None);
    offered.push(names[2].clone());
    assert_eq!(
        claim_one(b, "carol", &offered).as_deref(),
        Some("00002.json")
    );
    let owner = |n: &str| b.read(&owner_key(n)).unwrap().unwrap().value;
    assert_eq!(owner("00001.json"), b"alice");
    assert_eq!(owner("00000.json"), b"bob");
    // Nothing was claimed for a name with no row.
    assert_eq!(b.read(&owner_key("missing.json")).unwrap(), None);
}

fn a_conflicting_claim_write_changes_nothing(fx: &Fx) {
    let b = fx.b.as_ref();
    let names = rows(b, 2);
    let hook = key("hooks", "alice.json");
    let Created::New(v1) = b.create(&hook, b"empty\n").unwrap() else {
        panic!("a fresh key")
    };
    let v2 = b.replace(&hook, v1, b"busy\n").unwrap();
    let (lock, q) = (key("q", "table.json"), dir("q"));
    let claim = Claim {
        lock: &lock,
        dir: &q,
        candidates: &names,
    };
    // Decided on a stale read of the hook: refused, nothing written.
    let mut stale = |_: &mut dyn ClaimView, _: &str| {
        Ok(Some(vec![ClaimWrite {
            key: hook.clone(),
            expected: Some(v1),
            value: b"holds 00000\n".to_vec(),
        }]))
    };
    let err = b.claim(&claim, &mut stale).unwrap_err();
    let Error::Conflict { current, .. } = &err else {
        panic!("{err}")
    };
    assert_eq!(current.as_ref().map(|c| c.version), Some(v2));
    assert_eq!(b.read(&hook).unwrap().unwrap().value, b"busy\n");
    // At the version read, the same claim is made.
    let mut fresh = |view: &mut dyn ClaimView, name: &str| {
        let now = view.read(&hook)?.unwrap();
        Ok(Some(vec![ClaimWrite {
            key: hook.clone(),
            expected: Some(now.version),
            value: format!("holds {name}\n").into_bytes(),
        }]))
    };
    let Claimed { name, versions, .. } = b.claim(&claim, &mut fresh).unwrap().unwrap();
    assert_eq!(name, "00000.json");
    let now = b.read(&hook).unwrap().unwrap();
    assert_eq!(
        (now.value.as_slice(), versions),
        (&b"holds 00000.json\n"[..], vec![now.version])
    );
}

fn claim_race_threads_take_each_row_once(fx: &Fx) {
    let names = Arc::new(rows(fx.b.as_ref(), 200));
    let n = 8;
    let barrier = Arc::new(Barrier::new(n));
    let handles: Vec<_> = (0..n)
        .map(|i| {
            let b = if i % 2 == 0 {
                Arc::clone(&fx.b)
            } else {
                fx.reopen()
            };
            let (names, barrier) = (Arc::clone(&names), Arc::clone(&barrier));
            thread::spawn(move || {
                let me = format!("thread-{i}");
                barrier.wait();
                (me.clone(), drain(b.as_ref(), &me, &names))
            })
        })
        .collect();
    let counts: BTreeMap<String, usize> = handles
        .into_iter()
        .map(|h| h.join().unwrap())
        .filter(|(_, c)| *c > 0)
        .collect();
    each_row_once(fx.b.as_ref(), &names, &counts);
}

fn claim_race_processes_take_each_row_once(fx: &Fx) {
    let names = rows(fx.b.as_ref(), 400);
    let tmp = tempfile::tempdir().unwrap();
    let start = tmp.path().join("start");
    let mut children: Vec<_> = (0..4)
        .map(|i| {
            let args = [
                fx.spec(),
                start.display().to_string(),
                format!("proc-{i}"),
                names.len().to_string(),
            ];
            kit::spawn("child_entry", "claim", &args)
        })
        .collect();
    #[allow(clippy::disallowed_methods, reason = "the start line for the children")]
    std::fs::write(&start, b"go").unwrap();
    let mut counts = BTreeMap::new();
    for (i, child) in children.iter_mut().enumerate() {
        let said: Vec<String> = kit::own_lines(child, MARK).collect();
        kit::wait_ok(child, kit::PATIENT);
        let n: usize = said
            .last()
            .expect("the child said its count")
            .parse()
            .unwrap();
        if n > 0 {
            counts.insert(format!("proc-{i}"), n);
        }
    }
    each_row_once(fx.b.as_ref(), &names, &counts);
}

/// The child's part of the process race: `claim SPEC START NAME ROWS`.
pub(crate) fn act_claim(b: &dyn Backend, role: &kit::Role) {
    kit::wait_for_file(std::path::Path::new(role.arg(1)));
    let n: usize = role.parse(3);
    let names: Vec<String> = (0..n).map(|i| format!("{i:05}.json")).collect();
    kit::say(MARK, &drain(b, role.arg(2), &names).to_string());
}

/// A claim whose commit is cut: the outcome is unknown, the claim is
/// committed, and the retry with the same claimer returns that row.
#[test]
fn a_claim_cut_at_commit_is_unknown_and_the_retry_returns_it() {
    let test = "a_claim_cut_at_commit_is_unknown_and_the_retry_returns_it";
    let Some(fx) = Fx::pg(test) else {
        return;
    };
    let (proxy, via) = Proxy::for_url(&crate::support::pg_url(test).unwrap());
    let schema = fx.spec().split('\t').nth(2).unwrap().to_owned();
    let mut options = chipset_backend::PgOptions::with_schema(&schema);
    options.max_idle = 1;
    let cut = chipset_backend::PgBackend::open_with(&via, options).unwrap();
    let names = rows(fx.b.as_ref(), 3);
    // Prepare every statement on the proxied connection first.
    assert_eq!(
        claim_one(&cut, "warm", &names).as_deref(),
        Some("00000.json")
    );

    let (lock, q) = (key("q", "table.json"), dir("q"));
    let claim = Claim {
        lock: &lock,
        dir: &q,
        candidates: &names,
    };
    let mine = key("claims", "alice");
    let mut decide = |view: &mut dyn ClaimView, name: &str| {
        if view.read(&owner_key(name))?.is_some() {
            return Ok(None);
        }
        Ok(Some(vec![
            ClaimWrite {
                key: owner_key(name),
                expected: None,
                value: b"alice".to_vec(),
            },
            ClaimWrite {
                key: mine.clone(),
                expected: None,
                value: name.as_bytes().to_vec(),
            },
        ]))
    };
    // The transaction's statements go through; its commit is cut.
    proxy.cut_at_request_with("COMMIT");
    let err = cut.claim(&claim, &mut decide).unwrap_err();
    assert!(err.is_outcome_unknown(), "{err}");
    let owner = fx.b.read(&owner_key("00001.json")).unwrap().unwrap();
    assert_eq!(owner.value, b"alice", "the claim committed");
    // The retry with the same claimer finds its claim: the first result.
    assert_eq!(
        claim_one(&cut, "alice", &names).as_deref(),
        Some("00001.json")
    );
    // And nothing else was claimed for it.
    assert_eq!(fx.b.read(&owner_key("00002.json")).unwrap(), None);
}
