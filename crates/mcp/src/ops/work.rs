//! The work pool's tools (`work_ready`, `work_claim`, `work_release`) and
//! their views, which the command line prints too (`chipset work …`).

use chipset::pool::{
    Claimed, Entry, ItemId, Listed, ReadyFilter, ReleaseRecord, Settled, WorkState,
};
use chipset_failure::{Failure, plural};
use schemars::JsonSchema;
use serde::Serialize;

use super::{Ctx, Outcome, Reply, id};
use crate::params::{WorkClaim, WorkReady, WorkRelease};

/// An item as the views show it: its table entry and where it is now.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct WorkRecord {
    /// The item id (also the bead id on its claimer's hook).
    pub id: String,
    /// What to do.
    pub title: String,
    /// 0 (most urgent) ..= 4.
    pub priority: u8,
    /// Its labels.
    pub labels: Vec<String>,
    /// The role it is for, if any.
    pub role: Option<String>,
    /// The items it waits for.
    pub depends_on: Vec<String>,
    /// Not ready before this time (RFC 3339).
    pub not_before: Option<String>,
    /// When it was posted (RFC 3339).
    pub posted_at: String,
    /// `ready`, `deferred`, `blocked`, `claimed` or `done`; `unknown` for
    /// an item just posted whose state could not be read back.
    pub state: String,
    /// The agent holding it (claimed) or that did it (done).
    pub holder: Option<String>,
    /// The hook's status while claimed: `pending` or `active`.
    pub hook: Option<String>,
    /// The dependencies not done yet (blocked).
    pub blocked_on: Vec<String>,
    /// True when a hook the listing could not read might hold the item:
    /// `state` (ready, blocked or deferred) is the table's, and it may be
    /// claimed or done. Absent when false.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub unconfirmed: bool,
    /// The last return to the pool.
    pub released: Option<WorkReleaseRecord>,
    /// How many times it was returned to the pool.
    pub releases: u32,
}

/// The last return of an item to the pool.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct WorkReleaseRecord {
    /// Who returned it (its holder, or a witness).
    pub by: String,
    /// Whose hook it was taken from.
    pub holder: String,
    /// When (RFC 3339).
    pub at: String,
    /// Why.
    pub reason: String,
}

impl WorkRecord {
    /// Returns the view of `entry` in `state`.
    pub fn of(entry: &Entry, state: &WorkState) -> Self {
        let (holder, hook, blocked_on) = match state {
            WorkState::Claimed { holder, hook } => {
                (Some(holder.to_string()), Some(hook.to_string()), Vec::new())
            }
            WorkState::Done { by, .. } => (Some(by.to_string()), None, Vec::new()),
            WorkState::Blocked { on } => (None, None, on.iter().map(ToString::to_string).collect()),
            _ => (None, None, Vec::new()),
        };
        WorkRecord {
            id: entry.id.to_string(),
            title: entry.title.clone(),
            priority: entry.priority,
            labels: entry.labels.clone(),
            role: entry.role.clone(),
            depends_on: entry.depends_on.iter().map(ToString::to_string).collect(),
            not_before: entry.not_before.map(|t| t.to_string()),
            posted_at: entry.posted_at.to_string(),
            state: state.as_str().to_owned(),
            holder,
            hook,
            blocked_on,
            unconfirmed: false,
            released: entry.released.as_ref().map(WorkReleaseRecord::of),
            releases: entry.releases,
        }
    }

    /// Returns the view of a listed item.
    pub fn of_listed(listed: &Listed) -> Self {
        let mut record = WorkRecord::of(&listed.entry, &listed.state);
        record.unconfirmed = listed.unconfirmed;
        record
    }

    /// Returns one text line: id, priority, state, title.
    pub fn line(&self) -> String {
        let mut state = self.state.clone();
        if let Some(h) = &self.holder {
            state.push_str(&format!(" by {h}"));
        }
        if !self.blocked_on.is_empty() {
            state.push_str(&format!(" on {}", self.blocked_on.join(",")));
        }
        if let (Some(t), "deferred") = (&self.not_before, self.state.as_str()) {
            state.push_str(&format!(" until {t}"));
        }
        if self.unconfirmed {
            state.push_str(", unconfirmed");
        }
        let mut line = format!("{} P{} [{state}] {}", self.id, self.priority, self.title);
        if !self.labels.is_empty() {
            line.push_str(&format!(" #{}", self.labels.join(" #")));
        }
        if let Some(role) = &self.role {
            line.push_str(&format!(" (role {role})"));
        }
        line
    }
}

impl WorkReleaseRecord {
    fn of(r: &ReleaseRecord) -> Self {
        WorkReleaseRecord {
            by: r.by.to_string(),
            holder: r.holder.to_string(),
            at: r.at.to_string(),
            reason: r.reason.clone(),
        }
    }
}

/// `chipset work post`: the item posted.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct WorkPosted {
    /// The item.
    pub item: WorkRecord,
    /// True when it was posted before with the same id and content (a
    /// retry): nothing changed.
    pub existing: bool,
}

/// `work_ready`, `chipset work ready` and `chipset work list`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct WorkListing {
    /// The items (ready: most urgent, then oldest first; list: in posting
    /// order), at most `limit`.
    pub items: Vec<WorkRecord>,
    /// How many there are in all.
    pub total: usize,
    /// Why each hook the listing could not read could not be read (`work
    /// list` only: the others fail on one). Absent when none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unreadable: Vec<String>,
}

