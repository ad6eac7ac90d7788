//! `chipset bus prune`: each limit removes the oldest acknowledged events
//! and keeps the newest, queued events are never touched, no limit is a
//! usage error, one agent or all, the JSON view, an I/O failure, and the
//! same on a PostgreSQL server.

use std::fs;
use std::path::PathBuf;

use serde_json::{Value, json};

use crate::server::{chipset, run, server};
use crate::{Env, snap, tree};

/// An old instant, as the bus writes them: any age limit in days removes it.
const LONG_AGO: &str = "2020-01-01T00:00:00.000Z";

/// Publishes an event of `kind` to `to` (with `key` as its de-duplication
/// key) and returns its id.
fn publish(env: &Env, to: &str, kind: &str, key: Option<&str>) -> String {
    let mut args = vec![
        "bus", "publish", "--to", to, "--source", "w", "--kind", kind,
    ];
    if let Some(key) = key {
        args.extend(["--dedup-key", key]);
    }
    let run = env.run(&args);
    assert_eq!(run.code, 0, "{}", run.stderr);
    run.line()
}

/// Publishes `acked` events to `to` and acknowledges them, then `queued`
/// more left unacknowledged.
fn fill(env: &Env, to: &str, acked: usize, queued: usize) {
    for _ in 0..acked {
        let id = publish(env, to, "done", None);
        let run = env.run(&["bus", "ack", to, &id]);
        assert_eq!(run.code, 0, "{}", run.stderr);
    }
    for _ in 0..queued {
        publish(env, to, "waiting", None);
    }
}

/// The files in `agent`'s bus folder `folder`, oldest first (one priority,
/// so the names sort as the ids do), with their sizes.
fn files(env: &Env, agent: &str, folder: &str) -> Vec<(PathBuf, u64)> {
    let dir = env.root().join("bus").join(agent).join(folder);
    let Ok(read) = fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut out: Vec<(PathBuf, u64)> = read
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .map(|p| {
            let len = fs::metadata(&p).unwrap().len();
            (p, len)
        })
        .collect();
    out.sort();
    out
}

/// Sets the JSON field `field` of the file at `path` to `value`.
fn backdate(path: &std::path::Path, field: &str, value: &str) {
    let mut doc: Value = serde_json::from_slice(&fs::read(path).unwrap()).unwrap();
    doc[field] = json!(value);
    fs::write(path, serde_json::to_vec_pretty(&doc).unwrap()).unwrap();
}

/// The one agent's line of a `--json bus prune` document.
fn line(doc: &Value, agent: &str) -> Value {
    let agents = doc["agents"].as_array().unwrap();
    assert_eq!(agents.len(), 1, "{doc}");
    assert_eq!(agents[0]["agent"], agent, "{doc}");
    agents[0].clone()
}

/// Checks that the prune that printed `doc` removed the `n` oldest of
/// ann's acknowledged events `before`, said so with their bytes, and
/// left the `queued` events alone.
fn removed_oldest(
    env: &Env,
    doc: &Value,
    before: &[(PathBuf, u64)],
    n: usize,
    queued: &[(PathBuf, u64)],
) {
    let removed: u64 = before[..n].iter().map(|f| f.1).sum();
    assert_eq!(
        line(doc, "ann"),
        json!({"agent": "ann", "events": n, "bytes": removed, "dedup_records": 0})
    );
    assert_eq!(files(env, "ann", "processed"), before[n..]);
    assert_eq!(files(env, "ann", "queue"), queued);
}

