//! A small orchestrator through the front door alone: a lead posts work to
//! the pool, two agents claim it onto their hooks and lease the files they
//! edit, the lead's group request gates the release until one answers, and
//! the lead waits for events and attention on a current-thread runtime.
//!
//! `cargo run --example orchestrator --features tokio`

#[macro_use]
mod support;

use std::error::Error;
use std::time::Duration;

use chipset::bus::NewEvent;
use chipset::directory::Registration;
use chipset::lease::{LeaseMode, LeaseRequest};
use chipset::mail::NewMessage;
use chipset::pool::{NewItem, ReadyFilter};
use chipset::search::Query;
use chipset::store::{AgentId, TaskId};
use chipset::{Chipset, Classify, DoctorMode};

fn main() -> Result<(), Box<dyn Error>> {
    let tmp = tempfile::tempdir()?;
    let door = Chipset::open(tmp.path().join("state"))?;
    let (lead, ann, bob): (AgentId, AgentId, AgentId) =
        ("lead".parse()?, "ann".parse()?, "bob".parse()?);
    let mut worker = Registration::new();
    worker.roles = Some(vec!["workers".parse()?]);
    for agent in [&ann, &bob] {
        door.directory().register(agent, &worker)?;
    }
    door.directory().register(&lead, &Registration::new())?;

    // The lead posts under its own ids, so a retry after an unknown
    // outcome returns the first post instead of posting twice.
    let items = [
        NewItem::new("Fix the flaky parser test").with_id("w-parser".parse()?),
        NewItem::new("Write the release notes").with_id("w-notes".parse()?),
    ];
    let posted = retry(|| door.pool().post_many(&lead, &items))?;
    say!("lead posted {} items", posted.len());

    // Each agent claims the next ready item onto its hook and starts it.
    let mut held = Vec::new();
    for agent in [&ann, &bob] {
        let claimed = door.pool().claim_next(agent, &ReadyFilter::new())?;
        let claimed = claimed.ok_or("no item was ready")?;
        let pickup = door.hooks().pickup(agent)?;
        let work = pickup.work().ok_or("the claim left no work to start")?;
        say!("{agent} claimed and started {}", work.work.bead_id);
        held.push((agent.clone(), claimed.entry.id));
    }

    // Ann leases the parser; Bob's overlapping lease is refused by name.
    let parser = LeaseRequest::new(ann.clone(), LeaseMode::Exclusive, ["src/parser/**"]);
    let lease = door.leases().acquire(&parser)?.lease;
    let lexer = LeaseRequest::new(bob.clone(), LeaseMode::Exclusive, ["src/parser/lexer.rs"]);
    match door.leases().acquire(&lexer) {
        Err(chipset::lease::Error::Conflict { conflicts }) => {
            say!("bob is refused: {} holds the parser", conflicts[0].holder);
        }
        other => return Err(format!("expected a conflict, got {other:?}").into()),
    }

    // The lead asks the group; one answer clears the release's gate.
    let release: TaskId = "release-1".parse()?;
    let ask = NewMessage::request(
        lead.clone(),
        vec![ann.clone(), bob.clone()],
        release.clone(),
        "ship-it",
        "ok to ship?",
    );
    let copies = door.mail().send_group(&ask.answered_by_any())?;
    say!(
        "gate: {} requests pending",
        door.mail().pending_replies(&release)?.len()
    );
    let to_ann = copies
        .iter()
        .find(|m| m.to == ann)
        .ok_or("ann got no copy")?;
    let yes = NewMessage::response(
        ann.clone(),
        lead.clone(),
        to_ann.id.clone(),
        "ship-it",
        "yes",
    );
    door.mail().send(&yes)?;
    say!(
        "gate: {} once ann answered",
        door.mail().pending_replies(&release)?.len()
    );

    let hits = door.search(&Query::new("flaky"))?;
    let roles = door.directory().whois(&ann)?.profile.roles;
    let roles: Vec<&str> = roles.iter().map(|r| r.as_str()).collect();
    say!(
        "search `flaky`: {} hit(s); ann's roles: {roles:?}",
        hits.len()
    );

    // The lead waits without blocking its runtime: for Bob's event, then
    // for whatever needs it now (the event and Ann's answer).
    let runtime = tokio::runtime::Builder::new_current_thread().build()?;
    runtime.block_on(async {
        let mut waiter = door.bus().waiter_async(&lead).await?;
        let _ = door
            .bus()
            .publish(&lead, &NewEvent::new(bob.as_str(), "notes-drafted"))?;
        let woke = waiter.wait_async(Duration::from_secs(5)).await?;
        let brief = door
            .attention()
            .wait_async(&lead, Duration::from_secs(5))
            .await?;
        say!(
            "lead woke to {} event(s); needs: {:?}",
            woke.len(),
            brief.kinds()
        );
        Ok::<_, Box<dyn Error>>(())
    })?;

    // The work is done: record it, free the parser, look at everything.
    for (agent, item) in &held {
        door.pool().done(agent, item)?;
    }
    let _ = door.leases().release(&ann, lease.token)?;
    let status = door.status()?;
    for line in &status.agents {
        say!("{}: {} unread", line.agent, line.inbox);
    }
    say!("pool: {} of {} done", status.pool.done, status.pool.total());
    let checkup = door.doctor(DoctorMode::Check)?;
    say!("doctor: {} open problem(s)", checkup.open());
    Ok(())
}

/// Runs `op` again while its outcome is unknown (it may have made its
/// change): each channel's retry with the same ids returns the first
/// attempt's result.
fn retry<T, E: Classify>(mut op: impl FnMut() -> Result<T, E>) -> Result<T, E> {
    let mut left = 3;
    loop {
        match op() {
            Err(e) if e.is_outcome_unknown() && left > 0 => left -= 1,
            done => return done,
        }
    }
}
