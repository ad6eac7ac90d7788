//! `chipset migrate` (issue 30, "Moving over"): a populated state moved
//! to another directory, to a PostgreSQL server and back; reruns, a run
//! killed mid-way, conflicts and bad roots. The server half runs when
//! `CHIPSET_TEST_PG` names a server; without it those tests say so and
//! pass.

#![cfg(feature = "postgres")]
#![allow(
    clippy::disallowed_methods,
    reason = "tests copy the peers' files in and compare trees, outside the store's API"
)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use chipset::bus::{ControlOp, NewEvent, Priority, Resource};
use chipset::directory::Registration;
use chipset::lease::{LeaseMode, LeaseRequest};
use chipset::mail::{ManifestEvent, NewMessage};
use chipset::migrate::{MigrateError, Migration, Report};
use chipset::nudge::{NewNudge, NewReminder, NudgeType};
use chipset::store::{AgentId, TaskId};
use chipset::{Chipset, Classify, ErrorKind, Root, ServerOptions, ServerUrl};

mod migrate_pool;
mod pg;

use migrate_pool::{pool_view, populate_pool};

fn agent(name: &str) -> AgentId {
    name.parse().unwrap()
}

fn task(name: &str) -> TaskId {
    name.parse().unwrap()
}

fn dir(path: &Path) -> Root {
    Root::Dir(path.to_owned())
}

/// A fresh schema for the test `name`, a temp folder whose `local/` is
/// the server's local folder, and the URL and options that open it;
/// `None` without a server (the test then says so and passes).
pub(crate) fn on_server(
    name: &str,
) -> Option<(pg::Server, tempfile::TempDir, ServerUrl, ServerOptions)> {
    let server = pg::Server::fresh(name)?;
    let tmp = tempfile::tempdir().unwrap();
    let (url, options) = (
        server.url.clone(),
        server.options(&tmp.path().join("local")),
    );
    Some((server, tmp, url, options))
}

/// Fills every channel the server door wires through the door's own
/// APIs, and copies the nubos-pilot peer's mail folder in when the
/// fixtures are there.
fn populate(root: &Path) {
    let door = Chipset::open(root).unwrap();
    let (mayor, alpha, beta) = (
        agent("mayor"),
        agent("polecat-alpha"),
        agent("polecat-beta"),
    );
    let t1 = task("gt-1");
    door.hooks()
        .assign(&alpha, "gt-1".parse().unwrap(), "Add README", Some(&mayor))
        .unwrap();
    door.hooks()
        .assign(&beta, "gt-2".parse().unwrap(), "Bump deps", Some(&mayor))
        .unwrap();
    let _ = door.hooks().pickup(&beta).unwrap();
    let ask = NewNudge::new(mayor.clone(), NudgeType::HealthCheck, "alive?");
    let _ = door.nudges().send(&alpha, &ask).unwrap();
    let got = door.nudges().read_and_mark(&alpha).unwrap();
    let chipset::store::ReadOutcome::Value(chipset::nudge::Received::New(got)) = got else {
        panic!("{got:?}")
    };
    let _ = door.nudges().respond(&alpha, &got, "yes").unwrap();
    let asked = door
        .mail()
        .send(&NewMessage::request(
            alpha.clone(),
            mayor.clone(),
            t1.clone(),
            "scope",
            "Usage?",
        ))
        .unwrap();
    door.mail()
        .send(&NewMessage::response(
            mayor.clone(),
            alpha.clone(),
            asked.id.clone(),
            "scope",
            "yes",
        ))
        .unwrap();
    door.mail()
        .send(&NewMessage::request(
            beta.clone(),
            mayor.clone(),
            t1.clone(),
            "open-one",
            "Still?",
        ))
        .unwrap();
    let note = door
        .mail()
        .send(&NewMessage::notify(
            mayor.clone(),
            beta.clone(),
            task("gt-2"),
            "hi",
            "b",
        ))
        .unwrap();
    let _ = door.mail().archive(&note.id).unwrap();
    let _ = door
        .bus()
        .publish(
            &alpha,
            &NewEvent::new("mayor", "k").with_priority(Priority::Critical),
        )
        .unwrap();
    let _ = door
        .bus()
        .publish(&alpha, &NewEvent::new("mayor", "j").with_dedup_key("once"))
        .unwrap();
    door.bus().ensure_queue(&beta).unwrap();
    let resource = Resource::new("chat", ".nbs/chat/debug.chat");
    door.bus()
        .control(&alpha, ControlOp::Register, &resource)
        .unwrap();
    door.bus().apply_control(&alpha).unwrap();
    door.bus()
        .control(&alpha, ControlOp::Register, &Resource::new("hub", "x"))
        .unwrap();
    door.reminders()
        .open(&NewReminder {
            tenant_id: "acme".into(),
            kind: "spec_draft".into(),
            source_type: "spec".into(),
            source_id: "parser-spec".into(),
            message: "Finish the parser spec".into(),
            ..NewReminder::default()
        })
        .unwrap();
    let req = LeaseRequest::new(alpha.clone(), LeaseMode::Exclusive, ["src/auth/**"]);
    let _ = door.leases().acquire(&req).unwrap();
    door.directory()
        .register(&alpha, &Registration::new())
        .unwrap();
    let peers = std::env::var_os("CHIPSET_PEER_FIXTURES")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/work/shared/fixtures/peers"))
        .join("nubos-pilot/messages");
    if peers.is_dir() {
        copy_tree(&peers, &root.join("mail"));
    }
}

