//! Property: any message that satisfies the seed's schema, as another
//! program may write it (`round` null, absent or any integer up to 2^53;
//! keys in any order; fields chipset does not know; RFC 3339 times in any
//! form), reads without an error through every read path: inbox, lookup by
//! id, thread, pending replies, the doctor's scan, archive and sweep, and
//! moving it never changes its bytes.

use proptest::prelude::*;
use serde_json::{Value, json};

use chipset_mail::{ArchiveOutcome, Error, Location, Mail, MailConfig};

use crate::MAX_ROUND;
use chipset_store::{Defect, DoctorMode, StateDir, Timestamp};

use crate::{agent, mid, task};

#[derive(Debug, Clone)]
enum Field<T> {
    Absent,
    Null,
    Value(T),
}

#[derive(Debug, Clone)]
struct Foreign {
    id: String,
    from: String,
    to: String,
    phase: String,
    round: Field<u64>,
    kind: &'static str,
    subject: String,
    body: String,
    expects_reply: bool,
    in_reply_to: Field<String>,
    created_ms: i64,
    /// 0: with milliseconds and `Z`; 1: no fraction; 2: `+00:00`; 3: `+02:00`.
    time_form: u8,
    extra: Vec<(String, Value)>,
    order: Vec<usize>,
}

fn message_id() -> impl Strategy<Value = String> {
    (1_000_000_000_000i64..2_000_000_000_000, any::<[u8; 16]>()).prop_map(|(ms, b)| {
        let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
        format!(
            "{ms}-{}-{}-{}-{}-{}",
            &hex[0..8],
            &hex[8..12],
            &hex[12..16],
            &hex[16..20],
            &hex[20..32]
        )
    })
}

fn extra_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        ".{0,12}".prop_map(Value::from),
        Just(json!({"nested": [1, "two", null]})),
    ]
}

const KNOWN: [&str; 13] = [
    "id",
    "from",
    "to",
    "phase",
    "round",
    "kind",
    "subject",
    "body",
    "expects_reply",
    "in_reply_to",
    "created_at",
    "priority",
    "schema",
];

fn foreign() -> impl Strategy<Value = Foreign> {
    let agent = "[a-zA-Z0-9_-]{1,16}";
    (
        (
            message_id(),
            agent,
            agent,
            "[A-Za-z0-9][A-Za-z0-9_.-]{0,20}",
            prop_oneof![
                Just(Field::Absent),
                Just(Field::Null),
                (0..=MAX_ROUND).prop_map(Field::Value),
                Just(Field::Value(MAX_ROUND)),
            ],
            prop_oneof![Just("request"), Just("response"), Just("notify")],
        ),
        (
            "\\PC{1,20}",
            "[\\PC\n\t\"\\\\]{0,60}",
            any::<bool>(),
            prop_oneof![
                Just(Field::Absent),
                Just(Field::Null),
                Just(Field::Value(String::new())),
                message_id().prop_map(Field::Value),
            ],
            1_000_000_000_000i64..4_000_000_000_000,
            0u8..4,
            prop::collection::vec(("[a-z_]{1,10}", extra_value()), 0..4),
        ),
    )
        .prop_flat_map(
            |(
                (id, from, to, phase, round, kind),
                (subject, body, expects_reply, in_reply_to, created_ms, time_form, extra),
            )| {
                let extra: Vec<(String, Value)> = extra
                    .into_iter()
                    .filter(|(k, _)| !KNOWN.contains(&k.as_str()))
                    .collect::<std::collections::BTreeMap<_, _>>()
                    .into_iter()
                    .collect();
                let n = 11 + extra.len();
                let base = Foreign {
                    id,
                    from,
                    to,
                    phase,
                    round,
                    kind,
                    subject,
                    body,
                    expects_reply,
                    in_reply_to,
                    created_ms,
                    time_form,
                    extra,
                    order: Vec::new(),
                };
                (
                    Just(base),
                    Just((0..n).collect::<Vec<usize>>()).prop_shuffle(),
                )
            },
        )
        .prop_map(|(mut f, order)| {
            f.order = order;
            f
        })
}

impl Foreign {
    fn created_at(&self) -> String {
        let t = Timestamp::from_unix_ms(self.created_ms).to_string();
        let whole = &t[..19];
        match self.time_form {
            0 => t,
            1 => format!("{whole}Z"),
            2 => format!("{}+00:00", &t[..23]),
            _ => {
                let shifted = Timestamp::from_unix_ms(self.created_ms + 2 * 3_600_000).to_string();
                format!("{}+02:00", &shifted[..23])
            }
        }
    }

    fn expected_ms(&self) -> i64 {
        if self.time_form == 1 {
            self.created_ms - self.created_ms.rem_euclid(1000)
        } else {
            self.created_ms
        }
    }

