//! The walk over `mail/` that feeds the scan, and the manifest's status.

use super::*;

impl Mail {
    pub(super) fn scan_all(&self, scan: &mut Scan<'_>) -> Result<()> {
        let inbox_root = self.layout.inbox_root();
        for name in self.state.list(&inbox_root)? {
            match AgentId::new(name.as_str()) {
                Ok(agent) if is_dir(&self.state, &inbox_root.join_id(&agent, ""))? => {
                    self.scan_messages(scan, &Location::Inbox(agent), &[])?;
                }
                _ => scan.corrupt.push((
                    BadEntry::listed(&inbox_root, &name),
                    not("an agent inbox directory"),
                )),
            }
        }
        let archive_root = self.layout.archive_root();
        for sub in [BY_TASK, ORPHAN] {
            let path = archive_root.join_static(sub);
            if crate::mail::exists(&self.state, &path)? && !is_dir(&self.state, &path)? {
                scan.corrupt.push((BadEntry::At(path), not("a directory")));
            }
        }
        self.scan_messages(scan, &Location::Archive, &[BY_TASK, ORPHAN])?;
        self.scan_messages(scan, &Location::Orphan, &[])?;
        let by_task_root = self.layout.by_task_root();
        if is_dir(&self.state, &by_task_root)? {
            for name in self.state.list(&by_task_root)? {
                match TaskId::new(name.as_str()) {
                    Ok(task) if is_dir(&self.state, &by_task_root.join_id(&task, ""))? => {
                        let t = scan.tasks.intern(&task);
                        scan.swept.insert(t);
                        self.scan_messages(scan, &Location::ByTask(task), &[])?;
                    }
                    _ => scan.corrupt.push((
                        BadEntry::listed(&by_task_root, &name),
                        not("a task directory"),
                    )),
                }
            }
        }
        // The reply index: one folder per parent, so as many as there are
        // answered messages; walked without listing it whole.
        let replies_root = self.layout.replies_root();
        let mut corrupt = Vec::new();
        self.state
            .for_each_name(&replies_root, |name| -> Result<()> {
                match MessageId::new(name.as_str()) {
                    Ok(parent) if is_dir(&self.state, &replies_root.join_id(&parent, ""))? => {
                        let path = replies_root.join_id(&parent, "");
                        for marker in self.state.list(&path)? {
                            match parse_marker(&marker) {
                                Some((kind, child)) => {
                                    let line = format!("{parent}\tR\t{kind}\t{child}");
                                    scan.by_parent.push(line.as_bytes())?;
                                }
                                None => {
                                    corrupt.push((
                                        BadEntry::listed(&path, &marker),
                                        not("a reply-index entry"),
                                    ));
                                }
                            }
                        }
                    }
                    _ => corrupt.push((
                        BadEntry::listed(&replies_root, &name),
                        not("a reply-index directory"),
                    )),
                }
                Ok(())
            })?;
        corrupt.sort_by(|a, b| a.0.shown().cmp(b.0.shown()));
        scan.corrupt.extend(corrupt);
        Ok(())
    }

