//! The doctor of mail on a server: the directory doctor's checks
//! (unreadable and stray rows, duplicates, orphans, the reply index,
//! requests answered but still in an inbox) and the server's own index
//! rows (`ids/`, `task/`, `open/`), each a finding and, fixing, a repair
//! in one transaction.
//!
//! Memory stays bounded as on a directory: rows are read one at a time,
//! and what the checks join by message id (each copy, each index row,
//! each reply-index entry) is one short line in a [`Sorter`], which
//! spills to scratch files in the local folder past its budget; the walk
//! then looks at one id at a time.
//!
//! Nothing is deleted that is not derived from something kept: a row that
//! does not parse is moved into the folder `quarantine` beside it
//! (`move_new`, the server's analogue of moving a file aside); an index
//! row that is wrong is rewritten or, when it points at nothing, removed,
//! except an `open/` row, which holds its request's bytes and is moved
//! aside when no copy of the request is left.

use std::collections::BTreeSet;
use std::path::PathBuf;

use chipset_backend::{Key, Step};
use chipset_store::{Action, AgentId, Defect, DoctorMode, Finding, Report, StateDir, TaskId};

use super::repair::changed;
use super::{IdRecord, Seam, Server, dir, failure};
use crate::MessageId;
use crate::doctor::{Groups, OrphanReason, bad_scratch};
use crate::error::{Error, Result};
use crate::format::{Kind, ManifestEvent, ReplyMarker};
use crate::layout::{ARCHIVE, BY_TASK, INBOX, Location, id_of, marker_name, parse_marker};
use crate::spill::{BUDGET, Sorter};

/// One copy of a message, as the scan keeps it (no body).
pub(super) struct Copy {
    pub(super) loc: Location,
    pub(super) kind: Kind,
    pub(super) needs_reply: bool,
    pub(super) to: AgentId,
    pub(super) task: TaskId,
    pub(super) created_ms: i64,
    pub(super) parent: Option<MessageId>,
}

/// What the scan met for one message id.
#[derive(Default)]
pub(super) struct Group {
    pub(super) copies: Vec<Copy>,
    /// `ids/{id}.json`: `Some(record)`, or `None` when it does not parse.
    pub(super) ids: Vec<Option<IdRecord>>,
    /// The tasks of its `task/{task}/{id}.json` rows.
    pub(super) tasks: Vec<TaskId>,
    /// Its `open/{task}/{id}.json` rows: the task, and whether it parses.
    pub(super) open: Vec<(TaskId, bool)>,
    /// Reply-index entries naming it as the reply: (parent, kind).
    pub(super) as_reply: Vec<(MessageId, Kind)>,
    /// Whether a response to it is in the reply index.
    pub(super) answered: bool,
}

fn loc_text(loc: &Location) -> String {
    match loc {
        Location::Inbox(a) => format!("i:{a}"),
        Location::Archive => "a".to_owned(),
        Location::Orphan => "o".to_owned(),
        Location::ByTask(t) => format!("t:{t}"),
    }
}

fn loc_of(text: &str) -> Option<Location> {
    Some(match text.split_once(':') {
        Some(("i", a)) => Location::Inbox(AgentId::new(a).ok()?),
        Some(("t", t)) => Location::ByTask(TaskId::new(t).ok()?),
        None if text == "a" => Location::Archive,
        None if text == "o" => Location::Orphan,
        _ => return None,
    })
}

/// Decodes the lines of one id.
fn decode(lines: &[String]) -> Option<Group> {
    let mut g = Group::default();
    for line in lines {
        let f: Vec<&str> = line.split('\t').collect();
        match f.as_slice() {
            ["M", loc, kind, reply, to, task, ms, parent] => g.copies.push(Copy {
                loc: loc_of(loc)?,
                kind: Kind::from_name(kind)?,
                needs_reply: *reply == "1",
                to: AgentId::new(*to).ok()?,
                task: TaskId::new(*task).ok()?,
                created_ms: ms.parse().ok()?,
                parent: match *parent {
                    "" => None,
                    p => Some(MessageId::new(p).ok()?),
                },
            }),
            ["I", task, to] => g.ids.push(Some(IdRecord {
                task: TaskId::new(*task).ok()?,
                to: AgentId::new(*to).ok()?,
            })),
            ["I"] => g.ids.push(None),
            ["T", task] => g.tasks.push(TaskId::new(*task).ok()?),
            ["O", task, ok] => g.open.push((TaskId::new(*task).ok()?, *ok == "1")),
            ["R", parent, kind] => g
                .as_reply
                .push((MessageId::new(*parent).ok()?, Kind::from_name(kind)?)),
            ["H", kind] => g.answered |= Kind::from_name(kind)? == Kind::Response,
            _ => return None,
        }
    }
    Some(g)
}

