//! The two passes over the sorted scan: by message id, then by parent id.

use super::*;

impl Mail {
    /// The first pass, one message id at a time: duplicates, orphans, the
    /// `sent` and `archived` events, the by-task folders; and for the second
    /// pass each reply (`P`, under its parent's id) and each request that
    /// expects a reply (`K`).
    pub(super) fn by_id_pass<'a>(
        &'a self,
        scan: &mut Scan<'a>,
        now: chipset_store::Timestamp,
    ) -> Result<ById> {
        let sorter = std::mem::replace(
            &mut scan.by_id,
            Sorter::new(&self.state, self.layout.mail(), 0),
        );
        let mut groups = Groups::new(sorter.finish()?)?;
        let mut out = ById::default();
        while let Some((key, lines)) = groups.next_group()? {
            let mut copies: Vec<(u32, Seen)> = Vec::new();
            let (mut sent, mut archived_event) = (false, false);
            for line in &lines {
                let mut fields = line.split('\t');
                match fields.next() {
                    Some("M") => copies.push(decode_copy(&mut fields).ok_or_else(bad_scratch)?),
                    Some("S") => sent = true,
                    Some("A") => archived_event = true,
                    _ => return Err(bad_scratch()),
                }
            }
            if copies.is_empty() {
                continue;
            }
            let id = MessageId::new(key.as_str()).map_err(|_| bad_scratch())?;
            // One copy per id, the one furthest along its lifecycle, chosen
            // in the scan's order as the copies were met.
            let mut kept: Option<Seen> = None;
            for (dir, seen) in copies {
                match &kept {
                    Some(k) if scan.location(k.loc).stage() >= scan.location(seen.loc).stage() => {
                        let f = Finding::Duplicate {
                            id: id.clone(),
                            kept: scan.location(k.loc),
                            extra: scan.location(seen.loc),
                        };
                        out.duplicates.push((dir, id.clone(), f));
                    }
                    Some(k) => {
                        let f = Finding::Duplicate {
                            id: id.clone(),
                            kept: scan.location(seen.loc),
                            extra: scan.location(k.loc),
                        };
                        out.duplicates.push((dir, id.clone(), f));
                        kept = Some(seen);
                    }
                    None => kept = Some(seen),
                }
            }
            let m = kept.expect("one copy at least");
            out.messages += 1;
            if let Some(parent) = &m.in_reply_to {
                let line = format!("{parent}\tP\t{id}\t{}\t{}\t{}", m.kind, m.from, m.phase);
                scan.by_parent.push(line.as_bytes())?;
            }

            // Orphans, and the requests in an inbox that a response may have answered.
            let mut answerable = None;
            if let Loc::Inbox(agent) = m.loc {
                let reason = if scan.swept.contains(&m.phase) {
                    Some(OrphanReason::TaskSwept)
                } else if self
                    .config
                    .recipients
                    .as_ref()
                    .is_some_and(|r| !r.contains(scan.agents.get(agent)))
                {
                    Some(OrphanReason::UnknownRecipient)
                } else if self
                    .config
                    .orphan_after
                    .is_some_and(|age| now.since(m.created_at) > age)
                {
                    Some(OrphanReason::Stale)
                } else {
                    None
                };
                let (agent_id, task) = (scan.agents.get(agent), scan.tasks.get(m.phase));
                if let Some(reason) = reason {
                    out.inbox.push((
                        id.clone(),
                        Finding::Orphan {
                            id: id.clone(),
                            agent: agent_id.clone(),
                            task: task.clone(),
                            reason,
                        },
                    ));
                    out.orphans
                        .push((agent_id.clone(), id.clone(), task.clone(), reason));
                } else {
                    answerable = Some(agent);
                }
            }
            if m.needs_reply {
                let line = format!(
                    "{id}\tK\t{}\t{}\t{}",
                    m.to,
                    m.phase,
                    answerable.map(|a| a.to_string()).unwrap_or_default()
                );
                scan.by_parent.push(line.as_bytes())?;
            }

            // The manifest's events: their findings are spilled (a state
            // without its manifest has one per message), and so are the
            // events the repairs reconcile, only when they will run.
            let archived = m.loc != Loc::Archive || archived_event;
            if !(sent && archived) {
                let age = now.since(m.created_at);
                let fix = scan.mode == DoctorMode::Fix;
                if age < self.config.in_flight_grace {
                    let wait = self.config.in_flight_grace - age;
                    EventFinding::InFlight.push(scan, &id, m.loc, wait)?;
                } else {
                    if !sent {
                        EventFinding::NoSent.push(scan, &id, m.loc, Default::default())?;
                        if fix {
                            let loc = m.loc;
                            Reconcile::Sent {
                                id: id.clone(),
                                loc,
                            }
                            .push(scan)?;
                        }
                    }
                    if !archived {
                        EventFinding::NoArchived.push(scan, &id, m.loc, Default::default())?;
                        if fix {
                            let (to, task) = (m.to, m.phase);
                            Reconcile::Archived {
                                id: id.clone(),
                                to,
                                task,
                            }
                            .push(scan)?;
                        }
                    }
                }
            }

            if let Loc::ByTask(t) = m.loc {
                match out.by_task.get_mut(&t) {
                    Some(e) => {
                        e.0 += 1;
                        if m.created_at > e.2.created_at {
                            (e.1, e.2) = (id, m);
                        }
                    }
                    None => {
                        out.by_task.insert(t, (1, id, m));
                    }
                }
            }
        }
        Ok(out)
    }

    /// The second pass, one parent id at a time: which replies fit their
    /// request, which are missing from the reply index, and which requests
    /// still in an inbox have a response.
    pub(super) fn by_parent_pass<'a>(&'a self, scan: &mut Scan<'a>) -> Result<ByParent> {
        let sorter = std::mem::replace(
            &mut scan.by_parent,
            Sorter::new(&self.state, self.layout.mail(), 0),
        );
        let mut groups = Groups::new(sorter.finish()?)?;
        let mut out = ByParent::default();
        // In another program's folder (`Mail::in_folder`) the reply index is
        // chipset's own cache: that program's replies are never in it, and
        // every reader finds a reply without it.
        let index_expected = !self.in_place();
        while let Some((key, lines)) = groups.next_group()? {
            let parent = MessageId::new(key.as_str()).map_err(|_| bad_scratch())?;
            // The request (`to`, task, inbox it may be archived from).
            let mut request: Option<(u32, u32, Option<u32>)> = None;
            let mut replies: Vec<(MessageId, Kind, u32, u32)> = Vec::new();
            let mut markers: BTreeSet<(Kind, MessageId)> = BTreeSet::new();
            for line in &lines {
                let f: Vec<&str> = line.split('\t').collect();
                match f.as_slice() {
                    ["K", to, phase, agent] => {
                        let agent = match *agent {
                            "" => None,
                            a => Some(a.parse().map_err(|_| bad_scratch())?),
                        };
                        request = Some((
                            to.parse().map_err(|_| bad_scratch())?,
                            phase.parse().map_err(|_| bad_scratch())?,
                            agent,
                        ));
                    }
                    ["P", child, kind, from, phase] => replies.push((
                        MessageId::new(*child).map_err(|_| bad_scratch())?,
                        Kind::from_name(kind).ok_or_else(bad_scratch)?,
                        from.parse().map_err(|_| bad_scratch())?,
                        phase.parse().map_err(|_| bad_scratch())?,
                    )),
                    ["R", kind, child] => {
                        markers.insert((
                            Kind::from_name(kind).ok_or_else(bad_scratch)?,
                            MessageId::new(*child).map_err(|_| bad_scratch())?,
                        ));
                    }
                    _ => return Err(bad_scratch()),
                }
            }
            let mut answered = markers.iter().any(|(k, _)| *k == Kind::Response);
            for (child, kind, from, phase) in replies {
                if kind == Kind::Response {
                    // Only what `send` would accept answers a request: the
                    // request exists, expects a reply, is addressed to the
                    // responder, and is of the same task.
                    let fits = request.is_some_and(|(to, p, _)| to == from && p == phase);
                    if !fits {
                        let f = Finding::MismatchedResponse {
                            id: child.clone(),
                            parent: parent.clone(),
                        };
                        out.replies.push((child, f));
                        continue;
                    }
                    answered = true;
                }
                if index_expected && !markers.contains(&(kind, child.clone())) {
                    let f = Finding::MissingReplyMarker {
                        parent: parent.clone(),
                        child: child.clone(),
                        kind,
                    };
                    out.replies.push((child.clone(), f));
                    out.unlinked.push(child);
                }
            }
            if let Some((_, phase, Some(agent))) = request
                && answered
            {
                let agent = scan.agents.get(agent).clone();
                let f = Finding::AnsweredRequest {
                    id: parent.clone(),
                    agent: agent.clone(),
                };
                out.answered_requests
                    .push((agent, parent.clone(), scan.tasks.get(phase).clone()));
                out.replies.push((parent, f));
            }
        }
        Ok(out)
    }
}
