//! The views over files other programs wrote: the peer fixtures (nubos-pilot's
//! mail folder, Tibsfox's hooks) under a chipset root.

use chipset::Chipset;
use chipset_console::{Screen, Snapshot, View, detail};

#[test]
fn every_view_draws_the_peer_fixtures() {
    let peers = chipset_testkit::peer_fixtures();
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("state");
    chipset_testkit::copy_dir(&peers.join("nubos-pilot/messages"), &root.join("mail"));
    std::fs::create_dir_all(root.join("hooks")).unwrap();
    std::fs::copy(
        peers.join("tibsfox/hooks/active.json"),
        root.join("hooks/polecat-alpha.json"),
    )
    .unwrap();
    let chipset = Chipset::open(&root).unwrap();
    let snapshot = Snapshot::load(&chipset).unwrap();
    let agents = snapshot.table(View::Agents);
    assert!(agents.problems.is_empty(), "{:?}", agents.problems);
    let names: Vec<&str> = agents.rows.iter().map(|r| r.key.as_str()).collect();
    for agent in ["np-critic", "np-executor", "polecat-alpha"] {
        assert!(names.contains(&agent), "{agent} missing: {names:?}");
    }
    let requests = snapshot.table(View::Requests);
    assert!(requests.problems.is_empty(), "{:?}", requests.problems);
    for view in View::ALL {
        let mut screen = Screen::new(view);
        screen.detail = screen
            .selected_key(&snapshot)
            .map(|k| detail(&chipset, &snapshot, view, &k));
        let text = chipset_console::text(&screen, &snapshot, 120, 30);
        assert!(text.contains(view.title()), "{text}");
        assert!(!text.contains("! "), "a problem line:\n{text}");
    }
}

/// A nubos-pilot project's folder as the door's mail: the views count its
/// messages, and both headers say where mail is kept.
#[test]
fn the_views_read_and_name_a_mail_folder() {
    use chipset::store::StateDir;
    let tmp = tempfile::tempdir().unwrap();
    let folder = chipset_testkit::nubos_messages(tmp.path());
    let mut config = chipset::Config::default();
    config.mail_folder = Some(StateDir::open(&folder).unwrap());
    let state = StateDir::open(tmp.path().join(".chipset/state")).unwrap();
    let chipset = Chipset::with_config(state, config);
    let snapshot = Snapshot::load(&chipset).unwrap();
    let agents = snapshot.table(View::Agents);
    let names: Vec<&str> = agents.rows.iter().map(|r| r.key.as_str()).collect();
    assert!(names.contains(&"np-executor"), "{names:?}");
    let screen = Screen::new(View::Agents);
    let text = chipset_console::text(&screen, &snapshot, 200, 20);
    let shown = folder.canonicalize().unwrap();
    let header = text.lines().next().unwrap();
    assert!(
        header.contains(&format!("mail {}", shown.display())),
        "{header}"
    );
    let page = chipset_console::page(&snapshot, &screen, None, 1, None);
    assert!(
        page.contains(&format!("mail {}", shown.display())),
        "{page}"
    );
}

#[test]
fn a_hook_that_names_another_agent_is_a_pool_problem() {
    let peers = chipset_testkit::peer_fixtures();
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("state");
    std::fs::create_dir_all(root.join("hooks")).unwrap();
    // Its `agentId` is polecat-alpha: not a legal hook of `stranger`, and it
    // might hold a pool item, so the pool names it as a problem.
    std::fs::copy(
        peers.join("tibsfox/hooks/active.json"),
        root.join("hooks/stranger.json"),
    )
    .unwrap();
    let chipset = Chipset::open(&root).unwrap();
    let snapshot = Snapshot::load(&chipset).unwrap();
    let pool = snapshot.table(View::Pool);
    assert!(pool.rows.is_empty());
    assert!(
        pool.problems.iter().any(|p| p.contains("is corrupt")),
        "{pool:?}"
    );
    let stranger = &snapshot.table(View::Agents).rows[0];
    assert_eq!(stranger.cells[1], "corrupt");
}

