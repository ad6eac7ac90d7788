//! The front door in one story: `cargo run --example tour`.

use std::{fmt::Write as _, io::Write as _, time::Duration};

use chipset::Chipset;
use chipset::bus::NewEvent;
use chipset::mail::NewMessage;
use chipset::store::{AgentId, TaskId};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let tmp = tempfile::tempdir()?;
    let door = Chipset::open(tmp.path().join("state"))?;
    let (hooks, mail, bus) = (door.hooks(), door.mail(), door.bus());
    let (mayor, cat): (AgentId, AgentId) = ("mayor".parse()?, "polecat-alpha".parse()?);
    let (task, mut out): (TaskId, String) = ("gt-abc12".parse()?, String::new());

    hooks.assign(&cat, "gt-abc12".parse()?, "Add README", Some(&mayor))?;
    let pickup = hooks.pickup(&cat)?;
    let work = pickup.work().ok_or("no work was pending")?;

    let ask = NewMessage::request(cat.clone(), mayor.clone(), task.clone(), "scope", "Usage?");
    let ask = mail.send(&ask)?;
    let before = mail.pending_replies(&task)?.len();
    let yes = NewMessage::response(mayor.clone(), cat.clone(), ask.id.clone(), "scope", "yes");
    mail.send(&yes)?;
    let after = mail.pending_replies(&task)?.len();
    writeln!(out, "gate: {before} request pending, {after} once answered")?;

    let mut waiter = bus.waiter(&mayor)?;
    let _ = bus.publish(&mayor, &NewEvent::new(cat.as_str(), "ready"))?;
    let woke = !waiter.wait(Duration::from_secs(5))?.is_empty();
    writeln!(out, "{mayor} woke to {cat}'s event: {woke}")?;
    hooks.complete(work)?;
    writeln!(out, "{}", serde_json::to_string_pretty(&door.status()?)?)?;
    match std::io::stdout().write_all(out.as_bytes()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(()), // a closed pipe (`| head`) is not a failure
    }
}
