//! Each view drawn into ratatui's `TestBackend` from the fixed team, and
//! the keys that move between them.

use chipset_console::{Effect, Error, Key, Row, Screen, Snapshot, Table, View, detail, draw};
use ratatui::Terminal;
use ratatui::backend::TestBackend;

use crate::team::team;

fn frame(screen: &Screen, snapshot: &Snapshot) -> TestBackend {
    let mut terminal = Terminal::new(TestBackend::new(110, 34)).unwrap();
    terminal.draw(|f| draw(f, screen, snapshot)).unwrap();
    terminal.backend().clone()
}

fn snapshot_of(team: &crate::team::Team) -> Snapshot {
    let mut s = Snapshot::load(&team.chipset).unwrap();
    // The temporary folder's name changes from run to run.
    s.root = "/work/team/.chipset/state".into();
    s
}

/// The row of `key` in `table`.
fn row<'a>(table: &'a Table, key: &str) -> &'a Row {
    let found = table.rows.iter().find(|r| r.key == key);
    found.unwrap_or_else(|| panic!("no row {key} in {table:?}"))
}

fn settings() -> insta::Settings {
    let mut settings = insta::Settings::clone_current();
    // Reminder ids are random (a uuid v4 after the time), and the table
    // may cut them.
    settings.add_filter(r"\b\d{13}-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f-]*", "[id]");
    settings
}

#[test]
fn every_view_draws_from_a_fixed_state_and_clock() {
    let team = team();
    let snapshot = snapshot_of(&team);
    let _guard = settings().bind_to_scope();
    for view in View::ALL {
        let mut screen = Screen::new(view);
        screen.detail = screen
            .selected_key(&snapshot)
            .map(|k| detail(&team.chipset, &snapshot, view, &k));
        insta::assert_snapshot!(view.name(), frame(&screen, &snapshot));
    }
}

#[test]
fn the_stalled_agent_is_marked_and_the_gate_speaks() {
    let team = team();
    let s = snapshot_of(&team);
    let agents = s.table(View::Agents);
    let alpha = row(agents, "polecat-alpha");
    assert!(
        alpha.cells.iter().any(|c| c.contains("STALLED")),
        "{alpha:?}"
    );
    let beta = row(agents, "polecat-beta");
    assert!(
        !beta.cells.iter().any(|c| c.contains("STALLED")),
        "{beta:?}"
    );
    let requests = s.table(View::Requests);
    assert_eq!(requests.rows.len(), 1);
    assert!(
        requests
            .summary
            .contains("1 open request blocks the commit of 1 task"),
        "{}",
        requests.summary
    );
}

#[test]
fn keys_switch_views_search_and_select() {
    let team = team();
    let s = snapshot_of(&team);
    let mut screen = Screen::default();
    assert_eq!(screen.selected_key(&s).as_deref(), Some("polecat-alpha"));
    assert_eq!(screen.press(Key::Down, &s), Effect::Select);
    assert_eq!(screen.selected_key(&s).as_deref(), Some("polecat-beta"));
    assert_eq!(
        screen.press(Key::Down, &s),
        Effect::Redraw,
        "the last row stays"
    );
    assert_eq!(screen.press(Key::Home, &s), Effect::Select);
    for c in "/beta".chars() {
        screen.press(Key::Char(c), &s);
    }
    assert!(screen.searching);
    assert_eq!(screen.press(Key::Enter, &s), Effect::Select);
    assert_eq!(screen.selected_key(&s).as_deref(), Some("polecat-beta"));
    insta::assert_snapshot!("agents_searched", frame(&screen, &s));
    // `q` while not typing quits; a view key switches and keeps each search.
    assert_eq!(screen.press(Key::Char('l'), &s), Effect::Select);
    assert_eq!(screen.view, View::Leases);
    assert_eq!(screen.filter(), "");
    screen.press(Key::Char('a'), &s);
    assert_eq!(screen.filter(), "beta");
    assert_eq!(screen.press(Key::Esc, &s), Effect::Select);
    assert_eq!(screen.filter(), "");
    assert_eq!(screen.press(Key::Tab, &s), Effect::Select);
    assert_eq!(screen.view, View::Requests);
    assert_eq!(screen.press(Key::BackTab, &s), Effect::Select);
    assert_eq!(screen.view, View::Agents);
    assert_eq!(screen.press(Key::Char('q'), &s), Effect::Quit);
    assert_eq!(screen.press(Key::Interrupt, &s), Effect::Quit);
}

#[test]
fn a_search_that_matches_nothing_says_so_and_selects_nothing() {
    let team = team();
    let s = snapshot_of(&team);
    let mut screen = Screen::default();
    screen.set_filter("no-such-agent".repeat(800));
    assert_eq!(screen.selected_key(&s), None);
    let text = chipset_console::text(&screen, &s, 80, 20);
    assert!(text.contains("(nothing here)"), "{text}");
}