#[test]
fn keep_removes_the_oldest_and_never_a_queued_event() {
    let mut env = Env::new();
    fill(&env, "ann", 4, 2);
    let before = files(&env, "ann", "processed");
    let queued = files(&env, "ann", "queue");
    assert_eq!((before.len(), queued.len()), (4, 2));
    let doc = env
        .ok(&["--json", "bus", "prune", "--agent", "ann", "--keep", "2"])
        .json();
    removed_oldest(&env, &doc, &before, 2, &queued);
    // Again: nothing more to remove.
    let doc = env
        .ok(&["--json", "bus", "prune", "--agent", "ann", "--keep", "2"])
        .json();
    assert_eq!(line(&doc, "ann")["events"], 0);
    // Keep none: every acknowledged event goes, every queued one stays.
    env.ok(&["bus", "prune", "--agent", "ann", "--keep", "0"]);
    assert!(files(&env, "ann", "processed").is_empty());
    assert_eq!(files(&env, "ann", "queue"), queued);
    let pending = env.ok(&["--json", "bus", "pending", "ann"]).json();
    assert_eq!(pending["events"].as_array().unwrap().len(), 2);
}

#[test]
fn max_bytes_keeps_the_newest_that_fit() {
    let mut env = Env::new();
    fill(&env, "ann", 4, 1);
    let before = files(&env, "ann", "processed");
    let queued = files(&env, "ann", "queue");
    // The two newest fit exactly; the third newest would not.
    let fit = (before[2].1 + before[3].1).to_string();
    let doc = env
        .ok(&["--json", "bus", "prune", "--max-bytes", &fit])
        .json();
    removed_oldest(&env, &doc, &before, 2, &queued);
    // One byte less: only the newest fits.
    let less = (before[2].1 + before[3].1 - 1).to_string();
    env.ok(&["bus", "prune", "--max-bytes", &less]);
    assert_eq!(files(&env, "ann", "processed"), before[3..]);
    // No byte: none fits; the queue is no part of the limit.
    env.ok(&["bus", "prune", "--max-bytes", "0"]);
    assert!(files(&env, "ann", "processed").is_empty());
    assert_eq!(files(&env, "ann", "queue"), queued);
}

#[test]
fn older_than_removes_only_the_old_events() {
    let mut env = Env::new();
    fill(&env, "ann", 3, 1);
    let queued = files(&env, "ann", "queue");
    let processed = files(&env, "ann", "processed");
    // The two oldest were published long ago; so, it says, was the queued one.
    for (path, _) in &processed[..2] {
        backdate(path, "created_at", LONG_AGO);
    }
    backdate(&queued[0].0, "created_at", LONG_AGO);
    let queued = files(&env, "ann", "queue");
    let before = files(&env, "ann", "processed");
    let doc = env
        .ok(&["--json", "bus", "prune", "--older-than", "1d"])
        .json();
    removed_oldest(&env, &doc, &before, 2, &queued);
    // The newest is younger than a day, but not than a millisecond.
    std::thread::sleep(std::time::Duration::from_millis(5));
    env.ok(&["bus", "prune", "--older-than", "1ms"]);
    assert!(files(&env, "ann", "processed").is_empty());
    assert_eq!(files(&env, "ann", "queue"), queued);
}

#[test]
fn dedup_older_than_removes_only_old_records() {
    let mut env = Env::new();
    for key in ["old", "new"] {
        let id = publish(&env, "ann", "keyed", Some(key));
        assert_eq!(env.run(&["bus", "ack", "ann", &id]).code, 0);
    }
    let dedup = env.root().join("bus/ann/dedup");
    backdate(&dedup.join("old.json"), "accepted_at", LONG_AGO);
    let processed = files(&env, "ann", "processed");
    let doc = env
        .ok(&["--json", "bus", "prune", "--dedup-older-than", "1d"])
        .json();
    assert_eq!(
        line(&doc, "ann"),
        json!({"agent": "ann", "events": 0, "bytes": 0, "dedup_records": 1})
    );
    assert!(!dedup.join("old.json").exists());
    assert!(dedup.join("new.json").exists());
    // No event limit: the events stay.
    assert_eq!(files(&env, "ann", "processed"), processed);
    // The record kept still holds its key.
    let dup = env.run(&[
        "bus",
        "publish",
        "--to",
        "ann",
        "--source",
        "w",
        "--kind",
        "keyed",
        "--dedup-key",
        "new",
    ]);
    assert!(dup.stdout.is_empty(), "{dup:?}");
}

