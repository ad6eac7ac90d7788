//! Bad input, damaged and deleted indexes, the doctor, and what a
//! catch-up reads.

use std::time::Duration;

use chipset_bus::{Bus, NewEvent};
use chipset_hook::Hooks;
use chipset_mail::{Mail, NewMessage};
use chipset_nudge::{KindRegistry, NewReminder, Reminders};
use chipset_search::{Error, MAX_QUERY_LEN, Origin, Query, SearchIndex};
use chipset_store::DoctorMode;
use chipset_testkit::{TempState, agent, task};
use serde_json::json;

use crate::keys;

fn team() -> (TempState, SearchIndex) {
    let tmp = TempState::new();
    let mail = Mail::new(tmp.state.clone());
    for (i, body) in [
        "the parser fails on CI",
        "deploy the parser fix",
        "review the flaky test",
    ]
    .iter()
    .enumerate()
    {
        mail.send(&NewMessage::notify(
            agent("np-critic"),
            agent("np-executor"),
            task("t-1"),
            format!("note-{i}"),
            *body,
        ))
        .unwrap();
    }
    let _ = Bus::new(tmp.state.clone())
        .publish(
            &agent("mayor"),
            &NewEvent::new("np-critic", "needs-input")
                .with_payload(json!({"why": "parser question"})),
        )
        .unwrap();
    Hooks::new(tmp.state.clone())
        .assign(
            &agent("polecat"),
            "bead-7".parse().unwrap(),
            "Rewrite the parser",
            Some(&agent("mayor")),
        )
        .unwrap();
    Reminders::new(tmp.state.clone(), KindRegistry::preset())
        .open(&NewReminder {
            tenant_id: "acme".into(),
            kind: "spec_draft".into(),
            source_type: "spec".into(),
            source_id: "parser-spec".into(),
            message: "Finish the parser spec".into(),
            ..NewReminder::default()
        })
        .unwrap();
    let search = SearchIndex::new(tmp.state.clone());
    (tmp, search)
}

#[test]
fn every_channel_is_searched_and_filtered() {
    let (_tmp, search) = team();
    let all = search.search(&Query::new("parser")).unwrap();
    let channels: std::collections::BTreeSet<Origin> = all.iter().map(|h| h.channel).collect();
    assert_eq!(channels, Origin::ALL.into_iter().collect());
    assert_eq!(all.len(), 5);
    let hook = search
        .search(&Query::new("parser").channel(Origin::Hook))
        .unwrap();
    assert_eq!(hook[0].title, "Rewrite the parser");
    assert_eq!(hook[0].from.as_deref(), Some("mayor"));
    assert_eq!(hook[0].task.as_deref(), Some("bead-7"));
    let bus = search.search(&Query::new("parser").to("mayor")).unwrap();
    assert_eq!(bus.len(), 1);
    assert_eq!(bus[0].kind.as_deref(), Some("needs-input"));
    assert_eq!(search.search(&Query::new("parser fix")).unwrap().len(), 1);
    assert_eq!(
        search
            .search(&Query::new("parser -fix").channel(Origin::Mail))
            .unwrap()
            .len(),
        1
    );
    assert_eq!(search.search(&Query::new("flaky OR fix")).unwrap().len(), 2);
    assert_eq!(
        search.search(&Query::new("pars*").limit(2)).unwrap().len(),
        2
    );
    assert_eq!(search.count(&Query::new("pars*").limit(2)).unwrap(), 5);
    assert_eq!(
        search
            .count(&Query::new("parser").channel(Origin::Mail))
            .unwrap(),
        2
    );
    assert_eq!(
        search.search(&Query::new("\"parser fix\"")).unwrap().len(),
        1
    );
    assert_eq!(
        search.search(&Query::new("\"fix parser\"")).unwrap().len(),
        0
    );
    // The title weighs more than the body: the hook titled "parser" ranks
    // above a message that only mentions it.
    let ranked = search
        .search(&Query::new("parser").to("polecat").limit(1))
        .unwrap();
    assert_eq!(ranked[0].channel, Origin::Hook);
}

