//! Directory benchmarks:
//!
//! - `list/200_agents`: `Directory::list` of 200 registered agents, each
//!   with a presence, a hook and mail in the manifest (what `chipset agent
//!   list` runs), warm.
//! - `resolve/200_agents`: `Directory::resolve` of `@all` (what a group
//!   send to everyone reads first).
//!
//! The state root is made under `TMPDIR`, so the disk can be chosen.

#![allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    reason = "a bench builds its fixtures in a temporary directory"
)]

use std::hint::black_box;

use chipset_directory::{Directory, Filter, Recipients, Registration, Role};
use chipset_mail::{Mail, NewMessage};
use chipset_store::{AgentId, StateDir, TaskId};
use criterion::{Criterion, criterion_group, criterion_main};

const AGENTS: usize = 200;

fn fixture(dir: &std::path::Path) -> Directory {
    let state = StateDir::open(dir).unwrap();
    let directory = Directory::new(state.clone());
    let mail = Mail::new(state.clone());
    let bus = chipset_bus::Bus::new(state);
    let task = TaskId::new("t1").unwrap();
    for i in 0..AGENTS {
        let agent = AgentId::new(format!("agent-{i:03}")).unwrap();
        let mut me = Registration::new();
        me.roles = Some(vec![Role::new(format!("team-{}", i % 10)).unwrap()]);
        me.program = Some("claude-code".to_owned());
        me.model = Some("opus-4".to_owned());
        me.host = Some(format!("box-{}", i % 7));
        me.task = Some(format!("gt-{i:05}"));
        directory.register(&agent, &me).unwrap();
        bus.heartbeat(&agent).unwrap();
        let peer = AgentId::new(format!("agent-{:03}", (i + 1) % AGENTS)).unwrap();
        mail.send(&NewMessage::notify(
            agent,
            peer,
            task.clone(),
            "status",
            "hello",
        ))
        .unwrap();
    }
    directory
}

fn bench(c: &mut Criterion) {
    let tmp = tempfile::tempdir().unwrap();
    let directory = fixture(tmp.path());
    assert_eq!(
        directory.list(&Filter::default()).unwrap().items.len(),
        AGENTS
    );
    c.bench_function("list/200_agents", |b| {
        b.iter(|| black_box(directory.list(&Filter::default()).unwrap()));
    });
    let all: Recipients = "@all".parse().unwrap();
    let me = AgentId::new("agent-000").unwrap();
    c.bench_function("resolve/200_agents", |b| {
        b.iter(|| black_box(directory.resolve(&all, &me).unwrap()));
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
