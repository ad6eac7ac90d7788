//! The pool on a server ([`Pool::with_backend`], issue 30): each item is
//! rows of its own, a claim is the backend's claim, a change is a swap of
//! one row.
//!
//! | key | value |
//! |---|---|
//! | `pool/items/{id}.json` | the [`Item`], byte for byte its file on a directory; written once |
//! | `pool/entries/{id}.json` | its [`Entry`] (the table's line, with `done`, `released` and `releases`) and `format` |
//! | `pool/table.json` | no value: the key of the server's lock that posts take |
//!
//! No value grows with the pool (a directory's `table.json` is about 2 MB
//! at 10,000 items, over the seam's 1 MiB), and there is no log to fold:
//! a done or release is a compare-and-swap of its item's entry row.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::Duration;

use chipset_backend::{Backend, Claim, ClaimView, ClaimWrite, Dir, FsBackend, Key, Step, Wait};
use chipset_hook::{Assignment, Hook, HookStatus};
use chipset_store::{
    AgentId, Classify, CorruptReason, Corruption, Defect, DoctorMode, Finding, ReadOutcome, Report,
    StateDir, Unsupported,
};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result, cut_short};
use crate::format::{Entry, Item, POOL_FORMAT, Record, Table};
use crate::id::ItemId;
use crate::store::{Claimed, Pool, Posted, json};

/// How many times a claim is tried on a fresh snapshot when every
/// candidate it saw was taken meanwhile.
pub(crate) const ATTEMPTS: usize = 64;

/// One `pool/entries/{id}.json` row: the entry and the format.
#[derive(Debug, Serialize, Deserialize)]
struct Row {
    /// [`POOL_FORMAT`]; a larger one is unsupported.
    format: u32,
    #[serde(flatten)]
    entry: Entry,
}

fn dir(text: &str) -> Dir {
    let mut segments = text.split('/');
    let mut dir = Dir::new(segments.next().expect("a channel")).expect("a valid channel");
    for s in segments {
        dir = dir.join(s).expect("a valid folder");
    }
    dir
}

/// `pool/items`: the items, as their files.
fn items_dir() -> Dir {
    dir("pool/items")
}

/// `pool/entries`: one entry row per item, the rows a claim locks.
fn entries_dir() -> Dir {
    dir("pool/entries")
}

fn hooks_dir() -> Dir {
    dir("hooks")
}

fn key(dir: &Dir, name: &str) -> Result<Key> {
    Ok(dir.key(name)?)
}

/// `pool/table.json`: the key of the pool's lock (the lock a directory's
/// `.table.json.lock` is; on a server it holds no value).
pub(crate) fn table_key() -> Key {
    dir("pool").key("table.json").expect("a valid name")
}

fn row_path(key: &Key) -> PathBuf {
    PathBuf::from(key.to_string())
}

/// The error of a claim that found its candidates taken on every try.
pub(crate) fn contended(agent: &AgentId) -> Error {
    Error::Backend(Box::new(chipset_backend::Error::Conflict {
        key: format!("pool/entries (a claim by `{agent}`)"),
        current: None,
    }))
}

/// Reads every entry row: the pool as a table, in posting order.
pub(crate) fn load_rows(seam: &dyn Backend, op: &'static str) -> Result<Table> {
    let mut table = Table::empty();
    for (name, v) in seam.read_all(&entries_dir())? {
        let k = key(&entries_dir(), &name)?;
        table.items.push(parse_row(&k, &v.value, op)?);
    }
    table.items.sort_by_key(|e| e.seq);
    table.next_seq = table.items.last().map_or(1, |e| e.seq + 1);
    Ok(table)
}

fn parse_row(key: &Key, bytes: &[u8], op: &'static str) -> Result<Entry> {
    let path = row_path(key);
    match ReadOutcome::<Row>::from_json(&path, bytes) {
        ReadOutcome::Value(row) if row.format > POOL_FORMAT => Err(Error::Unsupported {
            op,
            unsupported: Unsupported::new(path, format!("pool entry format {}", row.format)),
        }),
        ReadOutcome::Value(row) if key.name() == format!("{}.json", row.entry.id) => Ok(row.entry),
        ReadOutcome::Value(row) => Err(Error::Corrupt {
            op,
            corruption: Corruption {
                path,
                reason: CorruptReason::WrongShape(format!(
                    "id `{}` does not match the row's name",
                    row.entry.id
                )),
            },
        }),
        ReadOutcome::Missing => Err(Error::Corrupt {
            op,
            corruption: Corruption {
                path,
                reason: CorruptReason::WrongShape("an empty entry row".to_owned()),
            },
        }),
        ReadOutcome::Corrupt(corruption) => Err(Error::Corrupt { op, corruption }),
        ReadOutcome::Unsupported(unsupported) => Err(Error::Unsupported { op, unsupported }),
    }
}