/// Copies the files below `from` into `to`, keeping what `to` holds;
/// a manifest is appended to.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else if entry.file_name() == "manifest.jsonl" {
            let mut log = std::fs::read(&target).unwrap_or_default();
            log.extend(std::fs::read(entry.path()).unwrap());
            std::fs::write(&target, log).unwrap();
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// Every file below `root` that is not a dot-name (or below one), by its
/// path relative to `root`.
fn files(root: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries {
            let entry = entry.unwrap();
            if entry.file_name().to_string_lossy().starts_with('.') {
                continue;
            }
            if entry.file_type().unwrap().is_dir() {
                walk(root, &entry.path(), out);
            } else {
                let rel = entry
                    .path()
                    .strip_prefix(root)
                    .unwrap()
                    .display()
                    .to_string();
                out.insert(rel, std::fs::read(entry.path()).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
}

/// Checks that two trees hold the same files, byte for byte; a log's
/// records are the same JSON values (a log is kept in its canonical
/// form, sorted keys: another program's key order is not kept).
fn same_files(a: &BTreeMap<String, Vec<u8>>, b: &BTreeMap<String, Vec<u8>>) {
    let names = |m: &BTreeMap<String, Vec<u8>>| m.keys().cloned().collect::<Vec<_>>();
    assert_eq!(names(a), names(b));
    for (path, bytes) in a {
        if path.ends_with(".jsonl") {
            let values = |b: &[u8]| -> Vec<serde_json::Value> {
                b.split(|c| *c == b'\n')
                    .filter(|l| !l.is_empty())
                    .map(|l| serde_json::from_slice(l).unwrap())
                    .collect()
            };
            assert_eq!(values(bytes), values(&b[path]), "{path}");
        } else {
            assert!(*bytes == b[path], "{path} differs");
        }
    }
}

fn assert_verified(report: &Report) {
    assert!(report.verified(), "{report:#?}");
}

/// What a reader sees, channel by channel, through the door.
fn observe(door: &Chipset) -> Vec<String> {
    let mut seen = Vec::new();
    for a in [
        "mayor",
        "polecat-alpha",
        "polecat-beta",
        "np-executor",
        "np-critic",
    ] {
        let a = agent(a);
        seen.push(format!("hook {a}: {:?}", door.hooks().read(&a).unwrap()));
        seen.push(format!(
            "nudge {a}: {:?}",
            door.nudges().read_latest(&a).unwrap()
        ));
        let inbox: Vec<_> = door
            .mail()
            .inbox(&a)
            .unwrap()
            .into_iter()
            .map(|m| m.id)
            .collect();
        seen.push(format!("inbox {a}: {inbox:?}"));
        let pending: Vec<_> = door
            .bus()
            .pending(&a)
            .unwrap()
            .events
            .into_iter()
            .map(|e| e.id)
            .collect();
        seen.push(format!("bus {a}: {pending:?}"));
        seen.push(format!(
            "available {a}: {:?}",
            door.bus().is_available(&a).unwrap()
        ));
    }
    for t in ["gt-1", "gt-2", "M005-S007-T0002"] {
        let gate: Vec<_> = door
            .mail()
            .pending_replies(&task(t))
            .unwrap()
            .into_iter()
            .map(|m| m.id)
            .collect();
        seen.push(format!("gate {t}: {gate:?}"));
    }
    let records = door.mail().read_manifest().unwrap();
    let foreign = records
        .iter()
        .filter(|e| matches!(e, ManifestEvent::Foreign(_)))
        .count();
    seen.push(format!(
        "manifest: {} events, {foreign} foreign",
        records.len() - foreign,
    ));
    seen.push(format!("leases: {:?}", door.leases().list().unwrap()));
    let roster = door.directory().list(&Default::default()).unwrap();
    let profiles: Vec<_> = roster
        .items
        .iter()
        .map(|a| format!("{:?}", a.profile))
        .collect();
    seen.push(format!("directory: {profiles:?}"));
    let open = door.reminders().list(&Default::default()).unwrap();
    seen.push(format!("reminders open: {open:?}"));
    seen
}

#[test]
fn a_directory_moves_to_another_directory_byte_for_byte_and_once() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    populate(&a);
    let report = Migration::new(dir(&a), dir(&b)).run().unwrap();
    assert_verified(&report);
    assert!(report.written() > 10, "{report:#?}");
    // Into an empty target, what is written is what is counted: a reply
    // index entry (written too) is in neither count.
    for line in &report.channels {
        assert_eq!(line.written, line.source, "{line:#?}");
    }
    same_files(&files(&a), &files(&b));
    let again = Migration::new(dir(&a), dir(&b)).run().unwrap();
    assert_verified(&again);
    assert_eq!(again.written(), 0, "{again:#?}");
    assert_eq!(again.channels, {
        let mut c = report.channels.clone();
        for line in &mut c {
            line.present = line.source;
            line.written = 0;
        }
        c
    });
}

#[test]
fn a_conflicting_value_is_refused_and_nothing_is_written() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    populate(&a);
    std::fs::create_dir_all(b.join("mail")).unwrap();
    std::fs::create_dir_all(b.join("hooks")).unwrap();
    std::fs::write(b.join("hooks/polecat-beta.json"), "{}\n").unwrap();
    let before = files(&b);
    let err = Migration::new(dir(&a), dir(&b)).run().unwrap_err();
    assert!(
        matches!(&err, MigrateError::Conflict { key } if key == "hooks/polecat-beta.json"),
        "{err}"
    );
    assert_eq!(files(&b), before, "nothing written");
}

#[test]
fn bad_roots_are_typed_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("missing");
    let err = Migration::new(dir(&missing), dir(&tmp.path().join("b")))
        .run()
        .unwrap_err();
    assert!(matches!(err, MigrateError::NoSource { .. }), "{err}");
    assert_eq!(err.kind(), ErrorKind::NotFound);
    let a = tmp.path().join("a");
    populate(&a);
    let err = Migration::new(dir(&a), dir(&a)).run().unwrap_err();
    assert!(matches!(err, MigrateError::SameRoot { .. }), "{err}");
    assert_eq!(err.kind(), ErrorKind::Invalid, "bad input exits 2");
    std::fs::create_dir_all(a.join("notes")).unwrap();
    let err = Migration::new(dir(&a), dir(&tmp.path().join("b")))
        .run()
        .unwrap_err();
    assert!(
        matches!(&err, MigrateError::Unknown { folder } if folder == "notes"),
        "{err}"
    );
    assert_eq!(err.kind(), ErrorKind::Refused);
    // Once the copy began, any failure may follow writes: run again.
    let cut = MigrateError::Unfinished(Box::new(MigrateError::Conflict { key: "x".into() }));
    assert_eq!(cut.kind(), ErrorKind::OutcomeUnknown);
    let bad = Root::parse("postgres://nobody:s3cret@127.0.0.1:1/none?connect_timeout=2");
    let err = Migration::new(dir(&a), bad)
        .skip("notes")
        .run()
        .unwrap_err();
    assert!(matches!(err, MigrateError::Open { .. }), "{err}");
    assert!(!err.to_string().contains("s3cret"), "{err}");
}

