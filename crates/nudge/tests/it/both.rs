//! Signal behaviours checked on both backends from one body (issue 30):
//! the directory, and PostgreSQL when `CHIPSET_TEST_PG` names a server.

use chipset_nudge::{Delivery, NewNudge, NudgeType, Received};
use chipset_store::ReadOutcome;
use chipset_testkit::TempState;

use crate::place::{Place, key};
use crate::support::agent;

/// Runs a body on the directory (`fs_NAME`) and on PostgreSQL (`pg_NAME`).
macro_rules! both {
    ($($name:ident),* $(,)?) => {
        mod fs {
            $(
                #[test]
                fn $name() {
                    super::$name(&crate::place::Place::fs());
                }
            )*
        }
        mod pg {
            $(
                #[test]
                fn $name() {
                    if let Some(place) = crate::place::Place::pg(stringify!($name)) {
                        super::$name(&place);
                    }
                }
            )*
        }
    };
}

both!(
    a_send_moves_a_corrupt_latest_aside_and_keeps_its_bytes,
    a_corrupt_processed_record_means_unsure_and_marking_moves_it_aside,
);

fn a_send_moves_a_corrupt_latest_aside_and_keeps_its_bytes(place: &Place) {
    let t = TempState::new();
    let (n, b) = (place.nudges(t.state.clone()), place.backend(&t.state));
    let p = agent("polecat-alpha");
    let _ = b
        .put(&key("nudge/polecat-alpha/latest.json"), b"garbage")
        .unwrap();
    assert!(matches!(n.receive(&p).unwrap(), ReadOutcome::Corrupt(_)));
    let draft = NewNudge::new(agent("mayor"), NudgeType::HealthCheck, "hi");
    let d = n.send(&p, draft).unwrap();
    let Delivery::RepairedCorrupt { quarantined, .. } = d else {
        panic!("{d:?}")
    };
    let kept = if place.is_pg() {
        b.read(&key(quarantined.to_str().unwrap()))
            .unwrap()
            .unwrap()
            .value
    } else {
        std::fs::read(&quarantined).unwrap()
    };
    assert_eq!(kept, b"garbage");
    assert!(matches!(
        n.receive(&p).unwrap(),
        ReadOutcome::Value(Received::New(_))
    ));
}

fn a_corrupt_processed_record_means_unsure_and_marking_moves_it_aside(place: &Place) {
    let t = TempState::new();
    let (n, b) = (place.nudges(t.state.clone()), place.backend(&t.state));
    let p = agent("polecat-alpha");
    let draft = NewNudge::new(agent("mayor"), NudgeType::HealthCheck, "hi");
    n.send(&p, draft).unwrap();
    let _ = b
        .put(&key("nudge/polecat-alpha/processed.json"), b"{")
        .unwrap();
    let got = n.receive(&p).unwrap();
    let ReadOutcome::Value(Received::Unsure { nudge, .. }) = got else {
        panic!("{got:?}")
    };
    n.mark_processed(&p, &nudge).unwrap();
    assert!(matches!(
        n.receive(&p).unwrap(),
        ReadOutcome::Value(Received::Seen(_))
    ));
}