/// Text other agents wrote (a reminder's message, a mail subject and
/// body) may hold escape sequences and line breaks: every view and its
/// detail show them escaped, so none reaches the operator's terminal
/// (one cleared the screen, retitled the window and left the alternate
/// screen).
#[test]
fn escape_sequences_others_wrote_never_reach_the_terminal() {
    use chipset::mail::NewMessage;
    use chipset::nudge::NewReminder;
    let tmp = tempfile::tempdir().unwrap();
    let chipset = Chipset::open(tmp.path().join("state")).unwrap();
    let evil = "x\u{1b}[2J\u{1b}]0;TITLE\u{7}\u{1b}[?1049l\r\nforged";
    let mut reminder = NewReminder {
        tenant_id: "default".into(),
        kind: "spec_draft".into(),
        source_type: "spec".into(),
        source_id: "s1".into(),
        message: evil.into(),
        ..NewReminder::default()
    };
    reminder.metadata.insert("agent".into(), "gus".into());
    chipset.reminders().open(&reminder).unwrap();
    let (a, gus) = ("a".parse().unwrap(), "gus".parse().unwrap());
    let task = "T1".parse().unwrap();
    let request = NewMessage::request(a, gus, task, "s", format!("body {evil}"));
    chipset.mail().send(&request).unwrap();
    let snapshot = Snapshot::load(&chipset).unwrap();
    for view in View::ALL {
        let mut screen = Screen::new(view);
        screen.detail = screen
            .selected_key(&snapshot)
            .map(|k| detail(&chipset, &snapshot, view, &k));
        for (w, h) in [(160, 40), (60, 12)] {
            let text = chipset_console::text(&screen, &snapshot, w, h);
            assert!(
                text.lines().all(|l| !l.contains(char::is_control)),
                "{view:?}:\n{text:?}"
            );
        }
    }
    let reminders = Screen::new(View::Reminders);
    let text = chipset_console::text(&reminders, &snapshot, 200, 20);
    assert!(text.contains("x\\u{1b}[2J"), "{text}");
}

/// The Requests view said "every commit gate passes" when the inboxes
/// could not be listed (a folder in `mail/inbox/` that is no agent's),
/// and "0 tasks" blocked when a message could not be read, though the
/// gate of every task is closed then: it says so now, and names why.
#[test]
#[allow(
    clippy::disallowed_methods,
    reason = "plants what another program left"
)]
fn requests_say_every_gate_is_closed_when_a_file_they_need_is_unreadable() {
    use chipset::mail::NewMessage;
    let tmp = tempfile::tempdir().unwrap();
    let chipset = Chipset::open(tmp.path().join("state")).unwrap();
    let (mayor, dave) = ("mayor".parse().unwrap(), "dave".parse().unwrap());
    let request = NewMessage::request(mayor, dave, "T-dave".parse().unwrap(), "s", "b");
    chipset.mail().send(&request).unwrap();
    let inbox = tmp.path().join("state/mail/inbox");
    let requests = |chipset: &Chipset| {
        let snapshot = Snapshot::load(chipset).unwrap();
        snapshot.table(View::Requests).clone()
    };
    let table = requests(&chipset);
    assert_eq!(table.summary, "1 open request blocks the commit of 1 task");
    assert!(table.problems.is_empty(), "{:?}", table.problems);

    let torn = inbox.join("dave/1772706900123-9b3e0c1a-5d2f-4e1b-8a6c-0123456789ab.json");
    std::fs::write(&torn, "{\"broken").unwrap();
    let table = requests(&Chipset::open(tmp.path().join("state")).unwrap());
    assert!(
        table.summary.ends_with("every gate is closed"),
        "{}",
        table.summary
    );
    assert!(
        table
            .problems
            .iter()
            .any(|p| p.starts_with("inbox of dave: ")),
        "{:?}",
        table.problems
    );
    assert!(
        table
            .problems
            .iter()
            .any(|p| p.starts_with("task T-dave: gate closed")),
        "{:?}",
        table.problems
    );
    // On a short terminal, without the detail pane, the footer counts
    // the problem lines it cannot show.
    let snapshot = Snapshot::load(&Chipset::open(tmp.path().join("state")).unwrap()).unwrap();
    let short = chipset_console::text(&Screen::new(View::Requests), &snapshot, 100, 18);
    assert!(!short.contains("inbox of dave"), "{short}");
    assert!(
        short.contains("unreadable (a taller window lists them)"),
        "{short}"
    );
    std::fs::remove_file(&torn).unwrap();

    std::fs::create_dir(inbox.join("a\\b")).unwrap();
    let table = requests(&Chipset::open(tmp.path().join("state")).unwrap());
    assert_eq!(
        table.summary,
        "the inboxes cannot be read: every commit gate is closed"
    );
    assert!(
        table.problems[0].starts_with("inboxes: "),
        "{:?}",
        table.problems
    );
}