#[test]
fn a_state_goes_to_a_server_and_back_equal() {
    let Some((_server, tmp, url, options)) = on_server("a_state_goes_to_a_server_and_back_equal")
    else {
        return;
    };
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    populate(&a);
    let pg = Root::Server(url.clone());
    let up = Migration::new(dir(&a), pg.clone())
        .server_options(options.clone())
        .run()
        .unwrap();
    assert_verified(&up);
    let on_server = Chipset::open_server(&url, &options).unwrap();
    let source = Chipset::open(&a).unwrap();
    assert_eq!(observe(&source), observe(&on_server));

    let again = Migration::new(dir(&a), pg.clone())
        .server_options(options.clone())
        .run()
        .unwrap();
    assert_eq!(again.written(), 0, "{again:#?}");

    let down = Migration::new(pg.clone(), dir(&b))
        .server_options(options.clone())
        .run()
        .unwrap();
    assert_verified(&down);
    let back = Chipset::open(&b).unwrap();
    assert_eq!(observe(&source), observe(&back));
    // The seeds' contracts come back byte for byte.
    let (from, to) = (files(&a), files(&b));
    for (path, bytes) in &from {
        let contract = path.starts_with("hooks/")
            || path.starts_with("nudge/")
            || (path.starts_with("mail/")
                && !path.starts_with("mail/replies/")
                && path.ends_with(".json"));
        if contract {
            assert_eq!(to.get(path), Some(bytes), "{path}");
        }
    }
    // Nothing of the server's own index came down.
    assert!(
        to.keys()
            .all(|p| !p.starts_with("mail/ids/") && !p.starts_with("mail/open/"))
    );
    assert!(
        to.keys()
            .all(|p| !p.starts_with("mail/task/") && !p.ends_with("available.json"))
    );
    let back_again = Migration::new(pg, dir(&b))
        .server_options(options)
        .run()
        .unwrap();
    assert_eq!(back_again.written(), 0, "{back_again:#?}");
}

