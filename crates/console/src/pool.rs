//! The work pool's view: every item by state (claimed, by whom and since
//! when; ready, most urgent first; blocked and on what; deferred and until
//! when; done lately), and an item's detail with its body.

use std::time::Duration;

use chipset::Chipset;
use chipset::hook::Hook;
use chipset::pool::{ItemId, Listed, WorkState};
use chipset::store::{AgentId, ReadOutcome, Timestamp};

use crate::detail::Detail;
use chipset_failure::chain;

use crate::model::{Mark, Row, Snapshot, Table, View, short_age};
use crate::reads::Reads;

/// A done item is listed this long after it was done; older ones are
/// only counted.
pub(crate) const DONE_SHOWN: Duration = Duration::from_secs(24 * 3600);

/// The order the states are listed in.
fn rank(state: &WorkState) -> u8 {
    match state {
        WorkState::Claimed { .. } => 0,
        WorkState::Ready => 1,
        WorkState::Blocked { .. } => 2,
        WorkState::Deferred { .. } => 3,
        _ => 4,
    }
}

/// Returns the pool's table from what `reads` holds, at `now`.
pub(crate) fn table(now: Timestamp, reads: &Reads) -> Table {
    let mut table = Table::default();
    let listing = match &reads.pool {
        Some(Ok(listing)) => listing,
        Some(Err(e)) => return Table::unread("pool", format!("pool: {e}")),
        None => return table,
    };
    // Each might hold an item: the items it might hold are unconfirmed.
    for c in &listing.corrupt {
        table.problems.push(format!("unreadable hook: {c}"));
    }
    for u in &listing.unsupported {
        table.problems.push(format!("unsupported hook: {u}"));
    }
    let items = &listing.items;
    let hooks = match &reads.hooks {
        Some(Ok(h)) => Some(h),
        _ => None,
    };
    let mut shown: Vec<(&Listed, Option<Timestamp>)> = Vec::new();
    let mut counts = [0usize; 5];
    let mut old_done = 0;
    for l in items {
        counts[usize::from(rank(&l.state))] += 1;
        let since = since(l, hooks);
        if matches!(l.state, WorkState::Done { .. })
            && since.is_some_and(|at| now.since(at) > DONE_SHOWN)
        {
            old_done += 1;
            continue;
        }
        shown.push((l, since));
    }
    // Claimed, ready by priority then age, blocked, deferred, then the
    // latest done first.
    shown.sort_by(|(a, at_a), (b, at_b)| {
        let key = |l: &Listed| (rank(&l.state), l.entry.priority, l.entry.seq);
        match (rank(&a.state), rank(&b.state)) {
            (4, 4) => at_b.cmp(at_a).then(b.entry.seq.cmp(&a.entry.seq)),
            _ => key(a).cmp(&key(b)),
        }
    });
    for (l, at) in shown {
        table.rows.push(row(now, l, at));
    }
    let [claimed, ready, blocked, deferred, done] = counts;
    table.summary = format!(
        "{} items: {ready} ready, {claimed} claimed, {blocked} blocked, {deferred} deferred, {done} done",
        items.len()
    );
    if old_done > 0 {
        table.summary.push_str(&format!(
            " ({old_done} done over {} ago not listed)",
            short_age(DONE_SHOWN)
        ));
    }
    let unconfirmed = items.iter().filter(|l| l.unconfirmed).count();
    if unconfirmed > 0 {
        table.summary.push_str(&format!(
            "; {unconfirmed} unconfirmed (a hook cannot be read)"
        ));
    }
    table
}

/// When the item entered its state, where the files say: the claim (the
/// hook's assignment), the done (the table's record, or the completed
/// hook's last activity), the posting otherwise.
fn since(
    l: &Listed,
    hooks: Option<&std::collections::BTreeMap<AgentId, ReadOutcome<Hook>>>,
) -> Option<Timestamp> {
    let hook = |agent: &AgentId| match hooks.and_then(|h| h.get(agent)) {
        Some(ReadOutcome::Value(h)) => Some(h),
        _ => None,
    };
    match &l.state {
        WorkState::Claimed { holder, .. } => hook(holder)
            .and_then(|h| h.state.work().map(|w| w.assigned_at))
            .or(Some(l.entry.posted_at)),
        WorkState::Done { by, .. } => match &l.entry.done {
            Some(d) => Some(d.at),
            None => hook(by).map(|h| h.last_activity),
        },
        _ => Some(l.entry.posted_at),
    }
}

