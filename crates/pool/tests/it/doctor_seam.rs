//! The pool doctor's repairs driven through the store's I/O seam: a fault
//! (EIO, ENOSPC) at every call of `doctor(Fix)` on a damaged pool, and
//! every power-cut state of it. No run loses a byte of the damaged files
//! or an item's state, no report claims a fix a check finds undone, and a
//! later Fix finishes the repair ([`chipset_testkit::sweep_doctor`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use chipset_hook::Hooks;
use chipset_pool::{Error, NewItem, Pool};
use chipset_store::{DoctorMode, RealIo, Report, SharedIo};
use chipset_testkit::{DoctorCase, cut_doctor, manual_state, state_path, sweep_doctor};

use crate::{agent, id};

/// What is damaged.
#[derive(Clone, Copy)]
enum Damage {
    /// A bad line at the head of the log: folded and moved aside.
    Log,
    /// A torn table (copied aside, rebuilt over it) and an orphan item
    /// file (moved aside).
    Table,
    /// A torn table larger than the store's read cap (a pool's table may
    /// be up to 32 MiB): copied aside all the same, never moved, so no
    /// failure leaves the pool without a table.
    BigTable,
}

const BAD_LINE: &[u8] = b"not json\n";
const BAD_TABLE: &[u8] = b"{\"format\": 1, \"items\": [";
const ORPHAN: &[u8] = b"{\"not\": \"an item\"}";
/// The size of [`Damage::BigTable`]'s table: over the store's read cap.
const BIG: usize = 2 << 20;

/// A torn table of [`BIG`] bytes.
fn big_table() -> Vec<u8> {
    let mut bytes = BAD_TABLE.to_vec();
    bytes.resize(BIG, b' ');
    bytes
}

struct World {
    pool: Pool,
    hooks: Hooks,
}

fn open(root: &Path, io: SharedIo) -> World {
    let state = manual_state(root, io);
    World {
        pool: Pool::new(state.clone()),
        hooks: Hooks::new(state),
    }
}

/// Four items: `a` done through `done` (in the log), `b` completed on
/// bob's hook, `c` pending on carol's hook, `d` ready.
fn four(w: &World) {
    let items: Vec<NewItem> = ["a", "b", "c", "d"]
        .iter()
        .map(|n| crate::item(n))
        .collect();
    w.pool.post_many(&agent("lead"), &items).unwrap();
    let _ = w.pool.claim(&agent("alice"), &id("a")).unwrap();
    w.pool.done(&agent("alice"), &id("a")).unwrap();
    let b = w.pool.claim(&agent("bob"), &id("b")).unwrap().assignment;
    w.hooks.activate(&b).unwrap();
    w.hooks.complete(&b).unwrap();
    let _ = w.pool.claim(&agent("carol"), &id("c")).unwrap();
}

impl DoctorCase for Damage {
    type World = World;
    type Error = Error;

    fn name(&self) -> &str {
        match self {
            Damage::Log => "pool log",
            Damage::Table => "pool table",
            Damage::BigTable => "big pool table",
        }
    }

    fn plant(&self, root: &Path) {
        let w = open(root, Arc::new(RealIo));
        four(&w);
        let state = w.pool.state();
        let at = |rel: &str| state_path(state, rel);
        match self {
            Damage::Log => {
                let log = at("pool/log.jsonl");
                let mut bytes = BAD_LINE.to_vec();
                bytes.extend(
                    state
                        .read_bytes(&log)
                        .unwrap()
                        .into_result()
                        .unwrap()
                        .unwrap(),
                );
                state.write_bytes(&log, &bytes).unwrap();
            }
            Damage::Table => {
                state
                    .write_bytes(&at("pool/table.json"), BAD_TABLE)
                    .unwrap();
                state
                    .write_bytes(&at("pool/items/zz.json"), ORPHAN)
                    .unwrap();
            }
            Damage::BigTable => {
                assert!(BIG as u64 > state.read_cap(), "over the read cap");
                state
                    .write_bytes(&at("pool/table.json"), &big_table())
                    .unwrap();
            }
        }
    }

    fn open(&self, root: &Path, io: SharedIo) -> World {
        open(root, io)
    }

    fn doctor(&self, w: &World, mode: DoctorMode) -> Result<Report, Error> {
        w.pool.doctor(mode)
    }

    fn damaged(&self) -> Vec<(PathBuf, Vec<u8>)> {
        match self {
            Damage::Log => vec![("pool/log.jsonl".into(), BAD_LINE.to_vec())],
            Damage::Table => vec![
                ("pool/table.json".into(), BAD_TABLE.to_vec()),
                ("pool/items/zz.json".into(), ORPHAN.to_vec()),
            ],
            Damage::BigTable => vec![("pool/table.json".into(), big_table())],
        }
    }

    /// Every item keeps its state; a pool the damage still fails closed
    /// (a corrupt table or log not yet repaired) keeps it on disk.
    fn healthy(&self, w: &World, what: &str) {
        let list = match w.pool.list() {
            Ok(list) => list,
            Err(e @ Error::Corrupt { .. }) => {
                drop(e);
                return;
            }
            Err(e) => panic!("{what}: {e}"),
        };
        let states: Vec<(String, &str)> = list
            .into_iter()
            .map(|l| (String::from(l.entry.id), l.state.as_str()))
            .collect();
        let want: Vec<(String, &str)> = [
            ("a", "done"),
            ("b", "done"),
            ("c", "claimed"),
            ("d", "ready"),
        ]
        .iter()
        .map(|(i, s)| ((*i).to_owned(), *s))
        .collect();
        assert_eq!(states, want, "{what}");
        let held = w.hooks.current(&agent("carol")).unwrap();
        assert!(held.is_some(), "{what}: carol's claim lost");
    }
}

#[test]
fn every_fault_in_a_pool_repair_keeps_the_data_and_a_later_fix_finishes() {
    for case in [Damage::Log, Damage::Table, Damage::BigTable] {
        sweep_doctor(&case);
    }
}

#[test]
fn every_power_cut_in_a_pool_repair_keeps_the_data_and_a_later_fix_finishes() {
    for case in [Damage::Log, Damage::Table, Damage::BigTable] {
        cut_doctor(&case);
    }
}
