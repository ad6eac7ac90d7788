//! [`Backend::claim`](crate::Backend::claim) on PostgreSQL: one
//! transaction that takes candidate rows with `FOR UPDATE SKIP LOCKED`,
//! lets the caller decide on each inside it, and makes the writes of the
//! one it accepts before the commit.

use chipset_store::Timestamp;
use postgres::{Statement, Transaction};

use super::conn::statement_error;
use super::{CREATE, LIST, NOTIFY_CHANNEL, NOW, PgBackend, READ, REPLACE, raw, version};
use crate::claim::{Claim, ClaimView, Claimed, Decide};
use crate::error::{Error, Result};
use crate::key::{Dir, Key};
use crate::seam::{Versioned, check_size};

/// Locks the first candidate (in the caller's order) that holds a row and
/// that no other transaction holds; returns its name and 1-based place.
const LOCK_NEXT: &str = "SELECT c.name, c.ord
FROM unnest($2::text[]) WITH ORDINALITY AS c(name, ord)
JOIN chipset_entries e ON e.dir = $1 AND e.name = c.name
ORDER BY c.ord LIMIT 1
FOR UPDATE OF e SKIP LOCKED";

/// The statements a claim runs, prepared on its connection.
struct Statements {
    lock_next: Statement,
    read: Statement,
    list: Statement,
    now: Statement,
    create: Statement,
    replace: Statement,
}

/// The state inside the claim's transaction.
struct TxView<'t, 'c> {
    tx: &'t mut Transaction<'c>,
    st: &'t Statements,
}

impl ClaimView for TxView<'_, '_> {
    fn read(&mut self, key: &Key) -> Result<Option<Versioned>> {
        let dir = key.dir().as_text();
        let rows = self
            .tx
            .query(&self.st.read, &[&dir, &key.name()])
            .map_err(|e| statement_error("read", key, false, e))?;
        Ok(rows.first().map(|row| Versioned {
            value: row.get(0),
            version: version(row.get(1)),
        }))
    }

    fn list(&mut self, dir: &Dir) -> Result<Vec<String>> {
        let text = dir.as_text();
        let rows = self
            .tx
            .query(&self.st.list, &[&text])
            .map_err(|e| statement_error("list", dir, false, e))?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }

    fn now(&mut self) -> Result<Timestamp> {
        let rows = self
            .tx
            .query(&self.st.now, &[])
            .map_err(|e| statement_error("read the clock of", "the server", false, e))?;
        Ok(Timestamp::from_unix_ms(rows[0].get(0)))
    }
}

impl PgBackend {
    /// See [`Backend::claim`](crate::Backend::claim). Every statement
    /// before the commit changes nothing if it fails (the transaction is
    /// rolled back), so its error is [`Error::Server`]; a commit whose
    /// answer is lost is [`Error::OutcomeUnknown`].
    pub(super) fn claim_rows(
        &self,
        claim: &Claim<'_>,
        decide: &mut Decide<'_>,
    ) -> Result<Option<Claimed>> {
        let mut pooled = self.pool.get()?;
        let result = self.claim_on(&mut pooled, claim, decide);
        if matches!(
            result,
            Err(Error::Server { .. } | Error::OutcomeUnknown { .. })
        ) && pooled.conn().client.is_closed()
        {
            pooled.discard();
        }
        result
    }

    fn claim_on(
        &self,
        pooled: &mut super::conn::Pooled,
        claim: &Claim<'_>,
        decide: &mut Decide<'_>,
    ) -> Result<Option<Claimed>> {
        let conn = pooled.conn();
        let prepare = |conn: &mut super::conn::Conn, sql| {
            conn.prepare(sql)
                .map_err(|e| statement_error("claim from", claim.dir, false, e))
        };
        let st = Statements {
            lock_next: prepare(conn, LOCK_NEXT)?,
            read: prepare(conn, READ)?,
            list: prepare(conn, LIST)?,
            now: prepare(conn, NOW)?,
            create: prepare(conn, CREATE)?,
            replace: prepare(conn, REPLACE)?,
        };
        let dir = claim.dir.as_text();
        let mut tx = conn
            .client
            .transaction()
            .map_err(|e| statement_error("claim from", claim.dir, false, e))?;
        let mut from = 0;
        while from < claim.candidates.len() {
            let rest = &claim.candidates[from..];
            let rows = tx
                .query(&st.lock_next, &[&dir, &rest])
                .map_err(|e| statement_error("claim from", claim.dir, false, e))?;
            let Some(row) = rows.first() else {
                break;
            };
            let name: String = row.get(0);
            let place: i64 = row.get(1);
            from += usize::try_from(place).expect("a place in the array");
            let writes = {
                let mut view = TxView {
                    tx: &mut tx,
                    st: &st,
                };
                decide(&mut view, &name)?
            };
            let Some(writes) = writes else {
                continue;
            };
            let mut versions = Vec::with_capacity(writes.len());
            for w in &writes {
                check_size(&w.key, w.value.len())?;
                let wdir = w.key.dir().as_text();
                let payload = self.payload(w.key.dir());
                let rows = match w.expected {
                    None => tx.query(
                        &st.create,
                        &[&wdir, &w.key.name(), &w.value, &NOTIFY_CHANNEL, &payload],
                    ),
                    Some(v) => tx.query(
                        &st.replace,
                        &[
                            &wdir,
                            &w.key.name(),
                            &w.value,
                            &NOTIFY_CHANNEL,
                            &payload,
                            &raw(v),
                        ],
                    ),
                }
                .map_err(|e| statement_error("claim with", &w.key, false, e))?;
                match rows.first() {
                    Some(row) => versions.push(version(row.get(0))),
                    None => {
                        // Another writer came first: nothing is committed.
                        let current = TxView {
                            tx: &mut tx,
                            st: &st,
                        }
                        .read(&w.key)?;
                        return Err(Error::Conflict {
                            key: w.key.to_string(),
                            current,
                        });
                    }
                }
            }
            tx.commit()
                .map_err(|e| statement_error("commit the claim of", &name, true, e))?;
            return Ok(Some(Claimed { name, versions }));
        }
        Ok(None)
    }
}