/// A nubos request of a phase no chipset task can have (`plan/phase-1`)
/// is another program's task's: the view names it as unreadable here, but
/// says the gates still answer, as they do.
#[test]
#[allow(
    clippy::disallowed_methods,
    reason = "plants what another program left"
)]
fn a_request_of_another_programs_task_closes_no_gate_in_the_view() {
    let peers = chipset_testkit::peer_fixtures();
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("state");
    chipset_testkit::copy_dir(&peers.join("nubos-pilot/messages"), &root.join("mail"));
    let inbox = root.join("mail/inbox/np-executor");
    let (open, _) = std::fs::read_dir(&inbox)
        .unwrap()
        .map(|e| e.unwrap().path())
        .map(|p| (std::fs::read_to_string(&p).unwrap(), p))
        .next()
        .unwrap();
    let foreign = open
        .replace("M005-S007-T0002", "plan/phase-1")
        .replace("1795408569995-7a703292", "1795408569996-0b2c6a43");
    assert_ne!(foreign, open);
    let path = inbox.join("1795408569996-0b2c6a43-f1d1-4900-b635-8fd9f1df7f88.json");
    std::fs::write(&path, foreign).unwrap();
    let chipset = Chipset::open(&root).unwrap();
    let table = Snapshot::load(&chipset)
        .unwrap()
        .table(View::Requests)
        .clone();
    assert_eq!(table.summary, "1 open request blocks the commit of 1 task");
    assert_eq!(table.problems.len(), 1, "{:?}", table.problems);
    assert!(
        table.problems[0].starts_with("inbox of np-executor: ")
            && table.problems[0].contains("`plan/phase-1`"),
        "{:?}",
        table.problems
    );
}

/// A queue's detail names an unreadable event file as the doctor does,
/// not as a Rust debug dump, and counts it beside the pending events.
#[test]
#[allow(clippy::disallowed_methods, reason = "plants a torn event file")]
fn a_queue_detail_names_an_unreadable_event() {
    use chipset::bus::NewEvent;
    let tmp = tempfile::tempdir().unwrap();
    let chipset = Chipset::open(tmp.path().join("state")).unwrap();
    let dave = "dave".parse().unwrap();
    let _ = chipset
        .bus()
        .publish(&dave, &NewEvent::new("w", "k"))
        .unwrap();
    let queue = tmp.path().join("state/bus/dave/queue");
    let name = std::fs::read_dir(&queue)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .find(|n| n.ends_with(".json"))
        .unwrap();
    std::fs::write(queue.join(&name), "{\"broken").unwrap();
    let snapshot = Snapshot::load(&chipset).unwrap();
    let d = detail(&chipset, &snapshot, View::Queues, "dave");
    let text = d.lines.join("\n");
    assert!(
        text.contains("bus: 0 events pending and 1 unreadable"),
        "{text}"
    );
    assert!(
        text.contains(&format!("unreadable: `{}", queue.join(&name).display())),
        "{text}"
    );
    assert!(!text.contains("Corrupt("), "{text}");
}

/// An agent's detail shows what it said of itself (program, model, host,
/// note), its latest nudge's message without marking it read, and its
/// inbox past an unreadable message, which it names.
#[test]
#[allow(clippy::disallowed_methods, reason = "plants a torn message")]
fn an_agent_detail_shows_its_profile_nudge_and_readable_mail() {
    use chipset::directory::Registration;
    use chipset::mail::NewMessage;
    use chipset::nudge::{NewNudge, NudgeType, Received};
    let tmp = tempfile::tempdir().unwrap();
    let chipset = Chipset::open(tmp.path().join("state")).unwrap();
    let gus: chipset::store::AgentId = "gus".parse().unwrap();
    let mut me = Registration::new();
    me.program = Some("claude-code".into());
    me.model = Some("opus".into());
    me.host = Some("build-3".into());
    me.note = Some("on call".into());
    chipset.directory().register(&gus, &me).unwrap();
    let witness = "witness".parse().unwrap();
    let check = NewNudge::new(witness, NudgeType::HealthCheck, "alive?");
    let _ = chipset.nudges().send(&gus, &check).unwrap();
    let note = NewMessage::notify(
        "a".parse().unwrap(),
        gus.clone(),
        "T1".parse().unwrap(),
        "s",
        "b",
    );
    chipset.mail().send(&note).unwrap();
    let torn = tmp
        .path()
        .join("state/mail/inbox/gus/1772706900123-9b3e0c1a-5d2f-4e1b-8a6c-0123456789ab.json");
    std::fs::write(&torn, "{\"broken").unwrap();
    let snapshot = Snapshot::load(&chipset).unwrap();
    let text = detail(&chipset, &snapshot, View::Agents, "gus")
        .lines
        .join("\n");
    for line in [
        "  program: claude-code",
        "  model: opus",
        "  host: build-3",
        "  note: on call",
        "inbox: 1 message",
    ] {
        assert!(text.lines().any(|l| l == line), "{line:?} in\n{text}");
    }
    assert!(
        text.contains("nudge (new): health_check from witness"),
        "{text}"
    );
    assert!(text.contains("ago: alive?"), "{text}");
    assert!(
        text.contains(&format!("  unreadable: `{}`", torn.display())),
        "{text}"
    );
    let latest = chipset.nudges().receive(&gus).unwrap();
    assert!(
        matches!(latest.value(), Some(Received::New(_))),
        "showing it marks nothing"
    );
}
