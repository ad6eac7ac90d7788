//! The loops work through the channel handles they are given: a caller's
//! mail and bus configs apply, and handles on another root are refused.

use std::collections::BTreeSet;

use chipset_hook::Pickup;
use chipset_loop::{Channels, Error, Witness, WitnessConfig, WorkOutcome, Worker, WorkerConfig};
use chipset_mail::{Mail, MailConfig};
use chipset_store::Classify as _;
use chipset_testkit::TempState;

use crate::{agent, bead, secs, setup};

/// A mail config whose registry knows only `names`: sending to anyone else is refused.
fn only(names: &[&str]) -> MailConfig {
    MailConfig {
        recipients: Some(names.iter().map(|n| agent(n)).collect::<BTreeSet<_>>()),
        ..MailConfig::default()
    }
}

#[test]
fn handles_on_another_root_are_refused_naming_both_roots() {
    let s = setup();
    let other = TempState::new();
    let err = Channels::new(s.state())
        .with_mail(Mail::new(other.state.clone()))
        .unwrap_err();
    let Error::MixedRoots {
        channel,
        found,
        root,
    } = &err
    else {
        panic!("expected MixedRoots, got {err:?}")
    };
    assert_eq!(*channel, "mail");
    assert_eq!(found, other.state.root());
    assert_eq!(root, s.state().root());
    assert!(
        err.to_string().contains(&found.display().to_string()),
        "{err}"
    );
}

#[test]
fn the_witness_escalates_through_the_callers_mail() {
    let s = setup();
    s.hooks
        .assign(&agent("polecat-alpha"), bead("gt-abc12"), "work", None)
        .unwrap();
    // The caller's registry does not know the dispatcher: its escalation is refused.
    let channels = Channels::new(s.state())
        .with_mail(Mail::with_config(s.state(), only(&["polecat-alpha"])))
        .unwrap();
    let config = WitnessConfig {
        stall_threshold: secs(300),
        nudge_interval: secs(60),
        grace: secs(0),
        ..WitnessConfig::default()
    };
    let w = Witness::new(channels, agent("witness"), agent("mayor"), config);
    for kind in ["health_check", "stall_warning"] {
        s.advance(301);
        let actions = w.tick().unwrap();
        assert_eq!(actions.len(), 1, "{kind}: {actions:?}");
    }
    s.advance(61);
    // The escalation's intent was written before the refusal: a tick done
    // in part, whose outcome is unknown.
    let err = w.tick().unwrap_err();
    assert!(
        matches!(
            &err,
            Error::PartlyDone { source, .. }
                if matches!(**source, Error::Mail(chipset_mail::Error::UnknownRecipient { .. }))
        ),
        "{err:?}"
    );
    assert!(err.is_outcome_unknown());
    assert!(
        s.sent(&chipset_loop::Topic::HealthEscalation.to_string())
            .is_empty()
    );
}

#[test]
fn the_worker_reports_through_the_callers_mail() {
    let s = setup();
    s.hooks
        .assign(&agent("polecat-alpha"), bead("gt-abc12"), "work", None)
        .unwrap();
    let channels = Channels::new(s.state())
        .with_mail(Mail::with_config(s.state(), only(&["polecat-alpha"])))
        .unwrap();
    let worker = Worker::new(
        channels,
        agent("polecat-alpha"),
        agent("mayor"),
        WorkerConfig::default(),
    );
    let err = worker.run_once(|_| Ok("done".to_owned())).unwrap_err();
    // The work itself completed on the hook before the report was
    // refused: partly done, never a plain refusal.
    assert!(err.is_outcome_unknown(), "{err:?}");
    let Error::PartlyDone { source, .. } = &err else {
        panic!("{err:?}")
    };
    assert!(
        matches!(
            **source,
            Error::Mail(chipset_mail::Error::UnknownRecipient { .. })
        ),
        "{source:?}"
    );
    let report = chipset_loop::Topic::CompletionReport.to_string();
    assert!(s.sent(&report).is_empty());
    assert!(matches!(
        s.hooks.pickup(&agent("polecat-alpha")).unwrap(),
        Pickup::AwaitingClear(_)
    ));
    // The summary was kept: once the mail accepts the dispatcher, the
    // next call sends the report, once.
    let fixed = Worker::new(
        s.state(),
        agent("polecat-alpha"),
        agent("mayor"),
        WorkerConfig::default(),
    );
    for _ in 0..2 {
        let out = fixed.run_once(|_| Ok("not run".to_owned())).unwrap();
        assert!(matches!(out, WorkOutcome::AwaitingClear(_)), "{out:?}");
    }
    assert_eq!(s.sent(&report).len(), 1);
    let sent = s.inbox(&agent("mayor"));
    assert_eq!(crate::body_json(&sent[0].body)["summary"], "done");
}

