//! The lease doctor's repair driven through the store's I/O seam: a fault
//! (EIO, ENOSPC) at every call of `doctor(Fix)` on a corrupt lease table,
//! and every power-cut state of it. No run loses the corrupt table's bytes
//! or a forced release's notice, no report claims a fix a check finds
//! undone, a later Fix finishes the repair
//! ([`chipset_testkit::sweep_doctor`]), and after every run the next
//! grant's fencing token is above every token granted before the damage.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use chipset_lease::{Error, Leases, Released};
use chipset_mail::Mail;
use chipset_store::{DoctorMode, RealIo, Report, SharedIo};
use chipset_testkit::{DoctorCase, cut_doctor, manual_state, state_path, sweep_doctor};

use crate::{agent, exclusive};

/// A torn table: the head of a real one.
const BAD_TABLE: &[u8] = b"{\"format\":1,\"next_token\":4,\"leases\":[";

/// Three leases granted (tokens 1 to 3), carol's forced, then the table
/// torn.
struct Torn;

/// The largest token granted before the damage.
const GRANTED: u64 = 3;

struct World {
    leases: Leases,
    mail: Mail,
}

fn open(root: &Path, io: SharedIo) -> World {
    let state = manual_state(root, io);
    World {
        leases: Leases::new(state.clone()),
        mail: Mail::new(state),
    }
}

impl DoctorCase for Torn {
    type World = World;
    type Error = Error;

    fn name(&self) -> &str {
        "lease table"
    }

    fn plant(&self, root: &Path) {
        let w = open(root, Arc::new(RealIo));
        let mut tokens = Vec::new();
        for (who, path) in [("alice", "src"), ("bob", "docs"), ("carol", "lib")] {
            let req = exclusive(&agent(who), &[path]);
            tokens.push(w.leases.acquire(&req).unwrap().lease.token);
        }
        assert_eq!(tokens, [1, 2, GRANTED]);
        let forced = w
            .leases
            .force_release(&agent("bob"), GRANTED, "carol crashed");
        assert!(matches!(forced, Ok(Released::Released(_))), "{forced:?}");
        let state = w.leases.state();
        let table = state_path(state, "leases/table.json");
        state.write_bytes(&table, BAD_TABLE).unwrap();
    }

    fn open(&self, root: &Path, io: SharedIo) -> World {
        open(root, io)
    }

    fn doctor(&self, w: &World, mode: DoctorMode) -> Result<Report, Error> {
        w.leases.doctor(mode)
    }

    fn damaged(&self) -> Vec<(PathBuf, Vec<u8>)> {
        vec![("leases/table.json".into(), BAD_TABLE.to_vec())]
    }

    /// Carol's notice is kept; a table the damage still fails closed is
    /// left; any other (none at all included) grants next a token above
    /// every one granted before the damage: a lease is taken and given
    /// back to see.
    fn healthy(&self, w: &World, what: &str) {
        let inbox = w
            .mail
            .inbox(&agent("carol"))
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        assert!(
            inbox.iter().any(|m| m.subject == "lease-force-released"),
            "{what}: carol's notice lost: {inbox:?}"
        );
        let probe = agent("probe");
        let lease = match w.leases.acquire(&exclusive(&probe, &["probe"])) {
            Ok(got) => got.lease,
            Err(Error::Corrupt { .. }) => return,
            Err(e) => panic!("{what}: {e}"),
        };
        assert!(
            lease.token > GRANTED,
            "{what}: the next grant reuses fencing token {} (granted up to {GRANTED})",
            lease.token
        );
        let released = w.leases.release(&probe, lease.token);
        assert!(matches!(released, Ok(Released::Released(_))), "{what}");
    }
}

#[test]
fn every_fault_in_a_lease_repair_keeps_the_data_and_tokens_only_grow() {
    sweep_doctor(&Torn);
}

#[test]
fn every_power_cut_in_a_lease_repair_keeps_the_data_and_tokens_only_grow() {
    cut_doctor(&Torn);
}