impl WorkListing {
    /// Returns the listing of `items`, keeping the first `limit`, and its text.
    pub fn of(items: &[Listed], limit: usize, empty: &str) -> (Self, String) {
        let total = items.len();
        let items: Vec<WorkRecord> = items
            .iter()
            .take(limit)
            .map(WorkRecord::of_listed)
            .collect();
        let mut text: String = items.iter().map(|r| format!("{}\n", r.line())).collect();
        if items.len() < total {
            text.push_str(&format!(
                "… {} more ({total} in all): pass a larger limit\n",
                total - items.len()
            ));
        }
        if text.is_empty() {
            text = format!("{empty}\n");
        }
        let view = WorkListing {
            items,
            total,
            unreadable: Vec::new(),
        };
        (view, text)
    }
}

/// `work_claim`: the item now on the agent's hook, or none when nothing is ready.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct WorkClaimed {
    /// The claimed item; none when nothing was ready.
    pub item: Option<WorkRecord>,
    /// The hook's generation for it (the fence of its assignment).
    pub generation: Option<u64>,
    /// True when the hook already held this item (a retry): nothing changed.
    pub existing: bool,
    /// The item the agent had completed, recorded done by this claim.
    pub finished: Option<String>,
}

impl WorkClaimed {
    /// Returns the view of a claim and its text.
    pub fn of(claimed: Option<&Claimed>) -> (Self, String) {
        let Some(c) = claimed else {
            let view = WorkClaimed {
                item: None,
                generation: None,
                existing: false,
                finished: None,
            };
            return (view, "nothing ready\n".to_owned());
        };
        let state = WorkState::Claimed {
            holder: c.assignment.agent.clone(),
            hook: chipset::hook::HookStatus::Pending,
        };
        let item = WorkRecord::of(&c.entry, &state);
        let mut text = String::new();
        if let Some(f) = &c.finished {
            text.push_str(&format!("recorded {f} done\n"));
        }
        text.push_str(&format!(
            "{} {} {}: {}\n",
            if c.existing {
                "still holding"
            } else {
                "claimed"
            },
            item.id,
            format_args!("P{}", item.priority),
            item.title
        ));
        let view = WorkClaimed {
            item: Some(item),
            generation: Some(c.assignment.generation),
            existing: c.existing,
            finished: c.finished.as_ref().map(ToString::to_string),
        };
        (view, text)
    }
}

/// `work_release` and `chipset work release|done`: the item now.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct WorkSettled {
    /// The item.
    pub item: WorkRecord,
    /// True when it had already been released or done (a retry).
    pub existing: bool,
}

impl WorkSettled {
    /// Returns the view of a release or a done (`verb`: `released`, `done`) and its text.
    pub fn of(settled: &Settled, verb: &str) -> (Self, String) {
        let state = match (&settled.entry.done, verb) {
            (Some(d), _) => WorkState::Done {
                by: d.by.clone(),
                recorded: true,
            },
            _ => WorkState::Ready,
        };
        let item = WorkRecord::of(&settled.entry, &state);
        let text = if settled.existing {
            format!("{} was already {verb}\n", item.id)
        } else {
            format!("{verb} {}\n", item.id)
        };
        let existing = settled.existing;
        (WorkSettled { item, existing }, text)
    }
}

/// Returns the filter of a label list and a role.
pub fn filter(labels: &[String], role: Option<&str>) -> ReadyFilter {
    let mut f = ReadyFilter::new();
    for l in labels {
        f = f.with_label(l.clone());
    }
    if let Some(r) = role {
        f = f.with_role(r);
    }
    f
}

pub(crate) fn work_ready(ctx: &Ctx, p: WorkReady) -> Outcome {
    let limit = crate::params::limit(p.limit)?;
    let labels: Vec<String> = p.label.into_iter().collect();
    let ready = ctx.pool().ready(&filter(&labels, p.role.as_deref()))?;
    let (view, text) = WorkListing::of(&ready, limit, "nothing ready");
    Ok(Reply::new(text, view))
}

pub(crate) fn work_claim(ctx: &Ctx, p: WorkClaim) -> Outcome {
    let pool = ctx.pool();
    let claimed = match &p.id {
        // A label or role says which item to choose: with an id there is
        // nothing to choose, and ignoring them would claim what they exclude.
        Some(_) if p.label.is_some() || p.role.is_some() => {
            return Err(Failure::usage(
                "label and role choose among ready items: give them without id, or id alone",
            ));
        }
        Some(item) => Some(pool.claim(&ctx.agent, &id::<ItemId>(item)?)?),
        None => {
            let labels: Vec<String> = p.label.into_iter().collect();
            pool.claim_next(&ctx.agent, &filter(&labels, p.role.as_deref()))?
        }
    };
    let (view, mut text) = WorkClaimed::of(claimed.as_ref());
    if view.item.is_some() {
        text.push_str("it is on your hook: hook_pickup starts it\n");
    }
    Ok(Reply::new(text, view))
}

pub(crate) fn work_release(ctx: &Ctx, p: WorkRelease) -> Outcome {
    let settled = ctx
        .pool()
        .release(&ctx.agent, &id::<ItemId>(&p.id)?, &p.reason)?;
    let (view, text) = WorkSettled::of(&settled, "released");
    let text = format!(
        "{text}{} so far\n",
        plural(view.item.releases as usize, "release")
    );
    Ok(Reply::new(text, view))
}
