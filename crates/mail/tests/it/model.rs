//! Model-based property test: random sequences of every operation against a
//! plain in-memory model of where each message is and which requests have
//! replies, on a directory and (with `CHIPSET_TEST_PG`) on PostgreSQL.

use std::collections::BTreeSet;
use std::time::Duration;

use chipset_mail::MessageId;
use chipset_mail::{ArchiveOutcome, Error, Kind, Location, MailConfig, NewMessage};
use chipset_store::DoctorMode;
use chipset_store::{AgentId, TaskId};
use proptest::prelude::*;

use crate::place::Place;
use crate::{Fixture, fixture_no_sync};

const AGENTS: u8 = 3;
const TASKS: u8 = 2;

fn agent(i: u8) -> AgentId {
    AgentId::new(format!("agent-{i}")).unwrap()
}

fn task(i: u8) -> TaskId {
    TaskId::new(format!("task-{i}")).unwrap()
}

#[derive(Debug, Clone)]
enum Op {
    Send {
        kind: Kind,
        from: u8,
        to: u8,
        task: u8,
        parent: Option<usize>,
        explicit_task: bool,
    },
    Batch(Vec<(u8, u8, u8)>),
    Archive(usize),
    HasReply(usize),
    Inbox {
        agent: u8,
        kind: Option<Kind>,
        task: Option<u8>,
    },
    Pending(u8),
    Thread(usize),
    Locate(usize),
    Sweep(u8),
    Doctor(bool),
}

fn kind() -> impl Strategy<Value = Kind> {
    prop_oneof![
        Just(Kind::Request),
        Just(Kind::Response),
        Just(Kind::Notify)
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (kind(), 0..AGENTS, 0..AGENTS, 0..TASKS, proptest::option::of(any::<usize>()), any::<bool>())
            .prop_map(|(kind, from, to, task, parent, explicit_task)| Op::Send {
                kind, from, to, task, parent, explicit_task,
            }),
        1 => proptest::collection::vec((0..AGENTS, 0..AGENTS, 0..TASKS), 1..4).prop_map(Op::Batch),
        4 => any::<usize>().prop_map(Op::Archive),
        1 => any::<usize>().prop_map(Op::HasReply),
        2 => (0..AGENTS, proptest::option::of(kind()), proptest::option::of(0..TASKS))
            .prop_map(|(agent, kind, task)| Op::Inbox { agent, kind, task }),
        2 => (0..TASKS).prop_map(Op::Pending),
        2 => any::<usize>().prop_map(Op::Thread),
        1 => any::<usize>().prop_map(Op::Locate),
        1 => (0..TASKS).prop_map(Op::Sweep),
        1 => any::<bool>().prop_map(Op::Doctor),
    ]
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Loc {
    Inbox(u8),
    Archive,
    ByTask(u8),
    Orphan,
}

#[derive(Debug, Clone)]
struct Msg {
    id: MessageId,
    from: u8,
    to: u8,
    task: u8,
    kind: Kind,
    parent: Option<usize>,
    loc: Loc,
}

#[derive(Default)]
struct Model {
    msgs: Vec<Msg>,
    replied: BTreeSet<usize>,
    swept: BTreeSet<u8>,
}

impl Model {
    /// Predicts a send: the refusal's name, or the task the message gets.
    fn check_send(
        &self,
        kind: Kind,
        from: u8,
        task: u8,
        parent: Option<usize>,
        explicit: bool,
    ) -> Result<u8, &'static str> {
        let Some(p) = parent else {
            return Ok(task);
        };
        let p = &self.msgs[p];
        if kind == Kind::Response {
            if p.kind != Kind::Request {
                return Err("not-a-request");
            }
            if from != p.to {
                return Err("not-addressee");
            }
            if explicit && task != p.task {
                return Err("task-mismatch");
            }
            return Ok(p.task);
        }
        if task != p.task {
            return Err("task-mismatch");
        }
        Ok(task)
    }

    fn to_location(loc: &Loc) -> Location {
        match loc {
            Loc::Inbox(a) => Location::Inbox(agent(*a)),
            Loc::Archive => Location::Archive,
            Loc::ByTask(t) => Location::ByTask(task(*t)),
            Loc::Orphan => Location::Orphan,
        }
    }

    fn thread(&self, i: usize) -> Vec<MessageId> {
        let mut root = i;
        while let Some(p) = self.msgs[root].parent {
            root = p;
        }
        let mut members = BTreeSet::from([root]);
        // Parents precede children in send order, so one pass finds all descendants.
        for (j, m) in self.msgs.iter().enumerate() {
            if m.parent.is_some_and(|p| members.contains(&p)) {
                members.insert(j);
            }
        }
        members
            .into_iter()
            .map(|j| self.msgs[j].id.clone())
            .collect()
    }
}