    /// The file as another program writes it: keys in `order`.
    fn to_json(&self) -> String {
        let mut fields: Vec<Option<(String, Value)>> = vec![
            Some(("id".into(), json!(self.id))),
            Some(("from".into(), json!(self.from))),
            Some(("to".into(), json!(self.to))),
            Some(("phase".into(), json!(self.phase))),
            match &self.round {
                Field::Absent => None,
                Field::Null => Some(("round".into(), Value::Null)),
                Field::Value(r) => Some(("round".into(), json!(r))),
            },
            Some(("kind".into(), json!(self.kind))),
            Some(("subject".into(), json!(self.subject))),
            Some(("body".into(), json!(self.body))),
            Some(("expects_reply".into(), json!(self.expects_reply))),
            match &self.in_reply_to {
                Field::Absent => None,
                Field::Null => Some(("in_reply_to".into(), Value::Null)),
                Field::Value(p) => Some(("in_reply_to".into(), json!(p))),
            },
            Some(("created_at".into(), json!(self.created_at()))),
        ];
        fields.extend(self.extra.iter().cloned().map(Some));
        let parts: Vec<String> = self
            .order
            .iter()
            .filter_map(|&i| fields[i].take())
            .map(|(k, v)| format!("{}: {}", json!(k), v))
            .collect();
        format!("{{\n  {}\n}}\n", parts.join(",\n  "))
    }

    fn needs_reply(&self) -> bool {
        self.kind == "request" || self.expects_reply
    }
}

fn check(f: &Foreign) -> Result<(), TestCaseError> {
    let tmp = tempfile::tempdir().unwrap();
    let folder = tmp.path().join("messages");
    let mail = Mail::in_folder(StateDir::open(&folder).unwrap(), MailConfig::default());
    let bytes = f.to_json();
    prop_assert!(serde_json::from_str::<Value>(&bytes).is_ok(), "{bytes}");
    let inbox = folder.join("inbox").join(&f.to);
    std::fs::create_dir_all(&inbox).unwrap();
    let name = format!("{}.json", f.id);
    std::fs::write(inbox.join(&name), &bytes).unwrap();
    let (id, to, phase) = (mid(&f.id), agent(&f.to), task(&f.phase));

    // Inbox: every field as written.
    let listed = mail.inbox(&to).unwrap();
    prop_assert_eq!(listed.len(), 1);
    let m = &listed[0];
    prop_assert_eq!(&m.id, &id);
    prop_assert_eq!(m.from.as_str(), f.from.as_str());
    prop_assert_eq!(m.task(), &phase);
    prop_assert_eq!(m.kind.to_string(), f.kind);
    prop_assert_eq!(&m.subject, f.subject.as_str());
    prop_assert_eq!(&m.body, f.body.as_str());
    prop_assert_eq!(m.expects_reply, f.expects_reply);
    let round = match f.round {
        Field::Value(r) => Some(r),
        _ => None,
    };
    prop_assert_eq!(m.round, round);
    let parent = match &f.in_reply_to {
        Field::Value(p) if !p.is_empty() => Some(mid(p)),
        _ => None,
    };
    prop_assert_eq!(m.in_reply_to.as_ref(), parent.as_ref());
    prop_assert_eq!(m.created_at.unix_ms(), f.expected_ms());

    // Lookup by id, thread, the gate, the doctor's scan.
    let found = mail.find(&id).unwrap();
    prop_assert_eq!(found.as_ref(), Some(m));
    prop_assert_eq!(mail.locate(&id).unwrap(), Some(Location::Inbox(to.clone())));
    prop_assert!(mail.thread(&id).unwrap().iter().any(|t| t.id == id));
    let pending = mail.pending_replies(&phase).unwrap();
    prop_assert_eq!(pending.iter().any(|p| p.id == id), f.needs_reply());
    let report = mail.doctor(DoctorMode::Check).unwrap();
    prop_assert_eq!(report.scanned, 1);
    prop_assert!(
        !report
            .findings
            .iter()
            .any(|x| matches!(x.fault, Defect::Corrupt(_) | Defect::Unsupported(_))),
        "{:?}",
        report.findings
    );

    // Archive (or, for a message that waits for a reply, the refusal, and
    // then a move by its writer), then the sweep: bytes never change.
    match mail.archive(&id) {
        Ok(ArchiveOutcome::Archived(_)) => prop_assert!(!f.needs_reply()),
        Err(Error::ArchiveWithoutReply { .. }) => {
            prop_assert!(f.needs_reply());
            std::fs::rename(inbox.join(&name), folder.join("archive").join(&name))
                .or_else(|_| {
                    std::fs::create_dir_all(folder.join("archive"))?;
                    std::fs::rename(inbox.join(&name), folder.join("archive").join(&name))
                })
                .unwrap();
        }
        other => prop_assert!(false, "archive: {other:?}"),
    }
    prop_assert_eq!(mail.locate(&id).unwrap(), Some(Location::Archive));
    prop_assert_eq!(
        std::fs::read_to_string(folder.join("archive").join(&name)).unwrap(),
        bytes.clone()
    );
    prop_assert!(mail.thread(&id).unwrap().iter().any(|t| t.id == id));
    prop_assert_eq!(mail.sweep_task_on_commit(&phase).unwrap().moved, 1);
    let swept = folder.join("archive/by-task").join(&f.phase).join(&name);
    prop_assert_eq!(std::fs::read_to_string(swept).unwrap(), bytes);
    prop_assert!(mail.find(&id).unwrap().is_some());
    prop_assert_eq!(mail.locate(&id).unwrap(), Some(Location::ByTask(phase)));
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn any_seed_schema_message_reads_through_every_path(f in foreign()) {
        check(&f)?;
    }
}