    /// Reads every message file of one directory, without listing it whole:
    /// each readable one goes to the sorter, each bad one to the findings
    /// (in name order, as a sorted listing would meet them).
    fn scan_messages(&self, scan: &mut Scan<'_>, location: &Location, skip: &[&str]) -> Result<()> {
        let dir = self.layout.dir_of(location);
        if !crate::mail::exists(&self.state, &dir)? {
            return Ok(());
        }
        if !is_dir(&self.state, &dir)? {
            return Ok(()); // reported by the caller
        }
        let Some(folder) = self.state.folder(&dir)? else {
            return Ok(());
        };
        let cap = crate::mail::message_cap(&self.state);
        let index = scan.dirs;
        scan.dirs += 1;
        let loc = scan.loc(location);
        let mut corrupt = Vec::new();
        let mut unsupported = Vec::new();
        let mut left = Vec::new();
        let mut buf = Vec::new();
        self.state.for_each_name(&dir, |name| -> Result<()> {
            if skip.contains(&name.as_str()) {
                return Ok(());
            }
            let Some(id) = id_of(&name) else {
                // Not chipset's and not the seed's: a person put it there.
                left.push(Finding::Stray {
                    path: dir.as_path().join(&name),
                });
                return Ok(());
            };
            let path = dir.join_id(&id, ".json");
            let read = match crate::mail::read_message_in(&folder, cap, &name, &path, &mut buf) {
                Err(crate::Error::Store(chipset_store::Error::Symlink { .. })) => {
                    corrupt.push((BadEntry::At(path), CorruptReason::NotARegularFile));
                    return Ok(());
                }
                other => other?,
            };
            let bad = match read {
                ReadOutcome::Missing => return Ok(()),
                ReadOutcome::Unsupported(u) => {
                    unsupported.push(u);
                    return Ok(());
                }
                ReadOutcome::Value(m) => match check_id(&path, &id, m) {
                    Ok(m) => return scan.copy(index, loc, &m),
                    Err(c) => c.reason,
                },
                ReadOutcome::Corrupt(c) => c.reason,
            };
            match bad {
                // Too large to judge: another program may still read it.
                CorruptReason::TooLarge { size, cap } => left.push(Finding::Oversized {
                    path: path.into_path_buf(),
                    size,
                    cap,
                }),
                reason if self.peers_list(&path)? => left.push(Finding::PeerListed {
                    path: path.into_path_buf(),
                    reason,
                }),
                reason => corrupt.push((BadEntry::At(path), reason)),
            }
            Ok(())
        })?;
        corrupt.sort_by(|a, b| a.0.shown().cmp(b.0.shown()));
        unsupported.sort_by(|a, b| a.path.cmp(&b.path));
        left.sort_by(|a, b| a.path().cmp(&b.path()));
        scan.corrupt.extend(corrupt);
        scan.unsupported.extend(unsupported);
        scan.left.extend(left);
        Ok(())
    }

    /// Returns true when the seed's own reader (nubos-pilot's
    /// `lib/messaging.cjs`) lists the file at `path` as a message, although
    /// chipset cannot use it (its id is not its name, its task is not a
    /// valid task id, ...): such a file is left where it is.
    fn peers_list(&self, path: &StatePath) -> Result<bool> {
        Ok(match crate::mail::read_message_bytes(&self.state, path)? {
            ReadOutcome::Value(bytes) => super::peer::seed_reader_lists(&bytes),
            _ => false,
        })
    }

    /// Reads the manifest one record at a time: the ids of its `sent` and
    /// `archived` events go to `by_id` (never into a set in memory), the
    /// tasks of its `task-swept` events into the result.
    pub(super) fn manifest_status(&self, by_id: &mut Sorter<'_>) -> Result<ManifestStatus> {
        let log = self.state.log_reader(&self.layout.manifest())?;
        let mut swept = BTreeSet::new();
        let mut failed: Option<crate::Error> = None;
        let text = |v: Option<serde_json::Value>| v.and_then(|v| v.as_str().map(str::to_owned));
        let read = log.for_each::<ManifestTag>(|r| {
            let ManifestTag::Record {
                event,
                kind,
                id,
                task,
                task_id,
            } = r
            else {
                return;
            };
            let tag = match (text(event.or(kind)).as_deref(), text(id)) {
                (Some("sent"), Some(id)) => Some(("S", id)),
                (Some("archived"), Some(id)) => Some(("A", id)),
                // chipset writes `task`, nubos-pilot `task_id`.
                (Some("task-swept"), _) => {
                    swept.extend(text(task.or(task_id)));
                    None
                }
                _ => None,
            };
            // An id with a control character names no message file.
            if let Some((tag, id)) = tag
                && !id.chars().any(char::is_control)
                && failed.is_none()
                && let Err(e) = by_id.push(format!("{id}\t{tag}").as_bytes())
            {
                failed = Some(e);
            }
        });
        if let Some(e) = failed {
            return Err(e);
        }
        let contents = match read {
            Ok(c) => c,
            Err(chipset_store::Error::Corrupt(c)) => {
                return Ok(ManifestStatus {
                    swept: BTreeSet::new(),
                    torn: None,
                    bad: Vec::new(),
                    not_a_file: Some(c),
                });
            }
            Err(e) => return Err(e.into()),
        };
        Ok(ManifestStatus {
            swept,
            torn: contents.torn_tail.map(|len| (contents.end_offset, len)),
            bad: contents.bad_lines,
            not_a_file: None,
        })
    }
}