#[test]
fn a_snippet_marks_the_match_and_is_not_the_whole_body() {
    let tmp = TempState::new();
    let long = format!(
        "{} the needle is here {}",
        "hay ".repeat(500),
        "hay ".repeat(500)
    );
    Mail::new(tmp.state.clone())
        .send(&NewMessage::notify(
            agent("a"),
            agent("b"),
            task("t"),
            "long-one",
            long.as_str(),
        ))
        .unwrap();
    let hits = SearchIndex::new(tmp.state.clone())
        .search(&Query::new("needle"))
        .unwrap();
    assert!(
        hits[0].snippet.contains("**needle**"),
        "{}",
        hits[0].snippet
    );
    assert!(hits[0].snippet.len() < 200, "{}", hits[0].snippet);
}

#[test]
fn bad_queries_get_typed_errors_and_nothing_panics() {
    let (_tmp, search) = team();
    for text in ["AND OR NOT", "- * ( ) :", "\"\"", "", "NOT parser"] {
        assert!(
            matches!(search.search(&Query::new(text)), Err(Error::NoWords)),
            "{text:?}"
        );
    }
    let long = "parser ".repeat(10_000 / 7 + 1);
    assert!(matches!(
        search.search(&Query::new(long.as_str())),
        Err(Error::QueryTooLong {
            max: MAX_QUERY_LEN,
            ..
        })
    ));
    let e = search.search(&Query::new("x".repeat(10_000))).unwrap_err();
    assert_eq!(
        e.to_string(),
        "the query is 10000 bytes long, over the 1024-byte limit"
    );
    assert!(matches!(
        "mailbox".parse::<Origin>(),
        Err(Error::UnknownChannel { .. })
    ));
    // Unknown values of the free filters match nothing.
    assert!(
        search
            .search(&Query::new("parser").from("nobody"))
            .unwrap()
            .is_empty()
    );
    assert!(
        search
            .search(&Query::new("parser").kind("no-such-kind"))
            .unwrap()
            .is_empty()
    );
    assert!(
        search
            .search(&Query::new("parser").task("../../etc"))
            .unwrap()
            .is_empty()
    );
    // Text that is FTS5 syntax is only words.
    for text in [
        "parser:",
        "title:parser",
        "parser^",
        "NEAR(parser fix)",
        "parser AND",
        "(parser",
        "'parser'",
    ] {
        search.search(&Query::new(text)).unwrap();
    }
    assert_eq!(
        search.search(&Query::new("parser").limit(0)).unwrap().len(),
        0
    );
}

#[test]
fn a_damaged_or_deleted_index_is_rebuilt_with_the_same_answers() {
    let (_tmp, search) = team();
    let q = Query::new("parser");
    let before = keys(&search.search(&q).unwrap());
    for damage in [&b"garbage"[..], &[0u8; 8192][..], b""] {
        std::fs::write(search.path(), damage).unwrap();
        assert_eq!(keys(&search.search(&q).unwrap()), before);
        let fresh = SearchIndex::new(_tmp.state.clone());
        assert_eq!(keys(&fresh.search(&q).unwrap()), before);
    }
    std::fs::remove_dir_all(search.path().parent().unwrap()).unwrap();
    let fresh = SearchIndex::new(_tmp.state.clone());
    assert_eq!(keys(&fresh.search(&q).unwrap()), before);
    // Half a file: a cut write, a disk that lost its tail.
    let bytes = std::fs::read(fresh.path()).unwrap();
    drop(fresh);
    std::fs::write(search.path(), &bytes[..bytes.len() / 2]).unwrap();
    let fresh = SearchIndex::new(_tmp.state.clone());
    assert_eq!(keys(&fresh.search(&q).unwrap()), before);
}

#[test]
fn the_doctor_finds_a_damaged_index_and_rebuilds_it() {
    let (_tmp, search) = team();
    let q = Query::new("parser");
    let before = keys(&search.search(&q).unwrap());
    assert!(search.doctor(DoctorMode::Check).unwrap().is_clean());
    std::fs::write(
        search.path(),
        b"not a database at all, just words and more words",
    )
    .unwrap();
    let report = search.doctor(DoctorMode::Check).unwrap();
    assert_eq!(report.findings.len(), 1);
    assert_eq!(report.findings[0].code, "search-index-damaged");
    let fixed = search.doctor(DoctorMode::Fix).unwrap();
    assert!(fixed.findings[0].is_fixed());
    assert!(search.doctor(DoctorMode::Check).unwrap().is_clean());
    assert_eq!(keys(&search.search(&q).unwrap()), before);
}