/// The child of the killed run: migrates and never returns on its own
/// terms before the parent kills it.
#[test]
fn killed_child_entry() {
    let Some(role) = chipset_testkit::child_role() else {
        return;
    };
    let (from, to, schema) = (role.arg(0), role.arg(1), role.arg(2));
    let mut options = ServerOptions::default();
    options.schema = Some(schema.to_owned());
    options.local = Some(PathBuf::from(role.arg(3)));
    let report = Migration::new(Root::parse(from), Root::parse(to))
        .server_options(options)
        .run()
        .unwrap();
    assert!(report.verified());
}

#[test]
fn a_run_killed_mid_way_completes_on_the_rerun_without_duplicates() {
    let Some((_server, tmp, url, options)) =
        on_server("a_run_killed_mid_way_completes_on_the_rerun_without_duplicates")
    else {
        return;
    };
    let a = tmp.path().join("a");
    populate(&a);
    populate_pool(&a);
    let door = Chipset::open(&a).unwrap();
    let drafts: Vec<NewMessage> = (0..600)
        .map(|i| {
            NewMessage::notify(
                agent("mayor"),
                agent(if i % 2 == 0 {
                    "polecat-alpha"
                } else {
                    "polecat-beta"
                }),
                task("bulk"),
                "bulk",
                format!("message {i}"),
            )
        })
        .collect();
    for chunk in drafts.chunks(100) {
        door.mail().send_batch(chunk).unwrap();
    }
    let schema = options.schema.clone().unwrap();
    let mut sql = postgres::Client::connect(url.expose(), postgres::NoTls).unwrap();
    let rows = |sql: &mut postgres::Client| rows(sql, &schema).unwrap_or(0);
    let args = [
        a.display().to_string(),
        url.expose().to_owned(),
        schema.clone(),
        options.local.as_ref().unwrap().display().to_string(),
    ];
    let mut child = chipset_testkit::spawn("killed_child_entry", "migrate", &args);
    let started = std::time::Instant::now();
    while rows(&mut sql) < 200 {
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "the child wrote nothing"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    chipset_testkit::kill9(&mut child);
    let partial = rows(&mut sql);
    let pg = Root::Server(url.clone());
    let report = Migration::new(dir(&a), pg.clone())
        .server_options(options.clone())
        .run()
        .unwrap();
    assert_verified(&report);
    let mail = report
        .channels
        .iter()
        .find(|c| c.channel == "mail")
        .unwrap();
    assert!(mail.present > 0 && mail.written > 0, "{report:#?}");
    assert!(
        rows(&mut sql) > partial,
        "the child was killed before it finished"
    );
    let on_server = Chipset::open_server(&url, &options).unwrap();
    let source = Chipset::open(&a).unwrap();
    assert_eq!(observe(&source), observe(&on_server));
    assert_eq!(pool_view(&source), pool_view(&on_server));
    let (here, there) = (
        source.mail().read_manifest().unwrap(),
        on_server.mail().read_manifest().unwrap(),
    );
    let foreign = |records: &[ManifestEvent]| {
        records
            .iter()
            .filter(|e| matches!(e, ManifestEvent::Foreign(_)))
            .count()
    };
    assert_eq!(
        here.len() - foreign(&here),
        there.len() - foreign(&there),
        "no duplicated records"
    );
    assert_eq!(foreign(&here), foreign(&there));
    let again = Migration::new(dir(&a), pg)
        .server_options(options)
        .run()
        .unwrap();
    assert_eq!(again.written(), 0);
}

/// How many values and log records the server's `schema` holds.
fn rows(sql: &mut postgres::Client, schema: &str) -> Result<i64, postgres::Error> {
    let count = format!(
        "SELECT (SELECT count(*) FROM {schema}.chipset_entries) \
         + (SELECT count(*) FROM {schema}.chipset_log_records)"
    );
    sql.query_one(&count, &[]).map(|r| r.get(0))
}

/// Makes the server refuse every value and log record under `prefix`, as
/// a disk full or a revoked grant would, until [`allow`] is called.
fn refuse(sql: &mut postgres::Client, schema: &str, prefix: &str) {
    sql.batch_execute(&format!(
        "CREATE OR REPLACE FUNCTION {schema}.refuse() RETURNS trigger \
         LANGUAGE plpgsql AS $$ BEGIN \
           IF coalesce(to_jsonb(NEW)->>'dir', to_jsonb(NEW)->>'log') \
              LIKE TG_ARGV[0] THEN RAISE EXCEPTION 'refused by the test'; END IF; \
           RETURN NEW; END $$; \
         CREATE TRIGGER refuse_entries BEFORE INSERT OR UPDATE \
           ON {schema}.chipset_entries FOR EACH ROW \
           EXECUTE FUNCTION {schema}.refuse('{prefix}%'); \
         CREATE TRIGGER refuse_records BEFORE INSERT OR UPDATE \
           ON {schema}.chipset_log_records FOR EACH ROW \
           EXECUTE FUNCTION {schema}.refuse('{prefix}%');"
    ))
    .unwrap();
}

fn allow(sql: &mut postgres::Client, schema: &str) {
    sql.batch_execute(&format!(
        "DROP TRIGGER refuse_entries ON {schema}.chipset_entries; \
         DROP TRIGGER refuse_records ON {schema}.chipset_log_records;"
    ))
    .unwrap();
}

#[test]
fn a_write_refused_part_way_is_unfinished_and_the_rerun_finishes() {
    let Some((server, tmp, url, options)) =
        on_server("a_write_refused_part_way_is_unfinished_and_the_rerun_finishes")
    else {
        return;
    };
    let a = tmp.path().join("a");
    populate(&a);
    // Opening the door creates the schema's tables, empty.
    drop(server.open(&tmp.path().join("local")));
    let schema = server.schema.clone();
    let mut sql = postgres::Client::connect(url.expose(), postgres::NoTls).unwrap();
    let rows = |sql: &mut postgres::Client| rows(sql, &schema).unwrap();
    let pg = Root::Server(url.clone());
    let migrate = || {
        Migration::new(dir(&a), pg.clone())
            .server_options(options.clone())
            .run()
    };

    // The first channel refused: nothing was written, so the error is the
    // write's own, not an unfinished run.
    refuse(&mut sql, &schema, "hooks");
    let err = migrate().unwrap_err();
    assert!(!matches!(err, MigrateError::Unfinished(_)), "{err:?}");
    assert_eq!(rows(&mut sql), 0, "{err}");
    allow(&mut sql, &schema);

    // The bus refused after hooks, nudges, reminders and mail went in:
    // the run says it stopped part way, and that its outcome is unknown.
    refuse(&mut sql, &schema, "bus");
    let err = migrate().unwrap_err();
    assert!(matches!(err, MigrateError::Unfinished(_)), "{err:?}");
    assert_eq!(err.kind(), ErrorKind::OutcomeUnknown);
    assert!(err.to_string().contains("run it again"), "{err}");
    let partial = rows(&mut sql);
    assert!(partial > 0, "hooks, nudges and mail were written first");

    // Once the server takes writes again, the same run finishes the copy
    // without writing what is there twice.
    allow(&mut sql, &schema);
    let report = migrate().unwrap();
    assert_verified(&report);
    let channel = |name: &str| report.channels.iter().find(|c| c.channel == name).unwrap();
    assert!(channel("hooks").present > 0 && channel("hooks").written == 0);
    assert!(channel("bus").written > 0 && channel("bus").present == 0);
    let on_server = Chipset::open_server(&url, &options).unwrap();
    assert_eq!(observe(&Chipset::open(&a).unwrap()), observe(&on_server));
    assert_eq!(migrate().unwrap().written(), 0);
}