fn err_name(e: &Error) -> &'static str {
    match e {
        Error::NotARequest { .. } => "not-a-request",
        Error::NotAddressee { .. } => "not-addressee",
        Error::TaskMismatch { .. } => "task-mismatch",
        Error::ArchiveWithoutReply { .. } => "archive-without-reply",
        other => panic!("unexpected error {other}"),
    }
}

fn run(place: &Place, ops: Vec<Op>) {
    let Fixture {
        mail,
        clock,
        tmp: _tmp,
    } = fixture_no_sync(
        place,
        MailConfig {
            in_flight_grace: Duration::ZERO,
            ..MailConfig::default()
        },
    );
    let mut model = Model::default();
    for op in ops {
        clock.advance(Duration::from_millis(1));
        let n = model.msgs.len();
        match op {
            Op::Send {
                kind,
                from,
                to,
                task: t,
                parent,
                explicit_task,
            } => {
                let parent = match (kind, parent) {
                    (_, _) if n == 0 => None,
                    (Kind::Response, p) => Some(p.unwrap_or(0) % n),
                    (_, p) => p.map(|p| p % n),
                };
                if kind == Kind::Response && parent.is_none() {
                    continue;
                }
                let draft = match kind {
                    Kind::Request => NewMessage::request(agent(from), agent(to), task(t), "q", ""),
                    Kind::Notify => NewMessage::notify(agent(from), agent(to), task(t), "n", ""),
                    Kind::Response => {
                        let d = NewMessage::response(
                            agent(from),
                            agent(to),
                            model.msgs[parent.unwrap()].id.clone(),
                            "a",
                            "",
                        );
                        if explicit_task {
                            d.with_task(task(t))
                        } else {
                            d
                        }
                    }
                    other => panic!("a kind this model does not send: {other}"),
                };
                let draft = match (kind, parent) {
                    (Kind::Response, _) | (_, None) => draft,
                    (_, Some(p)) => draft.replying_to(model.msgs[p].id.clone()),
                };
                let explicit = kind != Kind::Response || explicit_task;
                let expected = model.check_send(kind, from, t, parent, explicit);
                let got = mail.send(&draft);
                match (expected, got) {
                    (Ok(task_index), Ok(m)) => {
                        assert_eq!(m.task(), &task(task_index));
                        if kind == Kind::Response {
                            let p = parent.unwrap();
                            model.replied.insert(p);
                            if matches!(model.msgs[p].loc, Loc::Inbox(_)) {
                                model.msgs[p].loc = Loc::Archive;
                            }
                        }
                        model.msgs.push(Msg {
                            id: m.id.clone(),
                            from,
                            to,
                            task: task_index,
                            kind,
                            parent,
                            loc: Loc::Inbox(to),
                        });
                    }
                    (Err(want), Err(e)) => assert_eq!(err_name(&e), want),
                    (want, got) => panic!("send {kind:?}: model {want:?}, real {got:?}"),
                }
            }
            Op::Batch(items) => {
                let drafts: Vec<NewMessage> = items
                    .iter()
                    .map(|(f, to, t)| NewMessage::notify(agent(*f), agent(*to), task(*t), "b", ""))
                    .collect();
                let sent = mail.send_batch(&drafts).unwrap();
                for ((f, to, t), m) in items.into_iter().zip(sent) {
                    model.msgs.push(Msg {
                        id: m.id.clone(),
                        from: f,
                        to,
                        task: t,
                        kind: Kind::Notify,
                        parent: None,
                        loc: Loc::Inbox(to),
                    });
                }
            }
            Op::Archive(i) if n > 0 => {
                let i = i % n;
                let got = mail.archive(&model.msgs[i].id);
                let m = &mut model.msgs[i];
                match &m.loc {
                    Loc::Inbox(_) if m.kind == Kind::Request && !model.replied.contains(&i) => {
                        assert_eq!(err_name(&got.unwrap_err()), "archive-without-reply");
                    }
                    Loc::Inbox(_) => {
                        assert!(
                            matches!(got.unwrap(), ArchiveOutcome::Archived(ref x) if x.id == m.id)
                        );
                        m.loc = Loc::Archive;
                    }
                    other => assert_eq!(
                        got.unwrap(),
                        ArchiveOutcome::AlreadyArchived(Model::to_location(other))
                    ),
                }
            }
            Op::HasReply(i) if n > 0 => {
                let i = i % n;
                assert_eq!(
                    mail.has_reply(&model.msgs[i].id).unwrap(),
                    model.replied.contains(&i)
                );
            }
            Op::Inbox {
                agent: a,
                kind,
                task: t,
            } => {
                let phase = t.map(task);
                let got: Vec<MessageId> = mail
                    .inbox(&agent(a))
                    .unwrap()
                    .iter()
                    .filter(|m| {
                        kind.is_none_or(|k| m.kind == k)
                            && phase.as_ref().is_none_or(|p| m.task() == p)
                    })
                    .map(|m| m.id.clone())
                    .collect();
                let want: Vec<MessageId> = model
                    .msgs
                    .iter()
                    .filter(|m| {
                        m.loc == Loc::Inbox(a)
                            && kind.is_none_or(|k| k == m.kind)
                            && t.is_none_or(|t| t == m.task)
                    })
                    .map(|m| m.id.clone())
                    .collect();
                assert_eq!(got, want);
            }
            Op::Pending(t) => {
                let got: Vec<MessageId> = mail
                    .pending_replies(&task(t))
                    .unwrap()
                    .iter()
                    .map(|m| m.id.clone())
                    .collect();
                let want: Vec<MessageId> = model
                    .msgs
                    .iter()
                    .filter(|m| {
                        matches!(m.loc, Loc::Inbox(_)) && m.kind == Kind::Request && m.task == t
                    })
                    .map(|m| m.id.clone())
                    .collect();
                assert_eq!(got, want);
            }
            Op::Thread(i) if n > 0 => {
                let i = i % n;
                let got: Vec<MessageId> = mail
                    .thread(&model.msgs[i].id)
                    .unwrap()
                    .iter()
                    .map(|m| m.id.clone())
                    .collect();
                assert_eq!(got, model.thread(i));
            }
            Op::Locate(i) if n > 0 => {
                let m = &model.msgs[i % n];
                assert_eq!(
                    mail.locate(&m.id).unwrap(),
                    Some(Model::to_location(&m.loc))
                );
                let found = mail.find(&m.id).unwrap().unwrap();
                assert_eq!((&found.from, &found.to), (&agent(m.from), &agent(m.to)));
            }
            Op::Sweep(t) => {
                let mut moved = 0;
                for m in &mut model.msgs {
                    if m.task == t && matches!(m.loc, Loc::Inbox(_) | Loc::Archive) {
                        m.loc = Loc::ByTask(t);
                        moved += 1;
                    }
                }
                model.swept.insert(t);
                let total = model
                    .msgs
                    .iter()
                    .filter(|m| m.loc == Loc::ByTask(t))
                    .count();
                let got = mail.sweep_task_on_commit(&task(t)).unwrap();
                assert_eq!((got.moved, got.total), (moved, total));
            }
            Op::Doctor(fix) => {
                let mode = if fix {
                    DoctorMode::Fix
                } else {
                    DoctorMode::Check
                };
                let report = mail.doctor(mode).unwrap();
                let mut want = Vec::new();
                for m in &mut model.msgs {
                    if let Loc::Inbox(a) = m.loc
                        && model.swept.contains(&m.task)
                    {
                        want.push(m.id.clone());
                        assert!(crate::seen(&report).contains(&(
                            "messaging-orphan-inbox",
                            Some(m.id.to_string()),
                            format!(
                                "messaging-orphan-inbox: message `{}` of task `{}` in inbox/{} ({})",
                                m.id,
                                task(m.task),
                                agent(a),
                                chipset_mail::OrphanReason::TaskSwept
                            )
                        )));
                        if fix {
                            m.loc = Loc::Orphan;
                        }
                    }
                }
                assert_eq!(report.findings.len(), want.len(), "{report:?}");
                assert_eq!(report.scanned, n);
            }
            _ => {}
        }
    }
    // The manifest agrees with the model: one `sent` event per message.
    let manifest = mail.read_manifest().unwrap();
    let sent = manifest
        .iter()
        .filter(|e| crate::event_name(e) == "sent")
        .count();
    assert_eq!(sent, model.msgs.len());
    let log = crate::manifest_log(&mail);
    assert!(log.bad_lines.is_empty() && log.torn_tail.is_none());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn mail_matches_model(ops in proptest::collection::vec(op(), 1..40)) {
        run(&Place::fs(), ops);
    }
}

