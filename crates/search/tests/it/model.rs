//! A property test: after any sequence of sends, archives, sweeps, files
//! dropped by another program, publishes, acknowledgements, assignments
//! and reminders, interleaved with damage to the index, every query's
//! hits are exactly what a brute-force scan of the files finds.

use chipset_bus::{Bus, NewEvent};
use chipset_hook::Hooks;
use chipset_mail::{Mail, NewMessage};
use chipset_nudge::{KindRegistry, NewReminder, Reminders};
use chipset_search::{Origin, Query, SearchIndex};
use chipset_testkit::{TempState, agent, task};
use proptest::prelude::*;
use serde_json::json;

use crate::{brute, keys};

const WORDS: [&str; 8] = [
    "alpha", "beta", "gamma", "delta", "parser", "flaky", "deploy", "review",
];
const AGENTS: [&str; 3] = ["np-critic", "np-executor", "mayor"];
const TASKS: [&str; 2] = ["t-one", "t-two"];

#[derive(Debug, Clone)]
enum Op {
    Send {
        from: usize,
        to: usize,
        task: usize,
        subject: Vec<usize>,
        body: Vec<usize>,
    },
    Archive(usize),
    Sweep(usize),
    /// Another program drops a message into an inbox, with no manifest line.
    Drop {
        to: usize,
        body: Vec<usize>,
    },
    Publish {
        to: usize,
        kind: usize,
        payload: Vec<usize>,
    },
    Ack {
        agent: usize,
        nth: usize,
    },
    Assign {
        agent: usize,
        title: Vec<usize>,
    },
    Clear(usize),
    Remind {
        source: usize,
        text: Vec<usize>,
    },
    Search {
        words: Vec<(usize, bool)>,
        filter: u8,
        who: usize,
    },
    CorruptIndex,
    DeleteIndex,
}

fn words() -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(0..WORDS.len(), 1..4)
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..3usize, 0..3usize, 0..2usize, words(), words()).prop_map(|(from, to, task, subject, body)| Op::Send { from, to, task, subject, body }),
        1 => (0..50usize).prop_map(Op::Archive),
        1 => (0..2usize).prop_map(Op::Sweep),
        1 => (0..3usize, words()).prop_map(|(to, body)| Op::Drop { to, body }),
        2 => (0..3usize, 0..8usize, words()).prop_map(|(to, kind, payload)| Op::Publish { to, kind, payload }),
        1 => (0..3usize, 0..10usize).prop_map(|(agent, nth)| Op::Ack { agent, nth }),
        1 => (0..3usize, words()).prop_map(|(agent, title)| Op::Assign { agent, title }),
        1 => (0..3usize).prop_map(Op::Clear),
        1 => (0..4usize, words()).prop_map(|(source, text)| Op::Remind { source, text }),
        4 => (prop::collection::vec((0..WORDS.len(), any::<bool>()), 1..3), 0..6u8, 0..3usize)
            .prop_map(|(words, filter, who)| Op::Search { words, filter, who }),
        1 => Just(Op::CorruptIndex),
        1 => Just(Op::DeleteIndex),
    ]
}

fn text(ws: &[usize], sep: &str) -> String {
    ws.iter().map(|&i| WORDS[i]).collect::<Vec<_>>().join(sep)
}