fn row(now: Timestamp, l: &Listed, at: Option<Timestamp>) -> Row {
    let e = &l.entry;
    let ago = |at: Option<Timestamp>| at.map_or("-".to_owned(), |t| short_age(now.since(t)));
    let mut notes: Vec<String> = Vec::new();
    let mut mark = Mark::Plain;
    let (state, who, since) = match &l.state {
        WorkState::Claimed { holder, hook } => {
            (format!("claimed ({hook})"), holder.to_string(), ago(at))
        }
        WorkState::Ready => ("ready".to_owned(), "-".to_owned(), ago(at)),
        WorkState::Blocked { on } => {
            mark = Mark::Warn;
            let on: Vec<&str> = on.iter().map(ItemId::as_str).collect();
            notes.push(format!("waits for {}", on.join(", ")));
            ("blocked".to_owned(), "-".to_owned(), ago(at))
        }
        WorkState::Deferred { until } => (
            "deferred".to_owned(),
            "-".to_owned(),
            format!("in {}", short_age(until.since(now))),
        ),
        WorkState::Done { by, recorded } => {
            if !recorded {
                notes.push("completed on the hook".to_owned());
            }
            ("done".to_owned(), by.to_string(), ago(at))
        }
        _ => ("?".to_owned(), "-".to_owned(), "-".to_owned()),
    };
    if let Some(r) = &e.released {
        if !matches!(l.state, WorkState::Done { .. }) {
            mark = mark.max_with(Mark::Warn);
        }
        notes.push(format!(
            "released {}x, last by {}: {}",
            e.releases, r.by, r.reason
        ));
    }
    if let Some(role) = &e.role {
        notes.push(format!("for {role}"));
    }
    // The table's state, which an unreadable hook may belie (claimed or done).
    let state = match l.unconfirmed {
        true => {
            mark = mark.max_with(Mark::Warn);
            notes.insert(0, "unconfirmed: an unreadable hook may hold it".to_owned());
            format!("{state}?")
        }
        false => state,
    };
    Row::new(
        e.id.to_string(),
        vec![
            e.id.to_string(),
            state,
            format!("P{}", e.priority),
            who,
            since,
            e.title.clone(),
            notes.join("; "),
        ],
        mark,
    )
}

/// Reads the detail of item `id`: its state as listed, and its body.
pub(crate) fn detail(chipset: &Chipset, snapshot: &Snapshot, id: &ItemId) -> Detail {
    let mut d = Detail::new(format!("work item {id}"));
    let now = chipset.state().now();
    match snapshot
        .table(View::Pool)
        .rows
        .iter()
        .find(|r| r.key == id.as_str())
    {
        Some(row) => {
            for (c, v) in View::Pool.columns().iter().zip(&row.cells).skip(1) {
                if !v.is_empty() {
                    d.line(format!("{}: {v}", c.to_lowercase()));
                }
            }
        }
        None => d.line("not listed now"),
    }
    match chipset.pool().item(id) {
        Ok(item) => {
            d.line(format!(
                "posted by {} {} ago at {}",
                item.posted_by,
                short_age(now.since(item.posted_at)),
                item.posted_at
            ));
            if !item.labels.is_empty() {
                d.line(format!("labels: {}", item.labels.join(", ")));
            }
            if !item.depends_on.is_empty() {
                let deps: Vec<&str> = item.depends_on.iter().map(ItemId::as_str).collect();
                d.line(format!("depends on: {}", deps.join(", ")));
            }
            if let Some(at) = item.not_before {
                d.line(format!("not before: {at}"));
            }
            if !item.body.is_empty() {
                d.line("");
                for line in item.body.lines().take(20) {
                    d.line(line.to_owned());
                }
            }
        }
        Err(e) => d.line(chain(&e)),
    }
    d
}
