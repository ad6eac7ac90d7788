//! The pool's doctor: the table, the log and the item files agree with
//! each other and with the hooks.

use std::collections::{BTreeMap, HashMap};

use chipset_hook::HookStatus;
use chipset_store::{Action, AgentId, Defect, DoctorMode, Finding, ReadOutcome, Report};

use crate::TABLE_CAP;
use crate::error::{Error, Result};
use crate::format::{Entry, Item, POOL_FORMAT, Record, Table};
use crate::id::ItemId;
use crate::settle::record_completed;
use crate::store::Pool;
use crate::transition::Hold;

/// What the table looked like to the doctor.
enum Found {
    /// Readable (possibly missing with no item file: an unused pool).
    Table(Table),
    /// To be rebuilt from the item files, the log and the hooks: it is
    /// corrupt, or missing while item files are there.
    Rebuild,
    /// Written by a newer version: nothing else can be judged.
    Unsupported,
}

impl Pool {
    /// Checks the pool under its lock and, with [`DoctorMode::Fix`],
    /// repairs what it can, saying what it did:
    ///
    /// | code | what | fix |
    /// |---|---|---|
    /// | `pool-table-corrupt` | `table.json` unreadable | copied aside; the table rebuilt over it |
    /// | `pool-table-missing` | no table, but item files | the table rebuilt |
    /// | `pool-table-unsupported` | a newer table | none (nothing else is checked) |
    /// | `pool-log-corrupt` | a bad line inside `log.jsonl` | the readable lines folded into the table, the log moved aside |
    /// | `pool-item-missing` | the table names an item whose file is gone | none: its body is lost |
    /// | `pool-item-corrupt`, `pool-item-unsupported` | an item file unreadable, or newer | none: claims do not need it |
    /// | `pool-item-mismatch` | an item file saying other than its table entry | none: a person decides |
    /// | `pool-item-orphan` | an item file no table names (a post cut short before its commit point) | moved aside |
    /// | `pool-stray` | a name in `items/` that is not `{id}.json` | none |
    /// | `pool-unknown-dependency` | an entry depending on an id the table lacks | none |
    /// | `pool-done-on-hook` | a hook still holds, pending or active, an item recorded done (a `done` cut short) | the hook cleared |
    /// | `pool-claimed-twice` | two hooks hold one item | none: a person decides |
    ///
    /// A rebuilt table holds one entry per readable item file, in posting
    /// order, with the log's records and the completed hooks applied;
    /// items done before whose hooks were cleared since are ready again
    /// (doing work twice is the safer mistake), and the release history
    /// the old table held is gone.
    ///
    /// A root whose pool was never used is clean and gets no file.
    ///
    /// # Errors
    ///
    /// A store error when a file cannot be read, written or moved; a
    /// corrupt hook is the hooks' doctor's finding, not an error here.
    pub fn doctor(&self, mode: DoctorMode) -> Result<Report> {
        if let Some(seam) = &self.seam {
            return self.doctor_on_server(seam.as_ref(), mode);
        }
        let mut report = Report::new(mode);
        if self
            .state
            .stat(&self.state.channel(Pool::CHANNEL))?
            .is_none()
        {
            return Ok(report);
        }
        let _guard = self.lock()?;
        let fix = mode == DoctorMode::Fix;
        let items = self.item_files(&mut report)?;
        let found = self.check_table(fix, !items.is_empty(), &mut report)?;
        let (records, log_bad) = self.check_log(&mut report)?;
        let (mut table, rebuilt) = match found {
            Found::Unsupported => return Ok(report),
            // Without a table, the item files cannot be judged: each is
            // the rebuilt table's to be.
            Found::Rebuild if !fix => return Ok(report),
            Found::Rebuild => (rebuild(&items), true),
            Found::Table(table) => (table, false),
        };
        apply(&mut table, &records);
        let scan = self.scan_hooks("check the pool", false)?;
        if rebuilt {
            record_completed(&mut table, &scan.by_item, self.state.now());
        }
        if rebuilt || (fix && log_bad.is_some()) {
            // The commit point: the table, with the log's records folded
            // in. Only then is a bad log moved aside: moved first, a
            // failure before the table was written lost its records (the
            // next Fix found no log to fold). Until it is moved, a reader
            // applies its records again, which changes nothing.
            self.write_table(&table)?;
            if let Some(at) = log_bad {
                let to = self.state.quarantine(&self.log_path())?;
                let line = format!(
                    "folded its {} readable records into the table",
                    records.len()
                );
                let finding = &mut report.findings[at];
                finding.actions.push(Action::quarantined(to));
                finding.actions.push(Action::Rewrote(line));
            }
            self.state.write_bytes(&self.log_path(), b"")?;
        }
        if rebuilt {
            let line = format!(
                "rebuilt the table from {} item files, the log and the hooks",
                table.items.len()
            );
            if let Some(f) = report
                .findings
                .iter_mut()
                .find(|f| matches!(f.code, "pool-table-corrupt" | "pool-table-missing"))
            {
                f.actions.push(Action::Rewrote(line));
            }
        }
        self.check_items(fix, &table, items, &mut report)?;
        self.check_hooks(fix, &table, scan.by_agent, &mut report)?;
        Ok(report)
    }

