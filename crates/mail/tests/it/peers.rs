//! Files written by the real peer programs, driven through the library: the
//! nubos-pilot folder of `../shared/fixtures/peers/` (written by its own
//! `lib/messaging.cjs`, see the fixtures' README), and a folder chipset
//! writes, read back with the field set and types of nubos's `message.v1`
//! schema.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use chipset_mail::{ArchiveOutcome, Error, Kind, Location, Mail, MailConfig, NewMessage};
use chipset_store::DoctorMode;
use chipset_store::StateDir;
use serde_json::Value;

use crate::{agent, mid, response, task};

pub(crate) const TASK: &str = "M005-S007-T0002";
/// The open request (round null), in `inbox/np-executor/`.
pub(crate) const OPEN: &str = "1795408569995-7a703292-f1d1-4900-b635-8fd9f1df7f88";
/// The answered request (round 2), in `archive/`.
pub(crate) const ANSWERED: &str = "1795408570001-af0bcc55-dbc3-4b45-a04f-312f26ea7034";
/// The response to it, in `inbox/np-critic/`.
pub(crate) const RESPONSE: &str = "1795408570002-ed4443a2-9829-4dff-88f9-08c209e1cd7d";
/// The notify (round null), in `archive/`.
pub(crate) const NOTIFY: &str = "1795408570003-75cc7e8e-a13b-4e74-9d9e-e8bc5cdb65c9";

/// Returns `fixtures/peers/`: `$CHIPSET_PEER_FIXTURES` when set, else
/// `<workspace>/../shared/fixtures/peers` (where CI keeps it). Fails the test
/// when it is missing: these tests are never skipped.
pub(crate) fn peers() -> PathBuf {
    let dir = std::env::var_os("CHIPSET_PEER_FIXTURES")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/fixtures/peers")
        });
    assert!(
        dir.join("nubos-pilot/messages").is_dir(),
        "the peer fixtures are missing at `{}`: check out `shared` beside the workspace \
         or set CHIPSET_PEER_FIXTURES",
        dir.display()
    );
    dir
}

/// A nubos project holding a copy of the fixture folder, and chipset's
/// mail over it in place.
pub(crate) struct Nubos {
    _tmp: tempfile::TempDir,
    pub(crate) folder: PathBuf,
    pub(crate) mail: Mail,
}

pub(crate) fn nubos() -> Nubos {
    let tmp = tempfile::tempdir().unwrap();
    let folder = chipset_testkit::nubos_messages(tmp.path());
    let mail = Mail::in_folder(StateDir::open(&folder).unwrap(), MailConfig::default());
    Nubos {
        _tmp: tmp,
        folder,
        mail,
    }
}