proptest! {
    // Fewer cases: each is a fresh schema and round trips to the server.
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn mail_matches_model_on_postgres(ops in proptest::collection::vec(op(), 1..40)) {
        if let Some(place) = Place::pg("mail_matches_model_on_postgres") {
            run(&place, ops);
        }
    }
}

#[test]
fn model_catches_a_known_sequence() {
    known_sequence(&Place::fs());
}

#[test]
fn model_catches_a_known_sequence_on_postgres() {
    if let Some(place) = Place::pg("model_catches_a_known_sequence_on_postgres") {
        known_sequence(&place);
    }
}

fn known_sequence(place: &Place) {
    // A fixed sequence exercising every branch, so the model's own logic is pinned.
    run(
        place,
        vec![
            Op::Send {
                kind: Kind::Request,
                from: 0,
                to: 1,
                task: 0,
                parent: None,
                explicit_task: false,
            },
            Op::Archive(0),
            Op::Send {
                kind: Kind::Response,
                from: 0,
                to: 0,
                task: 0,
                parent: Some(0),
                explicit_task: false,
            },
            Op::Send {
                kind: Kind::Response,
                from: 1,
                to: 0,
                task: 1,
                parent: Some(0),
                explicit_task: true,
            },
            Op::Send {
                kind: Kind::Response,
                from: 1,
                to: 0,
                task: 0,
                parent: Some(0),
                explicit_task: false,
            },
            Op::Send {
                kind: Kind::Notify,
                from: 0,
                to: 1,
                task: 1,
                parent: Some(1),
                explicit_task: true,
            },
            Op::Send {
                kind: Kind::Request,
                from: 0,
                to: 1,
                task: 0,
                parent: Some(1),
                explicit_task: true,
            },
            Op::Thread(2),
            Op::HasReply(0),
            Op::Pending(0),
            Op::Sweep(0),
            Op::Send {
                kind: Kind::Notify,
                from: 2,
                to: 1,
                task: 0,
                parent: None,
                explicit_task: true,
            },
            Op::Doctor(false),
            Op::Doctor(true),
            Op::Locate(3),
            Op::Inbox {
                agent: 1,
                kind: None,
                task: None,
            },
            Op::Batch(vec![(0, 1, 1), (1, 2, 1)]),
            Op::Archive(4),
        ],
    );
}