/// The key of `id`'s entry row.
pub(crate) fn entry_key(id: &ItemId) -> Result<Key> {
    key(&entries_dir(), &format!("{id}.json"))
}

pub(crate) fn row_bytes(key: &Key, entry: &Entry) -> Result<Vec<u8>> {
    StateDir::to_canonical_json(&Row {
        format: POOL_FORMAT,
        entry: entry.clone(),
    })
    .map_err(|source| {
        Error::Store(chipset_store::Error::Serialize {
            path: row_path(key),
            source,
        })
    })
}

/// Records `records` on the server: each is applied to its entry's row
/// with a compare-and-swap at the version read (read and applied again
/// when another writer came first). Applying a record twice changes
/// nothing, so a retry after an unknown outcome is safe.
///
/// A failure once a record was applied is [`Error::OutcomeUnknown`] of
/// `op`, naming the items recorded (and the one whose swap's outcome is
/// unknown).
pub(crate) fn record_rows(seam: &dyn Backend, op: &'static str, records: &[Record]) -> Result<()> {
    let mut recorded: Vec<ItemId> = Vec::new();
    for record in records {
        match record_row(seam, record) {
            Ok(true) => recorded.push(record.id.clone()),
            Ok(false) => {}
            Err(e) => {
                let wrote = !recorded.is_empty();
                if e.is_outcome_unknown() {
                    recorded.push(record.id.clone());
                }
                return Err(cut_short(op, &recorded, wrote, e));
            }
        }
    }
    Ok(())
}

/// Applies `record` to its entry's row; false when that changed nothing
/// (applied already, or no such row).
fn record_row(seam: &dyn Backend, record: &Record) -> Result<bool> {
    const OP: &str = "record work";
    let k = key(&entries_dir(), &format!("{}.json", record.id))?;
    loop {
        let Some(read) = seam.read(&k)? else {
            return Ok(false);
        };
        let before = parse_row(&k, &read.value, OP)?;
        let mut after = before.clone();
        record.apply(&mut after);
        if after == before {
            return Ok(false);
        }
        match seam.replace(&k, read.version, &row_bytes(&k, &after)?) {
            Ok(_) => return Ok(true),
            Err(chipset_backend::Error::Conflict { .. }) => {}
            Err(e) => return Err(e.into()),
        }
    }
}

/// Reads the item row `id`, as a directory's file would read.
pub(crate) fn read_item_row(
    seam: &dyn Backend,
    id: &ItemId,
    path: &Path,
) -> Result<ReadOutcome<Item>> {
    let k = key(&items_dir(), &format!("{id}.json"))?;
    Ok(match seam.read(&k)? {
        None => ReadOutcome::Missing,
        Some(v) => ReadOutcome::from_json(path, &v.value),
    })
}

/// Why a claim's decision stopped the claim.
enum Abort {
    /// The state moved since the snapshot (the claimer's own hook): try
    /// again on a fresh one.
    Again,
    /// A failure to report (a corrupt hook or row).
    Fail(Error),
}

impl Pool {
    /// Posts `fresh` on the server (under the pool's lock, with `table`
    /// read under it): every item's two rows in one transaction, the
    /// commit point.
    pub(crate) fn publish_rows(
        &self,
        seam: &dyn Backend,
        by: &AgentId,
        table: &Table,
        fresh: &[Item],
        results: Vec<Option<Posted>>,
    ) -> Result<Vec<Posted>> {
        let mut rows = Vec::with_capacity(fresh.len() * 2);
        let mut entries = Vec::with_capacity(fresh.len());
        for (item, seq) in fresh.iter().zip(table.next_seq..) {
            let entry = Entry::of(item, seq);
            let item_key = key(&items_dir(), &format!("{}.json", item.id))?;
            let entry_key = key(&entries_dir(), &format!("{}.json", item.id))?;
            rows.push((item_key, json(&self.item_path(&item.id), item)?));
            let bytes = row_bytes(&entry_key, &entry)?;
            rows.push((entry_key, bytes));
            entries.push(entry);
        }
        let steps: Vec<Step<'_>> = rows
            .iter()
            .map(|(key, value)| Step::Create { key, value })
            .collect();
        seam.transact(&steps)?;
        tracing::debug!(count = entries.len(), %by, "work posted");
        let mut entries = entries.into_iter();
        Ok(results
            .into_iter()
            .map(|r| {
                r.unwrap_or_else(|| Posted {
                    entry: entries.next().expect("one entry per new item"),
                    existing: false,
                })
            })
            .collect())
    }

