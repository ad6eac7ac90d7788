//! The pool's files and the hooks as the pool reads them: the table and
//! the log under the pool's lock, the item files, and what each hook holds.

use std::collections::HashMap;

use chipset_store::{
    AgentId, CorruptReason, Corruption, Listing, LockGuard, ReadOutcome, Unsupported,
};

use crate::TABLE_CAP;
use crate::error::{Error, Result};
use crate::format::{Item, POOL_FORMAT, Record, Table};
use crate::id::ItemId;
use crate::store::{Pool, Scan, json};
use crate::transition::Hold;

/// The pool's lock, released on drop.
pub(crate) enum Guard {
    /// The kernel's lock of `pool/.table.json.lock`.
    Store { _guard: LockGuard },
    /// The server's lock of `pool/table.json`.
    Seam { _guard: chipset_backend::LockGuard },
}

/// The fewest records the log holds before a done, release or claim folds
/// it into the table.
pub(crate) const LOG_FOLD_MIN: usize = 16;

/// How many records the log may hold before a change folds it into the
/// table: a quarter of the items, and at least [`LOG_FOLD_MIN`]. A fold
/// rewrites the table, so its cost per recorded change stays that of a
/// few entries, and a load never parses a log longer than a quarter of
/// the table.
pub(crate) fn fold_at(items: usize) -> usize {
    (items / 4).max(LOG_FOLD_MIN)
}

impl Pool {
    /// Returns what `agent`'s hook holds, if anything. `op` reads before
    /// "the hook of `agent`" in an error ("finish the work on").
    pub(crate) fn hold_of(&self, agent: &AgentId, op: &'static str) -> Result<Option<Hold>> {
        Ok(match self.hooks.read(agent)? {
            ReadOutcome::Missing => None,
            ReadOutcome::Value(hook) => hook.assignment().map(|assignment| Hold {
                status: hook.state.status(),
                assignment,
            }),
            ReadOutcome::Corrupt(corruption) => {
                return Err(Error::Hook(chipset_hook::Error::Corrupt {
                    agent: agent.clone(),
                    op,
                    corruption,
                }));
            }
            ReadOutcome::Unsupported(unsupported) => {
                return Err(Error::Hook(chipset_hook::Error::Unsupported {
                    agent: agent.clone(),
                    op,
                    unsupported,
                }));
            }
        })
    }

    /// Reads every hook: what each holds, by item and by agent. A corrupt or
    /// unsupported hook is an error: it might hold an item. `op` reads
    /// before "the hook of `agent`" in it ("list the work on").
    pub(crate) fn holds(
        &self,
        op: &'static str,
    ) -> Result<(HashMap<ItemId, Hold>, HashMap<AgentId, Hold>)> {
        let scan = self.scan_hooks(op, true)?;
        Ok((scan.by_item, scan.by_agent))
    }

    /// [`Pool::holds`]; with `strict` false, unreadable hooks are named
    /// in [`Scan::unreadable`] instead of failing.
    pub(crate) fn scan_hooks(&self, op: &'static str, strict: bool) -> Result<Scan> {
        let mut by_item = HashMap::new();
        let mut by_agent = HashMap::new();
        let mut unreadable = Listing::default();
        for (agent, read) in self.hooks.list()? {
            let hold = match read {
                ReadOutcome::Missing => continue,
                ReadOutcome::Value(hook) => match hook.assignment() {
                    Some(assignment) => Hold {
                        status: hook.state.status(),
                        assignment,
                    },
                    None => continue,
                },
                read @ (ReadOutcome::Corrupt(_) | ReadOutcome::Unsupported(_)) if !strict => {
                    unreadable.push(read.map(|_| ()));
                    continue;
                }
                ReadOutcome::Corrupt(corruption) => {
                    return Err(Error::Hook(chipset_hook::Error::Corrupt {
                        agent,
                        op,
                        corruption,
                    }));
                }
                ReadOutcome::Unsupported(unsupported) => {
                    return Err(Error::Hook(chipset_hook::Error::Unsupported {
                        agent,
                        op,
                        unsupported,
                    }));
                }
            };
            by_item.insert(ItemId::of_bead(&hold.assignment.work.bead_id), hold.clone());
            by_agent.insert(agent, hold);
        }
        Ok(Scan {
            by_item,
            by_agent,
            unreadable,
        })
    }

    /// Takes the pool's lock: the kernel's lock of `pool/.table.json.lock`
    /// on a directory, the server's lock of `pool/table.json` on a server
    /// (released by the server when the holder's session ends).
    pub(crate) fn lock(&self) -> Result<Guard> {
        if let Some(seam) = &self.seam {
            return Ok(Guard::Seam {
                _guard: seam.lock(&crate::server::table_key())?,
            });
        }
        self.state.channel_dir(Pool::CHANNEL)?;
        Ok(Guard::Store {
            _guard: self.state.lock(&self.table_path())?,
        })
    }

    /// Reads the log, then the table, and applies the log to the table.
    /// Returns the table and how many records the log held. The log is
    /// read first: a post that folds the log into the table and empties
    /// the log writes the table first, so a reader sees every record in
    /// the log it read or in the table it reads after.
    pub(crate) fn load(&self, op: &'static str) -> Result<(Table, usize)> {
        if let Some(seam) = &self.seam {
            return Ok((crate::server::load_rows(seam.as_ref(), op)?, 0));
        }
        let log = self
            .state
            .log_reader(&self.log_path())?
            .read_from::<Record>(0)?;
        if let Some(bad) = log.bad_lines.first() {
            return Err(Error::Corrupt {
                op,
                corruption: Corruption {
                    path: self.log_path().to_path_buf(),
                    reason: bad.reason.clone(),
                },
            });
        }
        let mut table = self.read_table(op)?;
        let index: HashMap<ItemId, usize> = table
            .items
            .iter()
            .enumerate()
            .map(|(n, e)| (e.id.clone(), n))
            .collect();
        for record in &log.records {
            if let Some(n) = index.get(&record.id) {
                record.apply(&mut table.items[*n]);
            }
        }
        Ok((table, log.records.len()))
    }