/// Every regular file under `dir` (relative path → bytes).
/// Every file under `dir` with its bytes, but chipset's caches (`.gate/`,
/// rebuilt from the files; not part of the seed's layout).
pub(crate) fn files(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
        for entry in fs::read_dir(dir).unwrap() {
            let entry = entry.unwrap();
            let path = entry.path();
            if entry.file_name() == ".gate" {
                continue;
            }
            if entry.file_type().unwrap().is_dir() {
                walk(root, &path, out);
            } else {
                out.insert(
                    path.strip_prefix(root).unwrap().to_owned(),
                    fs::read(&path).unwrap(),
                );
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

fn ids(messages: &[chipset_mail::Message]) -> Vec<&str> {
    messages.iter().map(|m| m.id.as_str()).collect()
}

#[test]
fn the_nubos_folder_reads_in_place() {
    let n = nubos();
    let m = &n.mail;
    let open = m.inbox(&agent("np-executor")).unwrap();
    assert_eq!(ids(&open), [OPEN]);
    assert_eq!(open[0].round, None);
    assert_eq!(open[0].kind, Kind::Request);
    assert_eq!(open[0].subject, "dead-code");
    assert_eq!(open[0].in_reply_to, None);
    let answers = m.inbox(&agent("np-critic")).unwrap();
    assert_eq!(ids(&answers), [RESPONSE]);
    assert_eq!(answers[0].round, Some(2));
    assert_eq!(answers[0].in_reply_to, Some(mid(ANSWERED)));

    for (id, location) in [
        (OPEN, Location::Inbox(agent("np-executor"))),
        (ANSWERED, Location::Archive),
        (RESPONSE, Location::Inbox(agent("np-critic"))),
        (NOTIFY, Location::Archive),
    ] {
        assert!(m.find(&mid(id)).unwrap().is_some(), "{id}");
        assert_eq!(m.locate(&mid(id)).unwrap(), Some(location), "{id}");
    }
    assert_eq!(ids(&m.pending_replies(&task(TASK)).unwrap()), [OPEN]);
    assert!(m.has_reply(&mid(ANSWERED)).unwrap());
    assert!(!m.has_reply(&mid(OPEN)).unwrap());
    for id in [ANSWERED, RESPONSE] {
        assert_eq!(ids(&m.thread(&mid(id)).unwrap()), [ANSWERED, RESPONSE]);
    }
    assert_eq!(ids(&m.thread(&mid(OPEN)).unwrap()), [OPEN]);
    // nubos's manifest lines are another program's records: kept, not errors.
    let manifest = m.read_manifest().unwrap();
    assert_eq!(crate::foreign(&manifest), 6);
    let log = crate::manifest_log(m);
    assert!(log.bad_lines.is_empty() && log.torn_tail.is_none());
}

#[test]
fn doctor_fix_moves_nothing_in_the_nubos_folder() {
    let n = nubos();
    let before = files(&n.folder);
    let report = n.mail.doctor(DoctorMode::Check).unwrap();
    assert_eq!(report.scanned, 4);
    // nubos's folder as nubos left it is clean: its response is not in
    // chipset's reply index, which is chipset's cache, not nubos's layout.
    assert!(report.is_clean(), "{:?}", crate::seen(&report));
    let fixed = n.mail.doctor(DoctorMode::Fix).unwrap();
    assert!(fixed.is_clean(), "{:?}", crate::seen(&fixed));
    assert_eq!(files(&n.folder), before, "the fix wrote or moved nothing");
    assert_eq!(ids(&n.mail.pending_replies(&task(TASK)).unwrap()), [OPEN]);
}

#[test]
fn archive_answer_and_sweep_the_nubos_folder() {
    let n = nubos();
    let m = &n.mail;
    let before = files(&n.folder);
    assert!(matches!(
        m.archive(&mid(OPEN)),
        Err(Error::ArchiveWithoutReply { .. })
    ));
    assert_eq!(files(&n.folder), before, "a refusal changes nothing");
    assert_eq!(
        m.archive(&mid(ANSWERED)).unwrap(),
        ArchiveOutcome::AlreadyArchived(Location::Archive)
    );
    assert!(matches!(
        m.archive(&mid(RESPONSE)).unwrap(),
        ArchiveOutcome::Archived(_)
    ));
    // A move keeps a foreign file's bytes exactly (key order, `run_id`-style extras).
    let moved = Path::new("archive").join(format!("{RESPONSE}.json"));
    assert_eq!(
        files(&n.folder)[&moved],
        before[&Path::new("inbox/np-critic").join(format!("{RESPONSE}.json"))]
    );

    // chipset answers nubos's open request: that archives it and opens the gate.
    let answer = m
        .send(&NewMessage::response(
            agent("np-executor"),
            agent("np-critic"),
            mid(OPEN),
            "dead-code",
            "yes, it was unused",
        ))
        .unwrap();
    assert_eq!(answer.task(), &task(TASK));
    assert_eq!(m.locate(&mid(OPEN)).unwrap(), Some(Location::Archive));
    assert!(m.pending_replies(&task(TASK)).unwrap().is_empty());
    assert_eq!(
        ids(&m.thread(&answer.id).unwrap()),
        [OPEN, answer.id.as_str()]
    );

    let swept = m.sweep_task_on_commit(&task(TASK)).unwrap();
    assert_eq!((swept.moved, swept.total), (5, 5));
    let after = files(&n.folder);
    for id in [OPEN, ANSWERED, NOTIFY] {
        let name = format!("{id}.json");
        let was = before
            .iter()
            .find(|(p, _)| p.file_name().unwrap() == name.as_str())
            .unwrap()
            .1;
        assert_eq!(
            &after[&Path::new("archive/by-task").join(TASK).join(&name)],
            was
        );
    }
    // The audit log keeps nubos's lines byte for byte and adds chipset's after them.
    let manifest = &after[Path::new("manifest.jsonl")];
    assert!(manifest.starts_with(&before[Path::new("manifest.jsonl")]));
    // Nothing is left for the doctor: nubos's response is not in chipset's
    // reply index, which nothing in nubos's folder needs.
    let report = m.doctor(DoctorMode::Check).unwrap();
    assert!(report.is_clean(), "{:?}", crate::seen(&report));
}

/// Puts the answered request back where nubos leaves it after sending the
/// response (nubos does not move a request when it is answered).
fn request_still_in_inbox(n: &Nubos) {
    fs::rename(
        n.folder.join(format!("archive/{ANSWERED}.json")),
        n.folder.join(format!("inbox/np-executor/{ANSWERED}.json")),
    )
    .unwrap();
}

#[test]
fn a_response_another_program_wrote_answers_at_once() {
    let n = nubos();
    request_still_in_inbox(&n);
    let m = &n.mail;
    // No reply index exists, no doctor has run: the response file decides.
    assert!(!n.folder.join("replies").exists());
    assert_eq!(ids(&m.pending_replies(&task(TASK)).unwrap()), [OPEN]);
    assert!(m.has_reply(&mid(ANSWERED)).unwrap());
    assert!(matches!(
        m.archive(&mid(ANSWERED)).unwrap(),
        ArchiveOutcome::Archived(_)
    ));
    // The archive entered the response in the index: the next look is the fast one.
    assert!(
        n.folder
            .join(format!("replies/{ANSWERED}/response-{RESPONSE}.json"))
            .is_file()
    );
}

#[test]
fn a_response_archived_by_another_program_still_answers() {
    let n = nubos();
    request_still_in_inbox(&n);
    // The critic read the answer and archived it, as nubos's `archive` does.
    fs::rename(
        n.folder.join(format!("inbox/np-critic/{RESPONSE}.json")),
        n.folder.join(format!("archive/{RESPONSE}.json")),
    )
    .unwrap();
    let m = &n.mail;
    assert_eq!(ids(&m.pending_replies(&task(TASK)).unwrap()), [OPEN]);
    assert!(m.has_reply(&mid(ANSWERED)).unwrap());
    assert_eq!(
        ids(&m.thread(&mid(ANSWERED)).unwrap()),
        [ANSWERED, RESPONSE]
    );
    assert!(matches!(
        m.archive(&mid(ANSWERED)).unwrap(),
        ArchiveOutcome::Archived(_)
    ));
}

#[test]
fn a_response_that_does_not_fit_answers_nothing() {
    let n = nubos();
    request_still_in_inbox(&n);
    // The same response, but from someone the request was not addressed to.
    let path = n.folder.join(format!("inbox/np-critic/{RESPONSE}.json"));
    let text = fs::read_to_string(&path)
        .unwrap()
        .replace("\"from\": \"np-executor\"", "\"from\": \"np-bystander\"");
    fs::write(&path, text).unwrap();
    let m = &n.mail;
    assert_eq!(
        ids(&m.pending_replies(&task(TASK)).unwrap()),
        [OPEN, ANSWERED]
    );
    assert!(!m.has_reply(&mid(ANSWERED)).unwrap());
    assert!(matches!(
        m.archive(&mid(ANSWERED)),
        Err(Error::ArchiveWithoutReply { .. })
    ));
}

/// Checks `v` against nubos-pilot's `message.v1` schema (as listed in the
/// fixtures' README and in nubos's `lib/schemas/data/message.v1.json`) and
/// returns every violation.
pub(crate) fn message_v1_violations(v: &Value) -> Vec<String> {
    fn slug(s: &str) -> bool {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    }
    fn nubos_id(s: &str) -> bool {
        let Some((ms, uuid)) = s.split_once('-') else {
            return false;
        };
        let groups: Vec<&str> = uuid.split('-').collect();
        !ms.is_empty()
            && ms.bytes().all(|b| b.is_ascii_digit())
            && groups.iter().map(|g| g.len()).eq([8, 4, 4, 4, 12])
            && groups.iter().all(|g| {
                g.bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
            })
    }
    let mut bad = Vec::new();
    let Some(obj) = v.as_object() else {
        return vec!["not an object".to_owned()];
    };
    for key in [
        "id",
        "from",
        "to",
        "phase",
        "kind",
        "subject",
        "body",
        "created_at",
    ] {
        if !obj.contains_key(key) {
            bad.push(format!("missing required `{key}`"));
        }
    }
    let s = |k: &str| obj.get(k).and_then(Value::as_str);
    if obj.contains_key("id") && !s("id").is_some_and(nubos_id) {
        bad.push("`id` is not `<unix-ms>-<uuid>`".into());
    }
    for k in ["from", "to"] {
        if obj.contains_key(k) && !s(k).is_some_and(slug) {
            bad.push(format!("`{k}` does not match ^[a-zA-Z0-9_-]+$"));
        }
    }
    for k in ["phase", "subject"] {
        if obj.contains_key(k) && s(k).is_none_or(str::is_empty) {
            bad.push(format!("`{k}` is not a non-empty string"));
        }
    }
    if let Some(round) = obj.get("round")
        && !(round.is_null() || round.is_u64())
    {
        bad.push("`round` is not a non-negative integer or null".into());
    }
    if obj.contains_key("kind")
        && !s("kind").is_some_and(|k| ["request", "response", "notify"].contains(&k))
    {
        bad.push("`kind` is not request, response or notify".into());
    }
    if obj.contains_key("body") && s("body").is_none_or(|b| b.len() > 262_144) {
        bad.push("`body` is not a string of at most 262144 bytes".into());
    }
    if let Some(e) = obj.get("expects_reply")
        && !e.is_boolean()
    {
        bad.push("`expects_reply` is not a boolean".into());
    }
    if let Some(r) = obj.get("in_reply_to")
        && !(r.is_null() || r.is_string())
    {
        bad.push("`in_reply_to` is not a string or null".into());
    }
    if obj.contains_key("created_at") && s("created_at").is_none() {
        bad.push("`created_at` is not a string".into());
    }
    bad
}

#[test]
fn the_schema_check_rejects_what_nubos_rejects() {
    let good: Value = serde_json::from_slice(
        &fs::read(peers().join(format!(
            "nubos-pilot/messages/inbox/np-executor/{OPEN}.json"
        )))
        .unwrap(),
    )
    .unwrap();
    assert_eq!(message_v1_violations(&good), Vec::<String>::new());
    for (key, value) in [
        ("from", Value::from("np.critic")),
        ("to", Value::from("np executor")),
        ("round", Value::from(-1)),
        ("round", Value::from("2")),
        ("kind", Value::from("question")),
        ("id", Value::from("1-a")),
        ("expects_reply", Value::from("yes")),
        ("in_reply_to", Value::from(7)),
        ("body", Value::from("x".repeat(262_145))),
    ] {
        let mut bad = good.clone();
        bad[key] = value;
        assert_eq!(message_v1_violations(&bad).len(), 1, "{key}");
    }
}

#[test]
fn a_folder_chipset_writes_has_nubos_message_v1_fields_and_types() {
    let tmp = tempfile::tempdir().unwrap();
    let folder = tmp.path().join(".nubos-pilot/messages");
    let m = Mail::in_folder(StateDir::open(&folder).unwrap(), MailConfig::default());
    let q = m
        .send(&NewMessage::request(
            agent("np-critic"),
            agent("np-executor"),
            task(TASK),
            "dead-code",
            "did you intend to delete FoobarService?",
        ))
        .unwrap();
    m.send(
        &NewMessage::request(
            agent("np-critic"),
            agent("np-executor"),
            task(TASK),
            "style",
            "",
        )
        .with_round(crate::MAX_ROUND),
    )
    .unwrap();
    m.send(&response(
        "np-executor",
        "np-critic",
        &q.id,
        "dead-code",
        "ümlaut \"quoted\"\nnew line",
    ))
    .unwrap();
    m.send(
        &NewMessage::notify(
            agent("np-orchestrator"),
            agent("np-executor"),
            task(TASK),
            "round-started",
            "x".repeat(chipset_mail::MailConfig::default().max_body),
        )
        .with_round(2),
    )
    .unwrap();
    let mut checked = 0;
    for (path, bytes) in files(&folder) {
        let top = path.components().next().unwrap().as_os_str();
        if top != "inbox" && top != "archive" {
            continue;
        }
        let v: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(
            message_v1_violations(&v),
            Vec::<String>::new(),
            "{}",
            path.display()
        );
        // The fields a nubos reader uses, with their types.
        assert!(v["expects_reply"].is_boolean());
        assert!(v["round"].is_null() || v["round"].is_u64());
        assert!(v["in_reply_to"].is_null() || v["in_reply_to"].is_string());
        // The file lives where nubos looks for it.
        let name = format!("{}.json", v["id"].as_str().unwrap());
        assert_eq!(path.file_name().unwrap().to_str().unwrap(), name);
        checked += 1;
    }
    assert_eq!(checked, 4);
}

#[test]
fn index_entries_and_manifest_records_of_others_are_never_rewritten() {
    let n = nubos();
    request_still_in_inbox(&n);
    // An index entry another writer made, with fields chipset does not know.
    let marker = n
        .folder
        .join(format!("replies/{ANSWERED}/response-{RESPONSE}.json"));
    fs::create_dir_all(marker.parent().unwrap()).unwrap();
    let marker_bytes = br#"{"written_by":"someone-else","id":"x"}"#;
    fs::write(&marker, marker_bytes).unwrap();
    let manifest = n.folder.join("manifest.jsonl");
    let mut log = fs::read(&manifest).unwrap();
    log.extend_from_slice(b"{\"event\":\"sent\",\"id\":\"1-a\",\"future_field\":{\"x\":1}}\n");
    fs::write(&manifest, &log).unwrap();

    let m = &n.mail;
    assert!(matches!(
        m.archive(&mid(ANSWERED)).unwrap(),
        ArchiveOutcome::Archived(_)
    ));
    m.doctor(DoctorMode::Fix).unwrap();
    m.sweep_task_on_commit(&task(TASK)).unwrap();
    assert_eq!(fs::read(&marker).unwrap(), marker_bytes);
    assert!(fs::read(&manifest).unwrap().starts_with(&log));
    assert_eq!(crate::foreign(&m.read_manifest().unwrap()), 7);
}

/// The fallback skips a folder whose mtime says nothing entered it since the
/// request was sent (what keeps a big, quiet `archive/` off the gate's
/// path); a wrong skip can only keep a request pending.
#[test]
fn a_folder_unchanged_since_the_request_is_not_searched() {
    let n = nubos();
    request_still_in_inbox(&n);
    fs::rename(
        n.folder.join(format!("inbox/np-critic/{RESPONSE}.json")),
        n.folder.join(format!("archive/{RESPONSE}.json")),
    )
    .unwrap();
    let archive = fs::File::open(n.folder.join("archive")).unwrap();
    let set = |t: std::time::SystemTime| archive.set_modified(t).unwrap();
    // The request was sent at 2026-11-23T04:36:10.001Z.
    let sent = std::time::UNIX_EPOCH + std::time::Duration::from_millis(1_795_408_570_001);
    set(sent - std::time::Duration::from_secs(3600));
    assert!(!n.mail.has_reply(&mid(ANSWERED)).unwrap());
    assert_eq!(
        ids(&n.mail.pending_replies(&task(TASK)).unwrap()),
        [OPEN, ANSWERED]
    );
    set(sent + std::time::Duration::from_millis(5));
    assert!(n.mail.has_reply(&mid(ANSWERED)).unwrap());
    assert_eq!(ids(&n.mail.pending_replies(&task(TASK)).unwrap()), [OPEN]);
}

/// Names outside the seed schema are refused on send, but a file already on
/// disk that uses one still reads (and is answered) like any other.
#[test]
fn names_outside_the_schema_are_refused_on_send_and_read_from_disk() {
    let n = nubos();
    let refused = n.mail.send(&NewMessage::notify(
        agent("np.critic"),
        agent("np-executor"),
        task(TASK),
        "style",
        "",
    ));
    assert!(matches!(
        refused,
        Err(Error::InvalidAgentName { field: "from", .. })
    ));
    let path = n.folder.join(format!("inbox/np-executor/{OPEN}.json"));
    let text = fs::read_to_string(&path)
        .unwrap()
        .replace("\"from\": \"np-critic\"", "\"from\": \"np.critic\"");
    fs::write(&path, text).unwrap();
    let inbox = n.mail.inbox(&agent("np-executor")).unwrap();
    assert_eq!(inbox[0].from.as_str(), "np.critic");
    assert_eq!(ids(&n.mail.pending_replies(&task(TASK)).unwrap()), [OPEN]);
}

/// nubos takes any non-empty phase; chipset's task names are path-safe.
/// A request of a phase no task can be named (`plan/phase-1`) is another
/// program's: it is unsupported, not corrupt, so it closes no gate and
/// the doctor leaves it; a file that is broken besides still closes every
/// gate.
#[test]
fn a_phase_no_task_can_have_closes_no_gate() {
    const FOREIGN: &str = "1795408569996-0b2c6a43-6f3e-4c1e-9a4e-2d1f0e9c7b11";
    let n = nubos();
    let m = &n.mail;
    let path = n.folder.join(format!("inbox/np-executor/{FOREIGN}.json"));
    let open = fs::read_to_string(n.folder.join(format!("inbox/np-executor/{OPEN}.json"))).unwrap();
    let foreign = open.replace(OPEN, FOREIGN).replace(
        &format!("\"phase\": \"{TASK}\""),
        "\"phase\": \"plan/phase-1\"",
    );
    assert_ne!(
        foreign,
        open.replace(OPEN, FOREIGN),
        "the fixture names its phase"
    );
    fs::write(&path, &foreign).unwrap();
    let before = files(&n.folder);

    // Twice: the second gate answers from its cache.
    for _ in 0..2 {
        assert_eq!(ids(&m.pending_replies(&task(TASK)).unwrap()), [OPEN]);
        assert!(m.pending_replies(&task("other-task")).unwrap().is_empty());
    }
    // Readers that must show it say what they cannot read.
    let listing = m.inbox_listing(&agent("np-executor")).unwrap();
    assert_eq!(ids(&listing.items), [OPEN]);
    assert!(listing.corrupt.is_empty(), "{:?}", listing.corrupt);
    let [u] = &listing.unsupported[..] else {
        panic!("{:?}", listing.unsupported)
    };
    assert_eq!(u.path, path);
    assert!(chipset_mail::Message::foreign_task(u), "{u}");
    assert!(u.to_string().contains("`plan/phase-1`"), "{u}");
    match m.inbox(&agent("np-executor")) {
        Err(Error::Unsupported(e)) => assert_eq!(e, *u),
        other => panic!("{other:?}"),
    }
    // The doctor reports it and moves nothing; the sweep leaves it.
    let report = n.mail.doctor(DoctorMode::Fix).unwrap();
    assert_eq!(
        crate::seen(&report)
            .iter()
            .map(|(code, ..)| *code)
            .collect::<Vec<_>>(),
        ["messaging-unsupported-file"]
    );
    assert_eq!(files(&n.folder), before, "the fix wrote or moved nothing");
    m.sweep_task_on_commit(&task("other-task")).unwrap();
    assert!(path.exists());

    // Broken besides its phase (no subject): corrupt, and every gate closes.
    let broken = foreign.replace("\"subject\": \"dead-code\",", "");
    assert_ne!(broken, foreign);
    fs::write(&path, broken).unwrap();
    for t in [TASK, "other-task"] {
        let err = m.pending_replies(&task(t)).unwrap_err();
        assert_eq!(err.corruption().map(|c| &c.path), Some(&path), "{err}");
    }
    let listing = m.inbox_listing(&agent("np-executor")).unwrap();
    assert_eq!((listing.corrupt.len(), listing.unsupported.len()), (1, 0));
}