/// The doctor's check opens the index read-only: it writes nothing, so an
/// empty file (what a query that failed on a full disk leaves) is sound
/// and stays empty, rather than taken for damage when the check cannot
/// write the schema. A journal that a cut write left is rolled back, as
/// the next query would, and is no damage either.
#[test]
fn the_doctors_check_writes_nothing_and_rolls_back_a_cut_write() {
    let (_tmp, search) = team();
    let q = Query::new("parser");
    let before = keys(&search.search(&q).unwrap());
    let sound = std::fs::read(search.path()).unwrap();

    std::fs::write(search.path(), b"").unwrap();
    assert!(search.doctor(DoctorMode::Check).unwrap().is_clean());
    assert_eq!(
        std::fs::metadata(search.path()).unwrap().len(),
        0,
        "untouched"
    );

    // A write cut mid-transaction: pages of the index changed on disk and
    // their old contents in the journal beside it.
    std::fs::write(search.path(), &sound).unwrap();
    let journal = search.path().with_extension("sqlite3-journal");
    let conn = rusqlite::Connection::open(search.path()).unwrap();
    conn.execute_batch(
        "PRAGMA journal_mode = DELETE; PRAGMA cache_size = 2; BEGIN IMMEDIATE;
         DELETE FROM docs;
         CREATE TABLE filler(x);
         WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3000)
         INSERT INTO filler SELECT printf('%0200d', i) FROM n;",
    )
    .unwrap();
    let cut = (
        std::fs::read(search.path()).unwrap(),
        std::fs::read(&journal).unwrap(),
    );
    assert_ne!(
        cut.0, sound,
        "the transaction wrote pages before its commit"
    );
    conn.execute_batch("ROLLBACK").unwrap();
    drop(conn);
    std::fs::write(search.path(), &cut.0).unwrap();
    std::fs::write(&journal, &cut.1).unwrap();

    let fresh = SearchIndex::new(_tmp.state.clone());
    assert!(fresh.doctor(DoctorMode::Check).unwrap().is_clean());
    assert!(!journal.exists(), "rolled back");
    assert_eq!(keys(&fresh.search(&q).unwrap()), before);
}

#[test]
fn a_settled_catch_up_reads_only_what_changed() {
    let (tmp, search) = team();
    assert!(search.catch_up().unwrap().rebuilt);
    // Let every folder's stamp settle, then look once to record them.
    std::thread::sleep(Duration::from_millis(3100));
    search.catch_up().unwrap();
    assert_eq!(
        search.catch_up().unwrap().read,
        0,
        "nothing changed, nothing read"
    );
    let mail = Mail::new(tmp.state.clone());
    let m = mail
        .send(&NewMessage::notify(
            agent("mayor"),
            agent("np-critic"),
            task("t-2"),
            "late-news",
            "a parser regression",
        ))
        .unwrap();
    let got = search.search(&Query::new("regression")).unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].id, m.id.as_str());
    // Archiving moves the file; the message stays found.
    let _ = mail.archive(&m.id).unwrap();
    assert_eq!(search.search(&Query::new("regression")).unwrap().len(), 1);
    // An acknowledged event and a cleared hook leave the index.
    let bus = Bus::new(tmp.state.clone());
    let pending = bus.pending(&agent("mayor")).unwrap();
    let _ = bus.ack_event(&agent("mayor"), &pending.events[0]).unwrap();
    let hooks = Hooks::new(tmp.state.clone());
    crate::finish_hook(&hooks, &agent("polecat"));
    let left = search.search(&Query::new("parser")).unwrap();
    let channels: Vec<Origin> = left.iter().map(|h| h.channel).collect();
    assert!(
        !channels.contains(&Origin::Bus) && !channels.contains(&Origin::Hook),
        "{channels:?}"
    );
}

#[test]
fn since_keeps_only_newer_records() {
    let (_tmp, search) = team();
    let all = search.search(&Query::new("parser")).unwrap();
    let newest = all.iter().filter_map(|h| h.at).max().unwrap();
    let later = search.search(&Query::new("parser").since(newest)).unwrap();
    assert!(!later.is_empty() && later.len() < all.len());
    assert!(later.iter().all(|h| h.at.unwrap() >= newest));
}