    /// Records `records`, already applied to `table` (which is the table
    /// and log as loaded under the pool's lock, with every change made
    /// since): appends them to the log with one write and one sync, or,
    /// once the log would hold [`fold_at`] records or more, folds it: writes
    /// `table` (the commit point) and empties the log. `logged` is how many
    /// records the log holds, kept up to date.
    ///
    /// Folding here, and not only at a post, bounds the log in a pool that
    /// only sees claims, releases and dones. A crash between the table's
    /// rename and the log's emptying leaves records the table holds
    /// already; applying them again changes nothing.
    ///
    /// On a server each record is a swap of its own: `op` (`claiming`,
    /// `releasing`, …) names the operation in the unknown outcome of a
    /// failure after one committed.
    pub(crate) fn record(
        &self,
        op: &'static str,
        table: &Table,
        logged: &mut usize,
        records: &[Record],
    ) -> Result<()> {
        if records.is_empty() {
            return Ok(());
        }
        if let Some(seam) = &self.seam {
            return crate::server::record_rows(seam.as_ref(), op, records);
        }
        if *logged + records.len() >= fold_at(table.items.len()) {
            match self.write_table(table) {
                Ok(()) => {
                    tracing::debug!(records = *logged + records.len(), "pool log folded");
                    if self.empty_log() {
                        *logged = 0;
                    }
                    return Ok(());
                }
                // The done and release records make the table grow: at
                // the cap, keep logging rather than refuse the change.
                Err(Error::TableFull { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        self.state.log(&self.log_path())?.append_batch(records)?;
        *logged += records.len();
        Ok(())
    }

    /// Empties the log after the table that holds its records was
    /// written (a fold); returns whether it did. A failure is logged, not
    /// returned: the change is committed by then, the records left apply
    /// again without changing anything, and the next fold empties the log.
    pub(crate) fn empty_log(&self) -> bool {
        match self.state.write_bytes(&self.log_path(), b"") {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!(error = %e, "the pool log was folded but not emptied");
                false
            }
        }
    }

    pub(crate) fn read_table(&self, op: &'static str) -> Result<Table> {
        let path = self.table_path();
        let bytes = match self.state.read_bytes_capped(&path, TABLE_CAP)? {
            ReadOutcome::Missing => return Ok(Table::empty()),
            ReadOutcome::Value((bytes, _)) => bytes,
            ReadOutcome::Corrupt(corruption) => return Err(Error::Corrupt { op, corruption }),
            ReadOutcome::Unsupported(unsupported) => {
                return Err(Error::Unsupported { op, unsupported });
            }
        };
        match ReadOutcome::<Table>::from_json(&path, &bytes) {
            ReadOutcome::Value(t) if t.format > POOL_FORMAT => Err(Error::Unsupported {
                op,
                unsupported: Unsupported::new(
                    path.to_path_buf(),
                    format!("pool table format {}", t.format),
                ),
            }),
            ReadOutcome::Value(t) => Ok(t),
            ReadOutcome::Missing => Ok(Table::empty()),
            ReadOutcome::Corrupt(corruption) => Err(Error::Corrupt { op, corruption }),
            ReadOutcome::Unsupported(unsupported) => Err(Error::Unsupported { op, unsupported }),
        }
    }

    pub(crate) fn write_table(&self, table: &Table) -> Result<()> {
        let path = self.table_path();
        let bytes = json(&path, table)?;
        if u64::try_from(bytes.len()).unwrap_or(u64::MAX) > TABLE_CAP {
            return Err(Error::TableFull {
                size: bytes.len(),
                cap: TABLE_CAP,
            });
        }
        Ok(self.state.write_bytes(&path, &bytes)?)
    }

    pub(crate) fn read_item(&self, id: &ItemId, op: &'static str) -> Result<Item> {
        let path = self.item_path(id);
        let read = match &self.seam {
            Some(seam) => crate::server::read_item_row(seam.as_ref(), id, &path)?,
            None => self.state.read_json::<Item>(&path)?,
        };
        match read {
            ReadOutcome::Value(item) if item.format > POOL_FORMAT => Err(Error::Unsupported {
                op,
                unsupported: Unsupported::new(
                    path.to_path_buf(),
                    format!("pool item format {}", item.format),
                ),
            }),
            ReadOutcome::Value(item) if item.id == *id => Ok(item),
            ReadOutcome::Value(item) => Err(Error::Corrupt {
                op,
                corruption: Corruption {
                    path: path.to_path_buf(),
                    reason: CorruptReason::WrongShape(format!(
                        "id `{}` does not match the file's item `{id}`",
                        item.id
                    )),
                },
            }),
            ReadOutcome::Missing => Err(Error::Corrupt {
                op,
                corruption: Corruption {
                    path: path.to_path_buf(),
                    reason: CorruptReason::WrongShape(
                        "the table names the item but its file is missing".to_owned(),
                    ),
                },
            }),
            ReadOutcome::Corrupt(corruption) => Err(Error::Corrupt { op, corruption }),
            ReadOutcome::Unsupported(unsupported) => Err(Error::Unsupported { op, unsupported }),
        }
    }
}