#[test]
fn a_vanished_root_is_an_error_not_an_empty_team() {
    let team = team();
    let root = team.chipset.state().root().to_owned();
    std::fs::remove_dir_all(&root).unwrap();
    let err = Snapshot::load(&team.chipset).unwrap_err();
    assert!(matches!(err, Error::RootGone { .. }), "{err:?}");
    assert!(err.to_string().contains("no longer exists"), "{err}");
    // The last view is drawn with the error on its last line.
    let mut screen = Screen::default();
    screen.error = Some(err.to_string());
    let last = Snapshot::load(&crate::team::team().chipset).unwrap();
    let text = chipset_console::text(&screen, &last, 100, 20);
    assert!(
        text.lines().last().unwrap().contains("error: state root"),
        "{text}"
    );
}

#[test]
fn the_detail_refuses_keys_that_are_not_ids() {
    let team = team();
    let s = snapshot_of(&team);
    for view in View::ALL {
        let d = detail(&team.chipset, &s, view, "../../etc/passwd");
        let text = d.lines.join("\n");
        assert!(!text.contains("root:"), "{text}");
    }
    let d = detail(&team.chipset, &s, View::Agents, "../../etc/passwd");
    assert_eq!(d.title, "nothing to show");
}

#[test]
fn a_request_shows_its_thread() {
    let team = team();
    let s = snapshot_of(&team);
    let key = &s.table(View::Requests).rows[0].key;
    let d = detail(&team.chipset, &s, View::Requests, key);
    assert!(
        d.lines[0].contains("critic → polecat-alpha: review-parser"),
        "{d:?}"
    );
    assert!(
        d.lines[1].contains("The error path drops the span."),
        "{d:?}"
    );
}

/// Each pool row's item and state.
fn states(pool: &chipset_console::Table) -> Vec<(&str, &str)> {
    pool.rows
        .iter()
        .map(|r| (r.key.as_str(), r.cells[1].as_str()))
        .collect()
}

#[test]
fn the_pool_lists_items_by_state_and_shows_an_item() {
    let team = team();
    let s = snapshot_of(&team);
    let pool = s.table(View::Pool);
    assert_eq!(
        states(pool),
        [
            ("bd-102", "claimed (pending)"),
            ("bd-103", "ready"),
            ("bd-104", "blocked"),
            ("bd-105", "deferred"),
            ("bd-099", "done"),
        ]
    );
    assert_eq!(pool.rows[0].cells[3], "polecat-beta", "claimed by whom");
    assert!(pool.rows[2].cells[6].contains("bd-102, bd-103"), "{pool:?}");
    let d = detail(&team.chipset, &s, View::Pool, "bd-102");
    assert!(d.lines.iter().any(|l| l == "Keep MSRV."), "{d:?}");
    let d = detail(&team.chipset, &s, View::Pool, "no-such-item");
    assert!(d.lines.iter().any(|l| l.contains("no-such-item")), "{d:?}");
}

/// A corrupt hook is a problem of the pool's view, not its end: every
/// item is listed, and those the hook might hold are marked unconfirmed,
/// in `top` and on the page `serve` draws.
#[test]
fn a_corrupt_hook_leaves_the_pool_listed_and_is_a_problem() {
    let team = team();
    let hooks = team.chipset.state().root().join("hooks");
    std::fs::write(hooks.join("ghost.json"), "{").unwrap();
    let s = snapshot_of(&team);
    let pool = s.table(View::Pool);
    assert_eq!(
        states(pool),
        [
            ("bd-102", "claimed (pending)"),
            ("bd-103", "ready?"),
            ("bd-104", "blocked?"),
            ("bd-105", "deferred?"),
            ("bd-099", "done"),
        ]
    );
    assert!(pool.rows[1].cells[6].starts_with("unconfirmed"), "{pool:?}");
    assert!(
        pool.problems
            .iter()
            .any(|p| p.starts_with("unreadable hook:") && p.contains("hooks/ghost.json")),
        "{pool:?}"
    );
    assert!(pool.summary.contains("3 unconfirmed"), "{}", pool.summary);
    let page = chipset_console::page(&s, &Screen::new(View::Pool), None, 1, None);
    assert!(page.contains("ghost.json"), "{page}");
    assert!(page.contains("ready?"), "{page}");
}

