//! Random register, list-add and list-remove sequences by four agents
//! against a plain in-memory model: after every step each profile reads
//! back what the model says, `Registered` says whether anything changed,
//! and lists resolve to the model's members. The same body runs on
//! PostgreSQL when `CHIPSET_TEST_PG` names a server.

use std::collections::{BTreeMap, BTreeSet};

use chipset_directory::{Directory, Error, Recipients, Registered, Registration, Role};
use chipset_store::{AgentId, ReadOutcome};
use chipset_testkit::TempState;
use proptest::prelude::*;

use crate::agent;
use crate::place::Place;

const AGENTS: [&str; 4] = ["a", "b", "c", "d"];
const LISTS: [&str; 3] = ["qa", "dev", "ops"];

#[derive(Debug, Clone)]
enum Op {
    Register {
        who: usize,
        roles: Option<Vec<usize>>,
        model: Option<&'static str>,
        note: Option<&'static str>,
    },
    Add {
        list: usize,
        who: usize,
    },
    Remove {
        list: usize,
        who: usize,
    },
}

fn op() -> impl Strategy<Value = Op> {
    let text = || prop::option::of(prop::sample::select(vec!["", "x", "y"]));
    prop_oneof![
        (
            0..AGENTS.len(),
            prop::option::of(prop::collection::vec(0..LISTS.len(), 0..3)),
            text(),
            text()
        )
            .prop_map(|(who, roles, model, note)| Op::Register {
                who,
                roles,
                model,
                note
            }),
        (0..LISTS.len(), 0..AGENTS.len()).prop_map(|(list, who)| Op::Add { list, who }),
        (0..LISTS.len(), 0..AGENTS.len()).prop_map(|(list, who)| Op::Remove { list, who }),
    ]
}

/// What the model keeps of a profile.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Model {
    roles: BTreeSet<&'static str>,
    model: Option<&'static str>,
    note: Option<&'static str>,
}

fn role(i: usize) -> Role {
    Role::new(LISTS[i]).unwrap()
}

fn changed(r: &Registered) -> bool {
    !matches!(r, Registered::Unchanged(_))
}

fn check(dir: &Directory, model: &BTreeMap<usize, Model>) {
    for (i, name) in AGENTS.iter().enumerate() {
        match (dir.read(&agent(name)).unwrap(), model.get(&i)) {
            (ReadOutcome::Missing, None) => {}
            (ReadOutcome::Value(p), Some(m)) => {
                let roles: BTreeSet<&str> = p.roles.iter().map(Role::as_str).collect();
                assert_eq!(roles, m.roles, "{name}");
                assert_eq!(p.model.as_deref(), m.model, "{name}");
                assert_eq!(p.note.as_deref(), m.note, "{name}");
            }
            (read, m) => panic!("{name}: read {read:?}, model {m:?}"),
        }
    }
    let sender = AgentId::new("outsider").unwrap();
    for list in LISTS {
        let members: Vec<AgentId> = model
            .iter()
            .filter(|(_, m)| m.roles.contains(list))
            .map(|(i, _)| agent(AGENTS[*i]))
            .collect();
        let to: Recipients = format!("@{list}").parse().unwrap();
        match dir.resolve(&to, &sender) {
            Ok(got) => assert_eq!(got.agents, members, "@{list}"),
            Err(Error::EmptyList { .. }) => assert!(members.is_empty(), "@{list}"),
            Err(e) => panic!("@{list}: {e}"),
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn profiles_and_lists_follow_the_model(ops in prop::collection::vec(op(), 1..30)) {
        profiles_model(&Place::fs(), ops)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]

    #[test]
    fn profiles_and_lists_follow_the_model_on_postgres(ops in prop::collection::vec(op(), 1..30)) {
        // A fresh schema per case, as a fresh directory per case above.
        if let Some(place) = Place::pg("profiles_and_lists_follow_the_model_on_postgres") {
            profiles_model(&place, ops)?;
        }
    }
}

fn profiles_model(place: &Place, ops: Vec<Op>) -> Result<(), TestCaseError> {
    {
        let (t, _clock) = TempState::manual_no_sync();
        let dir = place.open(&t.state);
        let mut model: BTreeMap<usize, Model> = BTreeMap::new();
        for op in ops {
            match op {
                Op::Register {
                    who,
                    roles,
                    model: m,
                    note,
                } => {
                    let mut r = Registration::new();
                    r.roles = roles.as_ref().map(|v| v.iter().map(|i| role(*i)).collect());
                    r.model = m.map(str::to_owned);
                    r.note = note.map(str::to_owned);
                    let old = model.get(&who).cloned();
                    let mut new = old.clone().unwrap_or_default();
                    if let Some(v) = &roles {
                        new.roles = v.iter().map(|i| LISTS[*i]).collect();
                    }
                    if let Some(m) = m {
                        new.model = (!m.is_empty()).then_some(m);
                    }
                    if let Some(n) = note {
                        new.note = (!n.is_empty()).then_some(n);
                    }
                    let done = dir.register(&agent(AGENTS[who]), &r).unwrap();
                    prop_assert_eq!(changed(&done), old.as_ref() != Some(&new));
                    prop_assert_eq!(matches!(done, Registered::Created(_)), old.is_none());
                    model.insert(who, new);
                }
                Op::Add { list, who } | Op::Remove { list, who } => {
                    let add = matches!(op, Op::Add { .. });
                    let a = [agent(AGENTS[who])];
                    let done = if add {
                        dir.list_add(&role(list), &a)
                    } else {
                        dir.list_remove(&role(list), &a)
                    };
                    match model.get_mut(&who) {
                        None => {
                            let refused = matches!(done, Err(Error::NotRegistered { .. }));
                            prop_assert!(refused, "{:?}", done);
                        }
                        Some(m) => {
                            let before = m.roles.clone();
                            if add {
                                m.roles.insert(LISTS[list]);
                            } else {
                                m.roles.remove(LISTS[list]);
                            }
                            let done = done.unwrap();
                            prop_assert_eq!(changed(&done[0]), before != m.roles);
                        }
                    }
                }
            }
            check(&dir, &model);
        }
    }
    Ok(())
}