    /// Claims the first of `candidates` (ready in the snapshot, in claim
    /// order) for `agent` with the backend's claim: the entry's row locked
    /// (`FOR UPDATE SKIP LOCKED`), the decision made inside the claim's
    /// transaction (the entry not done, no hook holding the item, the
    /// claimer's hook free) and the claimer's hook swapped in it.
    /// `None` when every one was taken meanwhile (try again on a fresh
    /// snapshot). `clearing` is the claimer's completed work (its item
    /// recorded done), taken off its hook by the same swap when the hook
    /// still holds it: then it is the claim's `finished`.
    pub(crate) fn claim_first(
        &self,
        agent: &AgentId,
        candidates: &[Entry],
        finished: &mut Option<ItemId>,
        clearing: Option<(&Assignment, &ItemId)>,
    ) -> Result<Option<Claimed>> {
        let seam = self.seam.as_deref().expect("a claim on a server");
        let names: Vec<String> = candidates
            .iter()
            .map(|e| format!("{}.json", e.id))
            .collect();
        let by_name: HashMap<&str, &Entry> =
            names.iter().map(String::as_str).zip(candidates).collect();
        let mine_name = format!("{agent}.json");
        let mine_key = key(&hooks_dir(), &mine_name)?;
        let mut stop: Option<Abort> = None;
        let mut picked: Option<(Entry, Assignment, bool)> = None;
        let abort = |name: &str| chipset_backend::Error::Conflict {
            key: name.to_owned(),
            current: None,
        };
        let mut decide = |view: &mut dyn ClaimView,
                          name: &str|
         -> chipset_backend::Result<Option<Vec<ClaimWrite>>> {
            let entry = by_name[name];
            let row = entries_dir().key(name)?;
            let Some(read) = view.read(&row)? else {
                return Ok(None);
            };
            match parse_row(&row, &read.value, "claim work") {
                Ok(now) if now.done.is_some() => return Ok(None),
                Ok(_) => {}
                Err(e) => {
                    stop = Some(Abort::Fail(e));
                    return Err(abort(name));
                }
            }
            // Another claim of this item committed before this one took its
            // row: its hook says so.
            let (mut mine, mut clears) = (None, false);
            for hook_name in view.list(&hooks_dir())? {
                let Some(holder) = hook_name
                    .strip_suffix(".json")
                    .and_then(|a| AgentId::new(a).ok())
                else {
                    continue;
                };
                let Some(read) = view.read(&hooks_dir().key(&hook_name)?)? else {
                    continue;
                };
                let hook = match serde_json::from_slice::<Hook>(&read.value) {
                    Ok(hook) => hook,
                    Err(e) => {
                        stop = Some(Abort::Fail(corrupt_hook(&self.hooks, holder, &e)));
                        return Err(abort(name));
                    }
                };
                if hook
                    .state
                    .work()
                    .is_some_and(|w| ItemId::of_bead(&w.bead_id) == entry.id)
                {
                    return Ok(None);
                }
                if hook_name == mine_name {
                    clears = clearing.is_some_and(|(done, _)| {
                        hook.state.status() == HookStatus::Completed
                            && hook.assignment().is_some_and(|a| a.same_fence(done))
                    });
                    mine = Some(read);
                }
            }
            let now = view.now()?;
            let current = mine.as_ref().map(|v| v.value.as_slice());
            let work = (entry.id.bead(), entry.title.clone());
            let done = clearing.map(|(a, _)| a);
            match self
                .hooks
                .plan_assign(agent, current, done, work, Some(agent), now)
            {
                Ok((Some(bytes), assignment)) => {
                    picked = Some((entry.clone(), assignment, clears));
                    Ok(Some(vec![ClaimWrite {
                        key: mine_key.clone(),
                        expected: mine.map(|v| v.version),
                        value: bytes,
                    }]))
                }
                // The claimer's hook took work since the snapshot.
                Ok((None, _)) | Err(chipset_hook::Error::AlreadyAssigned { .. }) => {
                    stop = Some(Abort::Again);
                    Err(abort(name))
                }
                Err(e) => {
                    stop = Some(Abort::Fail(e.into()));
                    Err(abort(name))
                }
            }
        };
        let table = table_key();
        let entries = entries_dir();
        let claim = Claim {
            lock: &table,
            dir: &entries,
            candidates: &names,
        };
        let result = seam.claim(&claim, &mut decide);
        match (result, stop) {
            (_, Some(Abort::Fail(e))) => Err(e),
            (_, Some(Abort::Again)) => Ok(None),
            (Ok(Some(_)), None) => {
                let (entry, assignment, cleared) = picked.expect("a claim decided on");
                tracing::debug!(item = %entry.id, %agent, "work claimed");
                let finished = match clearing {
                    Some((_, id)) if cleared => Some(id.clone()),
                    _ => finished.take(),
                };
                Ok(Some(Claimed {
                    entry,
                    assignment,
                    existing: false,
                    finished,
                }))
            }
            (Ok(None), None) => Ok(None),
            // The claimer's hook changed between the decision's read and
            // its swap: nothing was written.
            (Err(chipset_backend::Error::Conflict { .. }), None) => Ok(None),
            (Err(e), None) => Err(e.into()),
        }
    }