    /// Lists `items/`: the readable names by id with what each file holds;
    /// stray names are findings.
    fn item_files(&self, report: &mut Report) -> Result<BTreeMap<ItemId, ReadOutcome<Item>>> {
        let dir = self.state.channel(Pool::CHANNEL).join_static("items");
        let mut items = BTreeMap::new();
        let names = match self.state.stat(&dir)? {
            Some(_) => self.state.list(&dir)?,
            None => Vec::new(),
        };
        for name in names {
            let id = name
                .strip_suffix(".json")
                .and_then(|stem| ItemId::new(stem).ok());
            let Some(id) = id else {
                let line = format!("`pool/items/{name}` is not an item file (`{{id}}.json`)");
                report
                    .findings
                    .push(Finding::new("pool-stray", Defect::Stray, line));
                continue;
            };
            let read = self.state.read_json::<Item>(&self.item_path(&id))?;
            items.insert(id, read);
        }
        Ok(items)
    }

    /// Reads the table; with a fix, a corrupt one is copied aside.
    fn check_table(&self, fix: bool, any_items: bool, report: &mut Report) -> Result<Found> {
        let path = self.table_path();
        let present = self.state.stat(&path)?.is_some();
        if present {
            report.scanned += 1;
        }
        match self.read_table("check the pool") {
            Ok(_) if !present && any_items => {
                let line = "no `pool/table.json`, but item files: the pool's index is lost";
                report.findings.push(
                    Finding::new("pool-table-missing", Defect::Missing, line)
                        .at(path.to_path_buf()),
                );
                Ok(Found::Rebuild)
            }
            Ok(table) => Ok(Found::Table(table)),
            Err(Error::Corrupt { corruption, .. }) => {
                let line = format!("`{}`: {}", path.display(), corruption.reason);
                let mut finding = Finding::new(
                    "pool-table-corrupt",
                    Defect::Corrupt(corruption.reason),
                    line,
                )
                .at(path.to_path_buf());
                if fix {
                    // A copy, not a move: the rebuilt table replaces it in
                    // one write. Moved, a failure before that write left no
                    // table, which readers take for an empty pool (and a
                    // post then made the items orphans).
                    let to = self.state.quarantine_copy(&path, TABLE_CAP)?;
                    finding = finding.with(Action::quarantined(to));
                }
                report.findings.push(finding);
                Ok(Found::Rebuild)
            }
            Err(Error::Unsupported { unsupported, .. }) => {
                let line = format!("`{}`: {}", path.display(), unsupported.what);
                report.findings.push(
                    Finding::new(
                        "pool-table-unsupported",
                        Defect::Unsupported(unsupported.what),
                        line,
                    )
                    .at(path.to_path_buf()),
                );
                Ok(Found::Unsupported)
            }
            Err(e) => Err(e),
        }
    }

    /// Reads the log: its readable records, and the index in the report of
    /// the finding for its bad lines, if it has any.
    fn check_log(&self, report: &mut Report) -> Result<(Vec<Record>, Option<usize>)> {
        let path = self.log_path();
        let log = self.state.log_reader(&path)?.read_from::<Record>(0)?;
        let Some(bad) = log.bad_lines.first() else {
            return Ok((log.records, None));
        };
        let line = format!(
            "`{}`: {} bad lines, the first: {}",
            path.display(),
            log.bad_lines.len(),
            bad.reason
        );
        report.findings.push(
            Finding::new(
                "pool-log-corrupt",
                Defect::Corrupt(bad.reason.clone()),
                line,
            )
            .at(path.to_path_buf()),
        );
        Ok((log.records, Some(report.findings.len() - 1)))
    }

