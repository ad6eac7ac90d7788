//! Several changes in one transaction, and a folder's values in one
//! statement, on PostgreSQL.
//!
//! A transaction runs each step's single statement (the same SQL as the
//! single operation, notifications included: they are delivered at
//! commit) between `BEGIN` and `COMMIT` on one pooled connection. A step
//! whose condition does not hold (its statement changes no row, or a move's
//! destination appeared) rolls the whole transaction back; the step is then
//! judged outside it, as the single operation judges it. A step that lost a
//! race in between (the value is back at the version expected) and a
//! deadlock or serialization failure the server broke retry the whole
//! transaction: nothing of it was applied.

use postgres::error::SqlState;
use postgres::types::ToSql;

use super::conn::{Conn, statement_error};
use super::{APPEND, CREATE, MOVE, NOTIFY_CHANNEL, PgBackend, READ, REMOVE, REPLACE, raw, version};
use crate::error::{Error, Result};
use crate::key::{Dir, Key};
use crate::seam::{Version, Versioned, canonical_record, check_size};
use crate::txn::Step;

const READ_ALL: &str =
    "SELECT name, value, version FROM chipset_entries WHERE dir = $1 ORDER BY name";

/// How often a transaction that lost a race is tried again before the
/// conflict is reported.
const ATTEMPTS: usize = 64;

/// What one step did inside the transaction.
enum Did {
    /// Done, leaving this version (`None`: a remove or an append).
    Done(Option<Version>),
    /// Its condition did not hold: the transaction is rolled back.
    Refused,
}

/// What one attempt of a transaction did.
enum Attempt {
    Committed(Vec<Option<Version>>),
    /// The step at this index was refused; nothing was applied.
    Refused(usize),
    /// The server broke a deadlock or a serialization conflict: nothing
    /// was applied, try again.
    Again,
}

impl PgBackend {
    /// [`Backend::read_all`](crate::Backend::read_all): one statement.
    pub(super) fn read_all_rows(&self, dir: &Dir) -> Result<Vec<(String, Versioned)>> {
        let text = dir.as_text();
        let rows = self.run("read all of", dir, false, READ_ALL, &[&text])?;
        Ok(rows
            .iter()
            .map(|r| {
                (
                    r.get(0),
                    Versioned {
                        value: r.get(1),
                        version: version(r.get(2)),
                    },
                )
            })
            .collect())
    }

