//! `chipset migrate` of a pool: its items, entries and states to a
//! server and back, a rerun after a run killed part way.

use std::path::Path;
use std::time::Duration;

use chipset::migrate::{ChannelReport, Migration, Report};
use chipset::pool::NewItem;
use chipset::{Chipset, Root};

use super::{agent, assert_verified, dir, files, on_server};

/// Fills a pool: four items posted (one depends on another and waits
/// until tomorrow), one claimed, one done, one released and claimed
/// again; the done and the release are still in `pool/log.jsonl`.
pub(crate) fn populate_pool(root: &Path) {
    let door = Chipset::open(root).unwrap();
    let pool = door.pool();
    let (lead, w1, w2) = (agent("lead"), agent("worker-1"), agent("worker-2"));
    let design = pool
        .post(&lead, &NewItem::new("Design").with_priority(1))
        .unwrap()
        .entry;
    let build = pool
        .post(&lead, &NewItem::new("Build").with_body("the parser"))
        .unwrap()
        .entry;
    let tomorrow = pool.now().unwrap() + Duration::from_secs(86_400);
    let ship = NewItem::new("Ship")
        .with_depends_on([design.id.clone()])
        .with_not_before(tomorrow)
        .with_labels(["release"]);
    pool.post(&lead, &ship).unwrap();
    pool.post(&lead, &NewItem::new("Docs")).unwrap();
    let _ = pool.claim(&w1, &design.id).unwrap();
    pool.done(&w1, &design.id).unwrap();
    let _ = pool.claim(&w2, &build.id).unwrap();
    pool.release(&w2, &build.id, "after lunch").unwrap();
    let _ = pool.claim(&w2, &build.id).unwrap();
    let log = std::fs::read(root.join("pool/log.jsonl")).unwrap();
    assert!(!log.is_empty(), "the records are not folded");
}

/// The pool as a reader sees it: every item's entry, state and claimer.
pub(crate) fn pool_view(door: &Chipset) -> Vec<String> {
    door.pool()
        .list()
        .unwrap()
        .into_iter()
        .map(|l| format!("{:?} {:?}", l.entry, l.state))
        .collect()
}

fn pool_line(report: &Report) -> &ChannelReport {
    report
        .channels
        .iter()
        .find(|c| c.channel == "pool")
        .unwrap()
}

#[test]
fn a_pool_goes_to_a_server_and_back_with_its_states() {
    let Some((_server, tmp, url, options)) =
        on_server("a_pool_goes_to_a_server_and_back_with_its_states")
    else {
        return;
    };
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    populate_pool(&a);
    let source = Chipset::open(&a).unwrap();
    let view = pool_view(&source);
    assert_eq!(view.len(), 4);
    let pg = Root::Server(url.clone());
    let up = Migration::new(dir(&a), pg.clone())
        .server_options(options.clone())
        .run()
        .unwrap();
    assert_verified(&up);
    // Four items and four entries on each side.
    assert_eq!((pool_line(&up).source, pool_line(&up).written), (8, 8));
    let on_server = Chipset::open_server(&url, &options).unwrap();
    assert_eq!(pool_view(&on_server), view);
    let again = Migration::new(dir(&a), pg.clone())
        .server_options(options.clone())
        .run()
        .unwrap();
    assert_eq!(again.written(), 0, "{again:#?}");
    assert_eq!(pool_line(&again).present, 8);

    // A run killed after one item file came down: the rerun completes it.
    let first = files(&a)
        .into_keys()
        .find(|p| p.starts_with("pool/items/"))
        .unwrap();
    std::fs::create_dir_all(b.join("pool/items")).unwrap();
    std::fs::copy(a.join(&first), b.join(&first)).unwrap();
    let down = Migration::new(pg.clone(), dir(&b))
        .server_options(options.clone())
        .run()
        .unwrap();
    assert_verified(&down);
    let line = pool_line(&down);
    assert_eq!((line.present, line.written, line.target), (1, 7, 8));
    let back = Chipset::open(&b).unwrap();
    assert_eq!(pool_view(&back), view);
    let (from, to) = (files(&a), files(&b));
    for (path, bytes) in &from {
        if path.starts_with("pool/items/") {
            assert_eq!(to.get(path), Some(bytes), "{path}");
        }
    }
    assert!(to.contains_key("pool/table.json"));
    assert!(!to.contains_key("pool/log.jsonl"), "the log is folded");
    let back_again = Migration::new(pg, dir(&b))
        .server_options(options)
        .run()
        .unwrap();
    assert_eq!(back_again.written(), 0, "{back_again:#?}");
    // The pool keeps working where it landed.
    let docs = back
        .pool()
        .claim_next(&agent("worker-3"), &Default::default());
    assert_eq!(docs.unwrap().unwrap().entry.title, "Docs");
}