#[test]
fn no_limit_is_a_usage_error_and_touches_nothing() {
    let mut env = Env::new();
    fill(&env, "ann", 2, 1);
    let before = tree(env.root());
    let err = env.fails(2, &["bus", "prune"]);
    assert!(err.stderr.contains("at least one limit"), "{}", err.stderr);
    env.fails(2, &["bus", "prune", "--agent", "ann"]);
    let doc = env.fails(2, &["--json", "bus", "prune"]).json();
    assert_eq!(doc["class"], "usage");
    // Bad limits are clap's usage errors.
    env.fails(2, &["bus", "prune", "--keep", "-1"]);
    env.fails(2, &["bus", "prune", "--older-than", "soon"]);
    env.fails(2, &["bus", "prune", "--max-bytes", "1k"]);
    assert_eq!(before, tree(env.root()));
    snap!("bus_prune_refusals", env.take());
}

#[test]
fn one_agent_or_every_agent() {
    let mut env = Env::new();
    fill(&env, "ann", 3, 0);
    fill(&env, "bob", 3, 1);
    let bob = files(&env, "bob", "processed");
    let doc = env
        .ok(&["--json", "bus", "prune", "--agent", "ann", "--keep", "1"])
        .json();
    assert_eq!(line(&doc, "ann")["events"], 2);
    assert_eq!(files(&env, "ann", "processed").len(), 1);
    assert_eq!(files(&env, "bob", "processed"), bob, "bob is not named");
    // An agent with no bus folder: nothing to remove, and no folder made.
    let before = tree(env.root());
    let doc = env
        .ok(&["--json", "bus", "prune", "--agent", "cy", "--keep", "0"])
        .json();
    assert_eq!(line(&doc, "cy")["events"], 0);
    assert_eq!(before, tree(env.root()));
    // Every agent with a bus folder, in order.
    let doc = env.ok(&["--json", "bus", "prune", "--keep", "1"]).json();
    let agents: Vec<(&str, u64)> = doc["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| (a["agent"].as_str().unwrap(), a["events"].as_u64().unwrap()))
        .collect();
    assert_eq!(agents, [("ann", 0), ("bob", 2)]);
    assert_eq!(files(&env, "bob", "processed"), bob[2..]);
    assert_eq!(files(&env, "bob", "queue").len(), 1);
}

#[test]
fn text_and_json_output() {
    let mut env = Env::new();
    env.ok(&["bus", "prune", "--keep", "1"]);
    fill(&env, "ann", 3, 1);
    fill(&env, "bob", 1, 0);
    env.ok(&["bus", "prune", "--keep", "1"]);
    fill(&env, "ann", 2, 0);
    env.ok(&["--json", "bus", "prune", "--keep", "1"]);
    env.ok(&["--json", "bus", "prune", "--agent", "bob", "--keep", "5"]);
    snap!("bus_prune", env.take());
}

/// An agent whose prune fails does not stop the others: they are pruned
/// and listed, the failure is listed under `failed` with its kind, and
/// the command exits as that failure does.
#[test]
fn a_file_that_cannot_be_removed_fails_with_its_kind() {
    let mut env = Env::new();
    fill(&env, "ann", 2, 0);
    // A directory where the newest event belongs: removing it fails first.
    let dir = env
        .root()
        .join("bus/ann/processed/2-9999999999999-9b3e0c1a-5d2f-4e1b-8a6c-0123456789ab-w-done.json");
    fs::create_dir_all(dir.join("inside")).unwrap();
    fill(&env, "bob", 2, 0);
    // It fails, but not before pruning bob: `run`, not `fails`, which
    // would require that nothing changed.
    let run = env.run(&["bus", "prune", "--keep", "0"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr.contains("bus prune of ann:") && run.stderr.contains("failed to remove"),
        "{}",
        run.stderr
    );
    assert!(run.stdout.contains("bob"), "{}", run.stdout);
    assert!(files(&env, "bob", "processed").is_empty(), "bob was pruned");
    fill(&env, "bob", 1, 0);
    let run = env.run(&["--json", "bus", "prune", "--keep", "0"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    let doc = run.json();
    assert_eq!(line(&doc, "bob")["events"], 1, "{doc}");
    let failed = doc["failed"].as_array().unwrap();
    assert_eq!(failed.len(), 1, "{doc}");
    assert_eq!(
        (&failed[0]["agent"], &failed[0]["class"], &failed[0]["kind"]),
        (&json!("ann"), &json!("refused"), &json!("io"))
    );
    assert_eq!(files(&env, "ann", "processed").len(), 3);
    assert!(files(&env, "bob", "processed").is_empty());
    // Once it is gone, the same command finishes the job.
    fs::remove_dir_all(&dir).unwrap();
    let doc = env
        .ok(&["--json", "bus", "prune", "--agent", "ann", "--keep", "0"])
        .json();
    assert_eq!(line(&doc, "ann")["events"], 2);
    assert_eq!(doc["failed"], json!([]));
    assert!(files(&env, "ann", "processed").is_empty());
}

/// On a server root: the same limits on the rows, queued events kept.
#[test]
fn prune_on_a_server_root() {
    let Some((url, _, _, schema)) = server("prune_on_a_server_root") else {
        return;
    };
    let cache = tempfile::tempdir().unwrap();
    let chipset = |args: &[&str]| {
        let mut all = vec!["--root", url.as_str()];
        all.extend(args);
        run(&mut chipset(cache.path(), &schema, &all))
    };
    let publish = |to: &str, kind: &str| {
        let (code, out, err) = chipset(&[
            "bus", "publish", "--to", to, "--source", "w", "--kind", kind,
        ]);
        assert_eq!(code, 0, "{err}");
        out.trim().to_owned()
    };
    let mut acked = Vec::new();
    for _ in 0..3 {
        let id = publish("ann", "done");
        let (code, _, err) = chipset(&["bus", "ack", "ann", &id]);
        assert_eq!(code, 0, "{err}");
        acked.push(id);
    }
    let queued = publish("ann", "waiting");
    let id = publish("bob", "done");
    assert_eq!(chipset(&["bus", "ack", "bob", &id]).0, 0);
    let prune = |args: &[&str]| {
        let mut all = vec!["--json", "bus", "prune"];
        all.extend(args);
        let (code, out, err) = chipset(&all);
        assert_eq!(code, 0, "{args:?}: {err}");
        serde_json::from_str::<Value>(&out).unwrap()
    };
    let counts = |doc: &Value| -> Vec<(String, u64)> {
        doc["agents"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| {
                (
                    a["agent"].as_str().unwrap().to_owned(),
                    a["events"].as_u64().unwrap(),
                )
            })
            .collect()
    };
    let doc = prune(&["--agent", "ann", "--keep", "1"]);
    assert_eq!(counts(&doc), [("ann".to_owned(), 2)]);
    assert!(doc["agents"][0]["bytes"].as_u64().unwrap() > 0, "{doc}");
    // The newest acknowledged event is kept: acknowledging it again says so.
    let (code, out, err) = chipset(&["bus", "ack", "ann", &acked[2]]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("acknowledged already"), "{out}");
    // Again: nothing more, on either agent until bob is pruned too.
    let doc = prune(&["--keep", "1"]);
    assert_eq!(counts(&doc), [("ann".to_owned(), 0), ("bob".to_owned(), 0)]);
    let doc = prune(&["--keep", "0"]);
    assert_eq!(counts(&doc), [("ann".to_owned(), 1), ("bob".to_owned(), 1)]);
    // The queued event is still pending.
    let (code, out, err) = chipset(&["--json", "bus", "pending", "ann"]);
    assert_eq!(code, 0, "{err}");
    let pending: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(pending["events"].as_array().unwrap().len(), 1, "{out}");
    assert_eq!(pending["events"][0]["id"], queued.as_str());
    // No limit: a usage error.
    let (code, _, err) = chipset(&["bus", "prune"]);
    assert_eq!(code, 2, "{err}");
    if let Ok(mut c) = postgres::Client::connect(&url, postgres::NoTls) {
        let _ = c.batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"));
    }
}