    /// [`Backend::transact`](crate::Backend::transact): one transaction.
    pub(super) fn transact_steps(&self, steps: &[Step<'_>]) -> Result<Vec<Option<Version>>> {
        // Every value and record is checked before anything is sent.
        let mut records = Vec::with_capacity(steps.len());
        for step in steps {
            records.push(match *step {
                Step::Create { key, value } | Step::Replace { key, value, .. } => {
                    check_size(key, value.len())?;
                    Vec::new()
                }
                Step::Append { log, records } => records
                    .iter()
                    .map(|r| canonical_record(log, r))
                    .collect::<Result<Vec<_>>>()?,
                Step::Remove { .. } | Step::MoveNew { .. } => Vec::new(),
            });
        }
        if steps.is_empty() {
            return Ok(Vec::new());
        }
        let mut last = None;
        for _ in 0..ATTEMPTS {
            match self.attempt(steps, &records)? {
                Attempt::Committed(out) => return Ok(out),
                Attempt::Again => {}
                Attempt::Refused(i) => match self.judge(&steps[i])? {
                    Some(e) => return Err(e),
                    None => last = Some(i),
                },
            }
        }
        let key = last.map_or_else(|| first_key(&steps[0]), |i| first_key(&steps[i]));
        Err(Error::Conflict {
            key: key.to_string(),
            current: None,
        })
    }

    fn attempt(&self, steps: &[Step<'_>], records: &[Vec<Vec<u8>>]) -> Result<Attempt> {
        let mut pooled = self.pool.get()?;
        let conn = pooled.conn();
        let first = first_key(&steps[0]);
        if let Err(e) = conn.client.batch_execute("BEGIN") {
            pooled.discard();
            return Err(statement_error("begin a transaction on", first, false, e));
        }
        let mut out = Vec::with_capacity(steps.len());
        for (i, step) in steps.iter().enumerate() {
            match self.step(conn, step, &records[i]) {
                Ok(Did::Done(v)) => out.push(v),
                Ok(Did::Refused) => {
                    if conn.client.batch_execute("ROLLBACK").is_err() {
                        pooled.discard();
                    }
                    return Ok(Attempt::Refused(i));
                }
                Err(e) => {
                    let again = e.code().is_some_and(|c| {
                        *c == SqlState::T_R_DEADLOCK_DETECTED
                            || *c == SqlState::T_R_SERIALIZATION_FAILURE
                    });
                    if conn.client.batch_execute("ROLLBACK").is_err() {
                        pooled.discard();
                    }
                    if again {
                        return Ok(Attempt::Again);
                    }
                    // Nothing is committed before COMMIT: a broken
                    // connection here changed nothing.
                    return Err(statement_error(
                        "run a transaction on",
                        first_key(step),
                        false,
                        e,
                    ));
                }
            }
        }
        match conn.client.batch_execute("COMMIT") {
            Ok(()) => Ok(Attempt::Committed(out)),
            Err(e) => {
                pooled.discard();
                Err(statement_error("commit a transaction on", first, true, e))
            }
        }
    }

    /// Runs one step's statement inside the open transaction.
    fn step(
        &self,
        conn: &mut Conn,
        step: &Step<'_>,
        records: &[Vec<u8>],
    ) -> Result<Did, postgres::Error> {
        let mut query = |sql: &'static str, params: &[&(dyn ToSql + Sync)]| {
            let s = conn.prepare(sql)?;
            conn.client.query(&s, params)
        };
        match *step {
            Step::Create { key, value } => {
                let (dir, payload) = (key.dir().as_text(), self.payload(key.dir()));
                let rows = query(
                    CREATE,
                    &[&dir, &key.name(), &value, &NOTIFY_CHANNEL, &payload],
                )?;
                Ok(rows
                    .first()
                    .map_or(Did::Refused, |r| Did::Done(Some(version(r.get(0))))))
            }
            Step::Replace {
                key,
                expected,
                value,
            } => {
                let (dir, payload) = (key.dir().as_text(), self.payload(key.dir()));
                let rows = query(
                    REPLACE,
                    &[
                        &dir,
                        &key.name(),
                        &value,
                        &NOTIFY_CHANNEL,
                        &payload,
                        &raw(expected),
                    ],
                )?;
                Ok(rows
                    .first()
                    .map_or(Did::Refused, |r| Did::Done(Some(version(r.get(0))))))
            }
            Step::Remove { key, expected } => {
                let (dir, payload) = (key.dir().as_text(), self.payload(key.dir()));
                let rows = query(
                    REMOVE,
                    &[&dir, &key.name(), &raw(expected), &NOTIFY_CHANNEL, &payload],
                )?;
                if !rows.is_empty() {
                    return Ok(Did::Done(None));
                }
                // Removing what is gone succeeds; another version refuses.
                let there = query(READ, &[&dir, &key.name()])?;
                Ok(if there.is_empty() {
                    Did::Done(None)
                } else {
                    Did::Refused
                })
            }
            Step::MoveNew { from, expected, to } => {
                let (from_dir, to_dir) = (from.dir().as_text(), to.dir().as_text());
                let (from_payload, to_payload) = (self.payload(from.dir()), self.payload(to.dir()));
                let rows = query(
                    MOVE,
                    &[
                        &from_dir,
                        &from.name(),
                        &raw(expected),
                        &to_dir,
                        &to.name(),
                        &NOTIFY_CHANNEL,
                        &from_payload,
                        &to_payload,
                    ],
                );
                match rows {
                    Ok(rows) => Ok(rows
                        .first()
                        .map_or(Did::Refused, |r| Did::Done(Some(version(r.get(0)))))),
                    Err(e) if e.code() == Some(&SqlState::UNIQUE_VIOLATION) => Ok(Did::Refused),
                    Err(e) => Err(e),
                }
            }
            Step::Append { log, .. } => {
                if records.is_empty() {
                    return Ok(Did::Done(None));
                }
                let name = log.to_string();
                let count = i64::try_from(records.len()).expect("a batch fits in i64");
                let payload = self.payload(log.dir());
                query(
                    APPEND,
                    &[&name, &count, &records, &NOTIFY_CHANNEL, &payload],
                )?;
                Ok(Did::Done(None))
            }
        }
    }

    /// Judges a refused step outside the rolled-back transaction, as its
    /// single operation would: the error to return, or `None` when it no
    /// longer fails (it lost a race that is over: try again).
    fn judge(&self, step: &Step<'_>) -> Result<Option<Error>> {
        use crate::Backend as _;
        Ok(match *step {
            Step::Create { key, .. } => self.read(key)?.map(|now| Error::Exists {
                key: key.to_string(),
                current: Some(now),
            }),
            Step::Replace { key, expected, .. } => match self.read(key)? {
                None => Some(Error::NotFound {
                    key: key.to_string(),
                }),
                Some(now) if now.version != expected => Some(Error::Conflict {
                    key: key.to_string(),
                    current: Some(now),
                }),
                Some(_) => None,
            },
            Step::Remove { key, expected } => match self.read(key)? {
                Some(now) if now.version != expected => Some(Error::Conflict {
                    key: key.to_string(),
                    current: Some(now),
                }),
                _ => None,
            },
            Step::MoveNew { from, expected, to } => match self.read(from)? {
                None => Some(Error::NotFound {
                    key: from.to_string(),
                }),
                Some(now) if now.version != expected => Some(Error::Conflict {
                    key: from.to_string(),
                    current: Some(now),
                }),
                Some(_) => self.read(to)?.map(|there| Error::Exists {
                    key: to.to_string(),
                    current: Some(there),
                }),
            },
            Step::Append { .. } => None,
        })
    }
}

/// The key a step is about, for errors.
fn first_key<'a>(step: &Step<'a>) -> &'a Key {
    match *step {
        Step::Create { key, .. } | Step::Replace { key, .. } | Step::Remove { key, .. } => key,
        Step::MoveNew { from, .. } => from,
        Step::Append { log, .. } => log,
    }
}