#[test]
fn a_second_load_sees_what_changed_and_keeps_the_rest() {
    let team = team();
    let loader = chipset_console::Loader::new();
    let first = loader.load(&team.chipset).unwrap();
    assert!(loader.changed(), "the first load reads everything");
    let again = loader.load(&team.chipset).unwrap();
    assert_eq!(first, again, "nothing changed");
    // Once every stamp is old enough to trust, a load reads no file.
    std::thread::sleep(std::time::Duration::from_millis(2_100));
    let _ = loader.load(&team.chipset).unwrap();
    assert!(!loader.changed(), "an idle root");
    let gamma = crate::team::id("polecat-gamma");
    let _ = team
        .chipset
        .pool()
        .claim(&gamma, &"bd-103".parse().unwrap())
        .unwrap();
    let after = loader.load(&team.chipset).unwrap();
    assert!(loader.changed());
    assert_eq!(after.table(View::Agents).rows.len(), 3, "a new hook");
    let claimed = &after.table(View::Pool).rows[1];
    assert_eq!(
        (claimed.key.as_str(), claimed.cells[3].as_str()),
        ("bd-103", "polecat-gamma")
    );
    assert_eq!(after.table(View::Requests), first.table(View::Requests));
}

/// The selection follows its row, not its place: an agent added above the
/// selected one leaves it selected; when the selected row goes, the row
/// now at its place is selected and `follow` says so (its detail must be
/// loaded again, never shown under the old row's name).
#[test]
fn the_selection_follows_its_row_across_loads() {
    let team = team();
    let before = snapshot_of(&team);
    let mut screen = Screen::new(View::Agents);
    let keys = |s: &Snapshot| -> Vec<String> {
        s.table(View::Agents)
            .rows
            .iter()
            .map(|r| r.key.clone())
            .collect()
    };
    let second = keys(&before)[1].clone();
    assert!(screen.select_key(&before, &second));
    team.chipset
        .hooks()
        .assign(
            &crate::team::id("aaa-new"),
            "bd-900".parse().unwrap(),
            "new",
            None,
        )
        .unwrap();
    let after = snapshot_of(&team);
    assert_eq!(keys(&after)[0], "aaa-new", "a row above the selected one");
    assert!(!screen.follow(&before, &after));
    assert_eq!(screen.selected_key(&after), Some(second.clone()));
    // The selected row gone (the state before it was added, loaded
    // again): another is selected, and `follow` says so.
    assert!(screen.select_key(&after, "aaa-new"));
    assert!(screen.follow(&after, &before));
    assert_eq!(screen.selected_key(&before), Some(keys(&before)[0].clone()));
}

#[test]
fn an_area_that_cannot_be_read_shows_unknown_never_none() {
    let team = team();
    let root = team.chipset.state().root().to_owned();
    // A folder that is a file: its listing fails, as an unreadable one does.
    for area in ["hooks", "reminders", "leases"] {
        std::fs::remove_dir_all(root.join(area)).unwrap();
        std::fs::write(root.join(area), "not a folder").unwrap();
    }
    let s = snapshot_of(&team);
    let agents = s.table(View::Agents);
    let alpha = row(agents, "polecat-alpha");
    // HOOK, BEAD, AGE and LAST SEEN are unknown, not "no hook".
    assert_eq!(alpha.cells[1..5], ["?", "?", "?", "?"], "{alpha:?}");
    assert!(agents.problems.iter().any(|p| p.starts_with("hooks:")));
    assert!(agents.summary.ends_with("? open reminders"), "{agents:?}");
    // Stalls are read from the hooks: without them, none is known.
    assert!(agents.summary.contains(", ? stalled, "), "{agents:?}");
    for (view, what) in [(View::Reminders, "reminders"), (View::Leases, "leases")] {
        let table = s.table(view);
        assert_eq!(table.summary, format!("the {what} cannot be read"));
        assert!(table.problems[0].starts_with(what), "{table:?}");
        let tabs = format!("{:?}", frame(&Screen::new(view), &s));
        assert!(tabs.contains(&format!("{} ?", view.title())), "{tabs}");
        let page = chipset_console::page(&s, &Screen::new(view), None, 1, None);
        assert!(page.contains(&format!(">{} ?</a>", view.title())), "{page}");
    }
    // The readable areas are still listed.
    assert!(
        !s.table(View::Queues).rows.is_empty(),
        "{:?}",
        s.table(View::Queues)
    );
}

#[test]
fn the_quick_first_frame_counts_the_requests_it_has_not_read_as_unknown() {
    let team = team();
    let loader = chipset_console::Loader::new();
    let quick = loader.load_quick(&team.chipset).unwrap();
    let requests = quick.table(View::Requests);
    assert_eq!(requests.summary, "reading the inboxes…");
    let tabs = format!("{:?}", frame(&Screen::new(View::Agents), &quick));
    assert!(tabs.contains("Requests ?"), "{tabs}");
    // Once read, the count is there (the team has one open request).
    let full = loader.load(&team.chipset).unwrap();
    let tabs = format!("{:?}", frame(&Screen::new(View::Agents), &full));
    assert!(tabs.contains("Requests 1"), "{tabs}");
}