    /// [`Pool::doctor`] on a server: the entry rows read, the item rows
    /// agree with them, and no hook holds an item twice or after it was
    /// done. It reports; the one fix is clearing a hook that still holds
    /// a done item (nothing is moved aside on a server).
    pub(crate) fn doctor_on_server(&self, seam: &dyn Backend, mode: DoctorMode) -> Result<Report> {
        let mut report = Report::new(mode);
        let mut table = Table::empty();
        for (name, v) in seam.read_all(&entries_dir())? {
            let k = key(&entries_dir(), &name)?;
            report.scanned += 1;
            match parse_row(&k, &v.value, "check the pool") {
                Ok(entry) => table.items.push(entry),
                Err(Error::Corrupt { corruption, .. }) => {
                    let line = format!("`{k}`: {}", corruption.reason);
                    report.findings.push(
                        Finding::new(
                            "pool-entry-corrupt",
                            Defect::Corrupt(corruption.reason),
                            line,
                        )
                        .at(row_path(&k))
                        .fixable(false),
                    );
                }
                Err(Error::Unsupported { unsupported, .. }) => {
                    let line = format!("`{k}`: {}", unsupported.what);
                    report.findings.push(
                        Finding::new(
                            "pool-entry-unsupported",
                            Defect::Unsupported(unsupported.what),
                            line,
                        )
                        .at(row_path(&k)),
                    );
                }
                Err(e) => return Err(e),
            }
        }
        table.items.sort_by_key(|e| e.seq);
        let mut items = BTreeMap::new();
        for (name, v) in seam.read_all(&items_dir())? {
            let Some(id) = name
                .strip_suffix(".json")
                .and_then(|stem| ItemId::new(stem).ok())
            else {
                let line = format!("`pool/items/{name}` is not an item row (`{{id}}.json`)");
                report
                    .findings
                    .push(Finding::new("pool-stray", Defect::Stray, line));
                continue;
            };
            let path = self.item_path(&id);
            items.insert(id, ReadOutcome::from_json(&path, &v.value));
        }
        // Nothing is moved aside on a server: an orphan is reported only.
        self.check_items(false, &table, items, &mut report)?;
        let scan = self.scan_hooks("check the pool", false)?;
        self.check_hooks(mode == DoctorMode::Fix, &table, scan.by_agent, &mut report)?;
        Ok(report)
    }

    /// Returns a wait woken by any change to the pool or to a hook (a
    /// post, a claim, a release, a done, a completed hook), through any
    /// handle on the same state: another process, or on a server another
    /// host (`LISTEN/NOTIFY`). A deferred item becoming ready changes
    /// nothing: wait until [`Claimable::next_ready_at`](crate::Claimable)
    /// at most. `rescan` is the safety net's period. Read the pool again
    /// after every wake.
    ///
    /// # Errors
    ///
    /// A store error when the watch cannot be set up on a directory; a
    /// backend error on a server.
    pub fn watch(&self, rescan: Duration) -> Result<Box<dyn Wait>> {
        let dirs = [dir("pool"), items_dir(), entries_dir(), hooks_dir()];
        Ok(match &self.seam {
            Some(seam) => seam.watch(&dirs, rescan)?,
            None => {
                // A directory watches the folders that exist.
                self.state.channel_dir(Pool::CHANNEL)?;
                let dirs = [dir("pool"), hooks_dir()];
                self.state
                    .ensure_dir(&self.state.channel(chipset_store::Channel::new("hooks")))?;
                FsBackend::new(self.state.clone()).watch(&dirs, rescan)?
            }
        })
    }
}

/// A hook on the server that does not parse: fail closed, as a
/// directory's corrupt hook fails every claim.
fn corrupt_hook(hooks: &chipset_hook::Hooks, agent: AgentId, e: &serde_json::Error) -> Error {
    let path = hooks.path(&agent).to_path_buf();
    Error::Hook(chipset_hook::Error::Corrupt {
        agent,
        op: "claim work",
        corruption: Corruption {
            path,
            reason: match e.classify() {
                serde_json::error::Category::Data => CorruptReason::WrongShape(e.to_string()),
                _ => CorruptReason::Unparsable(e.to_string()),
            },
        },
    })
}