#[test]
fn the_dispatcher_assigns_through_the_callers_mail() {
    let s = setup();
    // The caller's registry does not know the agent: the assignment mail is refused.
    let channels = Channels::new(s.state())
        .with_mail(Mail::with_config(s.state(), only(&["mayor"])))
        .unwrap();
    let d = chipset_loop::Dispatcher::new(
        channels,
        agent("mayor"),
        [agent("polecat-alpha")],
        chipset_loop::DispatcherConfig::default(),
    );
    d.submit(bead("gt-abc12"), "work").unwrap();
    // The intent and the hook were written before the refusal: a tick done
    // in part, whose outcome is unknown.
    let err = d.tick().unwrap_err();
    assert!(
        matches!(
            &err,
            Error::PartlyDone { source, .. }
                if matches!(**source, Error::Mail(chipset_mail::Error::UnknownRecipient { .. }))
        ),
        "{err:?}"
    );
    assert!(err.is_outcome_unknown());
    assert!(
        s.sent(&chipset_loop::Topic::WorkAssignment.to_string())
            .is_empty()
    );
    // The intent was written first: a default dispatcher finishes the assignment.
    let plain = chipset_loop::Dispatcher::new(
        s.state(),
        agent("mayor"),
        [agent("polecat-alpha")],
        chipset_loop::DispatcherConfig::default(),
    );
    let actions = plain.tick().unwrap();
    assert!(
        actions.is_empty(),
        "adopted silently, as after a crash: {actions:?}"
    );
    assert_eq!(
        s.sent(&chipset_loop::Topic::WorkAssignment.to_string())
            .len(),
        1
    );
}

/// A tick that fails part way logs the actions it took before the
/// failure: here the first bead's assignment, whole, before the second
/// agent's mail is refused.
#[test]
fn a_tick_that_fails_part_way_logs_what_it_did() {
    let s = setup();
    let channels = Channels::new(s.state())
        .with_mail(Mail::with_config(
            s.state(),
            only(&["mayor", "polecat-alpha"]),
        ))
        .unwrap();
    let d = chipset_loop::Dispatcher::new(
        channels,
        agent("mayor"),
        [agent("polecat-alpha"), agent("polecat-beta")],
        chipset_loop::DispatcherConfig::default(),
    );
    d.submit(bead("gt-1"), "first").unwrap();
    s.advance(1);
    d.submit(bead("gt-2"), "second").unwrap();
    let err = d.tick().unwrap_err();
    assert!(matches!(&err, Error::PartlyDone { .. }), "{err:?}");
    let log = s
        .state()
        .log(&chipset_testkit::state_path(
            &s.state(),
            "loop/dispatcher/log.jsonl",
        ))
        .unwrap()
        .read_from::<chipset_loop::DispatchAction>(0)
        .unwrap();
    assert!(log.bad_lines.is_empty(), "{:?}", log.bad_lines);
    let assigned: Vec<(String, String)> = log
        .records
        .iter()
        .filter_map(|a| match a {
            chipset_loop::DispatchAction::Assigned { bead_id, agent, .. } => {
                Some((bead_id.to_string(), agent.to_string()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(assigned.len(), 1, "{:?}", log.records);
    assert_eq!(
        s.sent(&chipset_loop::Topic::WorkAssignment.to_string())
            .len(),
        1,
        "the one assignment that went out is the one logged"
    );
}

/// Channels on a directory backend work too: the loops' records are the
/// directory's own files, and a loop holding a record's lock never waits
/// on itself when it writes the record.
#[test]
fn loops_on_a_directory_backend_never_wait_on_their_own_lock() {
    let s = setup();
    let seam = std::sync::Arc::new(chipset_backend::FsBackend::new(s.state()));
    let channels = Channels::with_backend(s.state(), seam);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let d = chipset_loop::Dispatcher::new(
            channels,
            agent("mayor"),
            [agent("w1")],
            chipset_loop::DispatcherConfig::default(),
        );
        d.submit(bead("b1"), "t").unwrap();
        let assigned = d.tick().unwrap();
        let _ = tx.send(assigned.len());
    });
    let assigned = rx
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("the tick ends");
    assert_eq!(assigned, 1);
    assert_eq!(s.loop_json("dispatcher/beads/b1.json")["state"], "assigned");
}