pub(super) fn at(key: &impl std::fmt::Display) -> PathBuf {
    PathBuf::from(key.to_string())
}

fn json<T: serde::Serialize>(key: &Key, value: &T) -> Result<Vec<u8>> {
    StateDir::to_canonical_json(value).map_err(|source| {
        chipset_store::Error::Serialize {
            path: at(key),
            source,
        }
        .into()
    })
}

impl Server<'_> {
    /// The doctor of [`Mail::doctor_to`](crate::Mail::doctor_to) on a
    /// server: see the module docs. `scanned` counts the readable
    /// messages; findings are handed to `sink` as they are found.
    pub(crate) fn doctor_to(
        &self,
        mode: DoctorMode,
        sink: &mut dyn FnMut(Finding),
    ) -> Result<Report> {
        let mut report = Report::new(mode);
        let scratch = self.mail.state.root_path();
        let mut by_id = Sorter::new(&self.mail.state, &scratch, BUDGET);
        self.scan_messages(&mut report, sink, &mut by_id)?;
        self.scan_index(&mut report, sink, &mut by_id)?;
        let swept = self.swept_tasks()?;
        let now = self.now()?;
        let mut groups = Groups::new(by_id.finish()?)?;
        while let Some((id, lines)) = groups.next_group()? {
            let id = MessageId::new(id.as_str()).map_err(|_| bad_scratch())?;
            let group = decode(&lines).ok_or_else(bad_scratch)?;
            self.check_id(&id, group, &swept, now, &mut report, sink)?;
        }
        Ok(report)
    }

    /// The tasks swept: those with an `archive/by-task/` folder, and those
    /// of a `task-swept` event (a sweep of a task with no message leaves
    /// no folder on a server). The seam reads a log whole, so the manifest
    /// is read once here and only the task names are kept.
    fn swept_tasks(&self) -> Result<BTreeSet<String>> {
        let mut swept: BTreeSet<String> = self
            .b
            .list_dirs(&dir(&[ARCHIVE, BY_TASK]))
            .seam()?
            .into_iter()
            .collect();
        let read = self
            .b
            .read_log(&Self::manifest(), chipset_backend::LogPos::START)
            .seam()?;
        for record in read.records {
            if let Ok(ManifestEvent::TaskSwept { task, .. }) = serde_json::from_slice(&record) {
                swept.insert(task.to_string());
            }
        }
        Ok(swept)
    }

    /// Every message row: unreadable ones and strays are findings, each
    /// readable copy a line.
    fn scan_messages(
        &self,
        report: &mut Report,
        sink: &mut dyn FnMut(Finding),
        by_id: &mut Sorter<'_>,
    ) -> Result<()> {
        let mut folders = Vec::new();
        let inbox = dir(&[INBOX]);
        for name in self.b.list_dirs(&inbox).seam()? {
            match AgentId::new(name.as_str()) {
                Ok(agent) => folders.push(Location::Inbox(agent)),
                Err(_) => report.pass_on(stray(&format!("{inbox}/{name}")), sink),
            }
        }
        for name in self.b.list(&inbox).seam()? {
            report.pass_on(stray(&format!("{inbox}/{name}")), sink);
        }
        folders.push(Location::Archive);
        folders.push(Location::Orphan);
        let by_task = dir(&[ARCHIVE, BY_TASK]);
        for task in self.b.list_dirs(&by_task).seam()? {
            match TaskId::new(task.as_str()) {
                Ok(task) => folders.push(Location::ByTask(task)),
                Err(_) => report.pass_on(stray(&format!("{by_task}/{task}")), sink),
            }
        }
        for loc in folders {
            let folder = Self::dir_of(&loc);
            for name in self.b.list(&folder).seam()? {
                if id_of(&name).is_none() {
                    report.pass_on(stray(&format!("{folder}/{name}")), sink);
                    continue;
                }
                let key = folder.key(&name).seam()?;
                let read = match self.b.read(&key) {
                    Ok(Some(v)) => Self::parse_named(&folder, &name, &v.value),
                    Ok(None) => continue,
                    Err(e) => Err(failure(e, Vec::new())),
                };
                match read {
                    Ok(Some(m)) => {
                        report.scanned += 1;
                        let line = format!(
                            "{}\tM\t{}\t{}\t{}\t{}\t{}\t{}\t{}",
                            m.id,
                            loc_text(&loc),
                            m.kind,
                            u8::from(m.needs_reply()),
                            m.to,
                            m.phase,
                            m.created_at.unix_ms(),
                            m.in_reply_to.as_ref().map_or("", MessageId::as_str),
                        );
                        by_id.push(line.as_bytes())?;
                    }
                    Ok(None) => {}
                    Err(Error::Corrupt(c)) => {
                        let line =
                            format!("`{}` on the server: corrupt message ({})", key, c.reason);
                        let f =
                            Finding::new("messaging-corrupt-file", Defect::Corrupt(c.reason), line)
                                .at(at(&key))
                                .fixable(true);
                        let f = self.fix(report.mode, f, || self.move_aside(&key, None))?;
                        report.pass_on(f, sink);
                    }
                    Err(Error::Unsupported(u)) => {
                        let line = format!(
                            "`{key}` on the server: holds {}, unsupported by this version (left in place)",
                            u.what
                        );
                        let f = Finding::new(
                            "messaging-unsupported-file",
                            Defect::Unsupported(u.what),
                            line,
                        )
                        .at(at(&key))
                        .fixable(false);
                        report.pass_on(f, sink);
                    }
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(())
    }

    /// Every index row (`ids/`, `task/`, `open/`, `replies/`), a line each.
    fn scan_index(
        &self,
        report: &mut Report,
        sink: &mut dyn FnMut(Finding),
        by_id: &mut Sorter<'_>,
    ) -> Result<()> {
        let ids = dir(&["ids"]);
        for name in self.b.list(&ids).seam()? {
            let Some(id) = id_of(&name) else {
                report.pass_on(stray(&format!("{ids}/{name}")), sink);
                continue;
            };
            let key = ids.key(&name).seam()?;
            let line = match self.b.read(&key) {
                Ok(None) => continue,
                Ok(Some(v)) => match serde_json::from_slice::<IdRecord>(&v.value) {
                    Ok(r) => format!("{id}\tI\t{}\t{}", r.task, r.to),
                    Err(_) => format!("{id}\tI"),
                },
                Err(chipset_backend::Error::Corrupt { .. }) => format!("{id}\tI"),
                Err(e) => return Err(failure(e, Vec::new())),
            };
            by_id.push(line.as_bytes())?;
        }
        for (folder, tag) in [("task", "T"), ("open", "O")] {
            let top = dir(&[folder]);
            for task in self.b.list_dirs(&top).seam()? {
                let Ok(task_id) = TaskId::new(task.as_str()) else {
                    report.pass_on(stray(&format!("{top}/{task}")), sink);
                    continue;
                };
                let rows = top.join(&task).seam()?;
                for name in self.b.list(&rows).seam()? {
                    let Some(id) = id_of(&name) else {
                        report.pass_on(stray(&format!("{rows}/{name}")), sink);
                        continue;
                    };
                    let line = if tag == "T" {
                        format!("{id}\tT\t{task_id}")
                    } else {
                        // The gate parses this row: one that does not fails it closed.
                        let key = rows.key(&name).seam()?;
                        let ok = match self.b.read(&key) {
                            Ok(None) => continue,
                            Ok(Some(v)) => {
                                matches!(Self::parse_named(&rows, &name, &v.value), Ok(Some(_)))
                            }
                            Err(chipset_backend::Error::Corrupt { .. }) => false,
                            Err(e) => return Err(failure(e, Vec::new())),
                        };
                        format!("{id}\tO\t{task_id}\t{}", u8::from(ok))
                    };
                    by_id.push(line.as_bytes())?;
                }
            }
        }
        let replies = dir(&["replies"]);
        for parent in self.b.list_dirs(&replies).seam()? {
            let Ok(parent_id) = MessageId::new(parent.as_str()) else {
                report.pass_on(stray(&format!("{replies}/{parent}")), sink);
                continue;
            };
            let markers = replies.join(&parent).seam()?;
            for name in self.b.list(&markers).seam()? {
                let Some((kind, child)) = parse_marker(&name) else {
                    report.pass_on(stray(&format!("{markers}/{name}")), sink);
                    continue;
                };
                by_id.push(format!("{child}\tR\t{parent_id}\t{kind}").as_bytes())?;
                by_id.push(format!("{parent_id}\tH\t{kind}").as_bytes())?;
            }
        }
        Ok(())
    }

    /// The checks of one message id, and with Fix its repairs.
    fn check_id(
        &self,
        id: &MessageId,
        g: Group,
        swept: &BTreeSet<String>,
        now: chipset_store::Timestamp,
        report: &mut Report,
        sink: &mut dyn FnMut(Finding),
    ) -> Result<()> {
        let mode = report.mode;
        let id_key = Self::id_key(id);
        // Index rows of a message no copy of which is left.
        // The copy furthest along its lifecycle, the first met of equals.
        let kept_at =
            (0..g.copies.len()).max_by_key(|&i| (g.copies[i].loc.stage(), std::cmp::Reverse(i)));
        let Some(kept) = kept_at.map(|i| &g.copies[i]) else {
            if !g.ids.is_empty() {
                let f = stale(&id_key, "an id record of no message");
                let f = self.fix(mode, f, || self.remove_row(&id_key))?;
                report.pass_on(f, sink);
            }
            for task in &g.tasks {
                let key = Self::task_dir(task).key(&json_name(id)).seam()?;
                let f = stale(&key, "a task row of no message");
                let f = self.fix(mode, f, || self.remove_row(&key))?;
                report.pass_on(f, sink);
            }
            for (task, _) in &g.open {
                // Its bytes may be the request's last copy: moved aside.
                let key = Self::open_key(task, id);
                let f = stale(
                    &key,
                    "an open row of no message (moved aside, never removed)",
                );
                let f = self.fix(mode, f, || self.move_aside(&key, None))?;
                report.pass_on(f, sink);
            }
            return Ok(());
        };
        // Duplicates: every other copy is moved aside.
        for (i, copy) in g.copies.iter().enumerate() {
            if Some(i) == kept_at {
                continue;
            }
            let key = Self::file(&copy.loc, id);
            let line = format!(
                "`{key}` on the server: a second copy of `{id}` (kept in {})",
                kept.loc
            );
            let f = Finding::new("messaging-duplicate-message", Defect::Missing, line)
                .at(at(&key))
                .about(id)
                .fixable(true);
            let f = self.fix(mode, f, || self.move_aside(&key, Some(id)))?;
            report.pass_on(f, sink);
        }
        let m = kept;
        let record = IdRecord {
            task: m.task.clone(),
            to: m.to.clone(),
        };
        // `ids/`: where a retry and `find` look.
        match g.ids.first() {
            None => {
                let f = missing(
                    &id_key,
                    id,
                    "no id record: the message cannot be found by id",
                );
                let bytes = json(&id_key, &record)?;
                let f = self.fix(mode, f, || {
                    self.steps(&[Step::Create {
                        key: &id_key,
                        value: &bytes,
                    }])
                })?;
                report.pass_on(f, sink);
            }
            Some(r) if r.as_ref() != Some(&record) => {
                let f = stale(&id_key, "an id record that names another task or recipient");
                let bytes = json(&id_key, &record)?;
                let f = self.fix(mode, f, || self.rewrite(&id_key, &bytes))?;
                report.pass_on(f, sink);
            }
            Some(_) => {}
        }
        // `task/`: what a sweep moves.
        let task_key = Self::task_dir(&m.task).key(&json_name(id)).seam()?;
        if !g.tasks.contains(&m.task) {
            let f = missing(
                &task_key,
                id,
                "no task row: a sweep of its task would miss it",
            );
            let bytes = json(&task_key, &record)?;
            let f = self.fix(mode, f, || {
                self.steps(&[Step::Create {
                    key: &task_key,
                    value: &bytes,
                }])
            })?;
            report.pass_on(f, sink);
        }
        for task in g.tasks.iter().filter(|t| **t != m.task) {
            let key = Self::task_dir(task).key(&json_name(id)).seam()?;
            let f = stale(&key, "a task row under another task than its message's");
            let f = self.fix(mode, f, || self.remove_row(&key))?;
            report.pass_on(f, sink);
        }
        // The reply index: a reply is listed under its parent.
        if let Some(parent) = &m.parent
            && !g.as_reply.iter().any(|(p, k)| p == parent && *k == m.kind)
        {
            let key = Self::replies_dir(parent)
                .key(&marker_name(m.kind, id))
                .seam()?;
            let line = format!("`{id}` replies to `{parent}`, and the reply index does not say so");
            let f = Finding::new("messaging-missing-reply-index", Defect::Missing, line)
                .at(at(&key))
                .about(id)
                .fixable(true);
            let bytes = json(
                &key,
                &ReplyMarker {
                    id: id.clone(),
                    kind: m.kind,
                    to: m.to.clone(),
                    parent: parent.clone(),
                },
            )?;
            let f = self.fix(mode, f, || {
                self.steps(&[Step::Create {
                    key: &key,
                    value: &bytes,
                }])
            })?;
            report.pass_on(f, sink);
        }
        // An inbox message: an orphan, a request already answered, or one
        // whose open row the gate reads.
        let mut open_expected = false;
        if let Location::Inbox(agent) = &m.loc {
            if let Some(reason) = self.orphan_reason(m, swept, now) {
                let key = Self::file(&m.loc, id);
                // Worded as on a directory: the same finding.
                let line = format!(
                    "messaging-orphan-inbox: message `{id}` of task `{}` in inbox/{agent} ({reason})",
                    m.task
                );
                let f = Finding::new("messaging-orphan-inbox", Defect::Stale, line)
                    .at(at(&key))
                    .about(id)
                    .fixable(true);
                let f = self.fix(mode, f, || self.orphan(id, agent, m, &g, reason))?;
                report.pass_on(f, sink);
                return Ok(());
            }
            if m.needs_reply && g.answered {
                let key = Self::file(&m.loc, id);
                let line = format!("`{key}` on the server: answered, and still in the inbox");
                let f = Finding::new(
                    "messaging-answered-request-in-inbox",
                    Defect::Unfinished,
                    line,
                )
                .at(at(&key))
                .about(id)
                .fixable(true);
                let f = self.fix(mode, f, || {
                    Ok(match self.archive(id)? {
                        crate::mail::ArchiveOutcome::Archived(_) => {
                            Action::Moved("archived, and its open row removed".to_owned())
                        }
                        crate::mail::ArchiveOutcome::AlreadyArchived(_) => changed(),
                    })
                })?;
                report.pass_on(f, sink);
                return Ok(());
            }
            open_expected = m.needs_reply;
        }
        // `open/`: the commit gate.
        let open_key = Self::open_key(&m.task, id);
        let here = g.open.iter().find(|(t, _)| *t == m.task);
        match (open_expected, here) {
            (true, None) => {
                let line = format!(
                    "`{id}` is a request without a reply and has no open row: \
                     the commit gate of task `{}` passes while it is open (fails open)",
                    m.task
                );
                let f = Finding::new("messaging-missing-open-row", Defect::Missing, line)
                    .at(at(&open_key))
                    .about(id)
                    .fixable(true);
                let f = self.fix(mode, f, || self.reopen(id, m, None))?;
                report.pass_on(f, sink);
            }
            (true, Some((_, false))) => {
                let line = format!(
                    "`{open_key}` on the server: an open row that does not read (the gate fails closed)"
                );
                let f = Finding::new(
                    "messaging-corrupt-open-row",
                    Defect::Corrupt(chipset_store::CorruptReason::WrongShape(
                        "not the request's message".to_owned(),
                    )),
                    line,
                )
                .at(at(&open_key))
                .about(id)
                .fixable(true);
                let f = self.fix(mode, f, || self.reopen(id, m, Some(&open_key)))?;
                report.pass_on(f, sink);
            }
            _ => {}
        }
        for (task, _) in &g.open {
            if open_expected && *task == m.task {
                continue;
            }
            let key = Self::open_key(task, id);
            let f = stale(
                &key,
                "an open row of a message not waiting for a reply (the gate fails closed)",
            );
            let f = self.fix(mode, f, || self.remove_row(&key))?;
            report.pass_on(f, sink);
        }
        Ok(())
    }

    fn orphan_reason(
        &self,
        m: &Copy,
        swept: &BTreeSet<String>,
        now: chipset_store::Timestamp,
    ) -> Option<OrphanReason> {
        let config = &self.mail.config;
        if swept.contains(m.task.as_str()) {
            Some(OrphanReason::TaskSwept)
        } else if config
            .recipients
            .as_ref()
            .is_some_and(|r| !r.contains(&m.to))
        {
            Some(OrphanReason::UnknownRecipient)
        } else if config.orphan_after.is_some_and(|age| {
            now.since(chipset_store::Timestamp::from_unix_ms(m.created_ms)) > age
        }) {
            Some(OrphanReason::Stale)
        } else {
            None
        }
    }
}

fn json_name(id: &MessageId) -> String {
    format!("{id}.json")
}

/// A name that is not a message's (or an index row's), where they live.
fn stray(at: &str) -> Finding {
    let line = format!("`{at}` on the server: not a message (left alone)");
    Finding::new("messaging-stray-file", Defect::Stray, line)
        .at(PathBuf::from(at))
        .fixable(false)
}

fn stale(key: &Key, what: &str) -> Finding {
    let line = format!("`{key}` on the server: {what}");
    Finding::new("messaging-stale-index", Defect::Stale, line)
        .at(at(key))
        .fixable(true)
}

fn missing(key: &Key, id: &MessageId, what: &str) -> Finding {
    let line = format!("`{key}` on the server: {what}");
    Finding::new("messaging-missing-index", Defect::Missing, line)
        .at(at(key))
        .about(id)
        .fixable(true)
}