fn run(ops: Vec<Op>) {
    let tmp = TempState::new();
    let state = &tmp.state;
    let mail = Mail::new(state.clone());
    let bus = Bus::new(state.clone());
    let hooks = Hooks::new(state.clone());
    let reminders = Reminders::new(state.clone(), KindRegistry::preset());
    let search = SearchIndex::new(state.clone());
    let mut sent = Vec::new();
    let mut dropped = 0u32;
    for op in ops {
        match op {
            Op::Send {
                from,
                to,
                task: t,
                subject,
                body,
            } => {
                let m = mail
                    .send(&NewMessage::notify(
                        agent(AGENTS[from]),
                        agent(AGENTS[to]),
                        task(TASKS[t]),
                        text(&subject, "-"),
                        text(&body, " "),
                    ))
                    .unwrap();
                sent.push(m.id.clone());
            }
            Op::Archive(n) => {
                if let Some(id) = sent.get(n) {
                    let _ = mail.archive(id).unwrap();
                }
            }
            Op::Sweep(t) => {
                mail.sweep_task_on_commit(&task(TASKS[t])).unwrap();
            }
            Op::Drop { to, body } => {
                dropped += 1;
                let id = format!("1795408570{dropped:03}-7a703292-f1d1-4900-88f9-08c209e1cd7d");
                let dir = state.root().join("mail/inbox").join(AGENTS[to]);
                std::fs::create_dir_all(&dir).unwrap();
                let file = json!({
                    "id": id, "from": "np-orchestrator", "to": AGENTS[to], "phase": "t-one",
                    "round": null, "kind": "notify", "subject": "dropped", "body": text(&body, " "),
                    "expects_reply": false, "in_reply_to": null, "created_at": "2026-11-23T04:36:10.003Z",
                });
                std::fs::write(dir.join(format!("{id}.json")), file.to_string()).unwrap();
            }
            Op::Publish { to, kind, payload } => {
                let event = NewEvent::new("worker", WORDS[kind])
                    .with_payload(json!({ "note": text(&payload, " ") }));
                let _ = bus.publish(&agent(AGENTS[to]), &event).unwrap();
            }
            Op::Ack { agent: a, nth } => {
                let a = agent(AGENTS[a]);
                if bus.is_available(&a).unwrap() {
                    let pending = bus.pending(&a).unwrap();
                    if let Some(e) = pending.events.get(nth) {
                        let _ = bus.ack_event(&a, e).unwrap();
                    }
                }
            }
            Op::Assign { agent: a, title } => {
                let _ = hooks.assign(
                    &agent(AGENTS[a]),
                    "bead-1".parse().unwrap(),
                    text(&title, " "),
                    None,
                );
            }
            Op::Clear(a) => {
                crate::finish_hook(&hooks, &agent(AGENTS[a]));
            }
            Op::Remind { source, text: t } => {
                reminders
                    .open(&NewReminder {
                        tenant_id: "acme".into(),
                        kind: "spec_draft".into(),
                        source_type: "spec".into(),
                        source_id: format!("spec-{source}"),
                        message: text(&t, " "),
                        ..NewReminder::default()
                    })
                    .unwrap();
            }
            Op::Search { words, filter, who } => {
                let q: Vec<String> = words
                    .iter()
                    .map(|&(w, prefix)| {
                        if prefix {
                            format!("{}*", &WORDS[w][..3])
                        } else {
                            WORDS[w].to_owned()
                        }
                    })
                    .collect();
                let mut query = Query::new(q.join(" ")).limit(10_000);
                query = match filter {
                    1 => query.from(AGENTS[who]),
                    2 => query.to(AGENTS[who]),
                    3 => query.channel(Origin::ALL[who]),
                    4 => query.kind("notify"),
                    5 => query.task(TASKS[who % 2]),
                    _ => query,
                };
                let hits = search.search(&query).unwrap();
                assert_eq!(keys(&hits), brute::search(state, &query), "{query:?}");
            }
            Op::CorruptIndex => {
                let path = search.path();
                if path.exists() {
                    std::fs::write(&path, b"this is not a database, it is garbage ".repeat(200))
                        .unwrap();
                }
            }
            Op::DeleteIndex => {
                let _ = std::fs::remove_file(search.path());
            }
        }
    }
    // At the end, every word once more, through a fresh handle and a rebuild.
    let again = SearchIndex::new(state.clone());
    for w in WORDS {
        let query = Query::new(w).limit(10_000);
        let want = brute::search(state, &query);
        assert_eq!(keys(&search.search(&query).unwrap()), want, "{w}");
        assert_eq!(
            keys(&again.search(&query).unwrap()),
            want,
            "{w} (second handle)"
        );
    }
    again.rebuild().unwrap();
    for w in WORDS {
        let query = Query::new(w).limit(10_000);
        assert_eq!(
            keys(&again.search(&query).unwrap()),
            brute::search(state, &query),
            "{w} (rebuilt)"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn hits_are_what_a_scan_of_the_files_finds(ops in prop::collection::vec(op(), 1..40)) {
        run(ops);
    }
}