    /// Checks each item file against the table.
    pub(crate) fn check_items(
        &self,
        fix: bool,
        table: &Table,
        mut items: BTreeMap<ItemId, ReadOutcome<Item>>,
        report: &mut Report,
    ) -> Result<()> {
        for entry in &table.items {
            let path = self.item_path(&entry.id);
            report.scanned += 1;
            let finding = match items.remove(&entry.id) {
                None | Some(ReadOutcome::Missing) => Finding::new(
                    "pool-item-missing",
                    Defect::Missing,
                    format!("the table names `{}` but its file is missing", entry.id),
                )
                .fixable(false),
                Some(ReadOutcome::Value(item)) if item.format > POOL_FORMAT => Finding::new(
                    "pool-item-unsupported",
                    Defect::Unsupported(format!("pool item format {}", item.format)),
                    format!("`{}`: pool item format {}", path.display(), item.format),
                ),
                Some(ReadOutcome::Value(item)) if agrees(&item, entry) => continue,
                Some(ReadOutcome::Value(_)) => Finding::new(
                    "pool-item-mismatch",
                    Defect::Conflict,
                    format!("`{}` says other than its table entry", path.display()),
                ),
                Some(ReadOutcome::Corrupt(c)) => Finding::new(
                    "pool-item-corrupt",
                    Defect::Corrupt(c.reason.clone()),
                    format!("`{}`: {}", path.display(), c.reason),
                )
                .fixable(false),
                Some(ReadOutcome::Unsupported(u)) => Finding::new(
                    "pool-item-unsupported",
                    Defect::Unsupported(u.what.clone()),
                    format!("`{}`: {}", path.display(), u.what),
                ),
            };
            report
                .findings
                .push(finding.at(path.to_path_buf()).about(&entry.id));
        }
        // What is left is in no table: a post cut short before its commit
        // point. Not in the pool; a retry of the post writes it again.
        for id in items.into_keys() {
            let path = self.item_path(&id);
            report.scanned += 1;
            let line = format!(
                "`{}` is in no table: a post cut short before its commit point",
                path.display()
            );
            let mut finding = Finding::new("pool-item-orphan", Defect::Stale, line)
                .at(path.to_path_buf())
                .about(&id);
            if fix {
                finding = finding.with(Action::quarantined(self.state.quarantine(&path)?));
            }
            report.findings.push(finding);
        }
        let index: HashMap<&ItemId, &Entry> = table.items.iter().map(|e| (&e.id, e)).collect();
        for entry in &table.items {
            for dep in entry.depends_on.iter().filter(|d| !index.contains_key(d)) {
                let line = format!("`{}` depends on `{dep}`, which the table lacks", entry.id);
                report.findings.push(
                    Finding::new("pool-unknown-dependency", Defect::Conflict, line)
                        .at(self.table_path().to_path_buf())
                        .about(&entry.id),
                );
            }
        }
        Ok(())
    }

    /// Checks the hooks holding pool items: none twice, none done.
    pub(crate) fn check_hooks(
        &self,
        fix: bool,
        table: &Table,
        by_agent: HashMap<AgentId, Hold>,
        report: &mut Report,
    ) -> Result<()> {
        let index: HashMap<&ItemId, &Entry> = table.items.iter().map(|e| (&e.id, e)).collect();
        let mut holders: BTreeMap<ItemId, Vec<AgentId>> = BTreeMap::new();
        let mut agents: Vec<_> = by_agent.into_iter().collect();
        agents.sort_by(|a, b| a.0.cmp(&b.0));
        for (agent, hold) in agents {
            let id = ItemId::of_bead(&hold.assignment.work.bead_id);
            let Some(entry) = index.get(&id) else {
                continue;
            };
            holders.entry(id.clone()).or_default().push(agent.clone());
            if entry.done.is_some() && hold.status != HookStatus::Completed {
                let path = self.hooks.path(&agent);
                let line = format!(
                    "the hook of `{agent}` still holds `{id}`, which the pool records done"
                );
                let mut finding = Finding::new("pool-done-on-hook", Defect::Unfinished, line)
                    .at(path.to_path_buf())
                    .about(&id);
                if fix {
                    finding = finding.with(match self.retire(&hold)? {
                        true => Action::Completed(format!("cleared the hook of `{agent}`")),
                        false => Action::LeftAlone("the hook moved on since the check".to_owned()),
                    });
                }
                report.findings.push(finding);
            }
        }
        for (id, agents) in holders.into_iter().filter(|(_, a)| a.len() > 1) {
            let names: Vec<String> = agents.iter().map(|a| format!("`{a}`")).collect();
            let line = format!("`{id}` is on the hooks of {}", names.join(" and "));
            report.findings.push(
                Finding::new("pool-claimed-twice", Defect::Conflict, line)
                    .at(self.hooks.dir().to_path_buf())
                    .about(&id),
            );
        }
        Ok(())
    }
}

/// Returns true when the item file says what its table entry says.
fn agrees(item: &Item, entry: &Entry) -> bool {
    let mut from_file = Entry::of(item, entry.seq);
    from_file.done.clone_from(&entry.done);
    from_file.released.clone_from(&entry.released);
    from_file.releases = entry.releases;
    from_file == *entry
}

/// A table of the readable item files, in posting order.
fn rebuild(items: &BTreeMap<ItemId, ReadOutcome<Item>>) -> Table {
    let mut found: Vec<&Item> = items
        .iter()
        .filter_map(|(id, r)| match r {
            ReadOutcome::Value(item) if item.format <= POOL_FORMAT && item.id == *id => Some(item),
            _ => None,
        })
        .collect();
    found.sort_by(|a, b| (a.posted_at, &a.id).cmp(&(b.posted_at, &b.id)));
    let mut table = Table::empty();
    for item in found {
        table.items.push(Entry::of(item, table.next_seq));
        table.next_seq += 1;
    }
    table
}

/// Applies the log's records to the table.
fn apply(table: &mut Table, records: &[Record]) {
    let index: HashMap<ItemId, usize> = table
        .items
        .iter()
        .enumerate()
        .map(|(n, e)| (e.id.clone(), n))
        .collect();
    for record in records {
        if let Some(n) = index.get(&record.id) {
            record.apply(&mut table.items[*n]);
        }
    }
}
