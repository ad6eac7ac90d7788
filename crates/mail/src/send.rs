//! Sending: publishing messages one at a time or in batches, and what
//! follows a publish (reply index, archive of the answered request, events).

use std::collections::BTreeMap;

use chipset_store::{SortableId, StatePath};

use crate::MessageId;

use crate::draft::{NewMessage, check_draft, check_parent, to_message};
use crate::error::{Error, Result};
use crate::format::{Kind, ManifestEvent, Message, ReplyMarker};
use crate::layout::Location;
use crate::mail::{Found, Mail, Moved};

/// A checked draft, ready to publish.
struct Prepared {
    message: Message,
    parent: Option<Found>,
    bytes: Vec<u8>,
    /// The first delivery of a chosen id sent before with the same content.
    first: Option<Message>,
    /// The id was chosen by the caller.
    chosen: bool,
}

impl Mail {
    // ---- sending -------------------------------------------------------

    /// Sends one message and returns it as written.
    ///
    /// **Commit point:** the no-clobber publish of the message file into
    /// `inbox/{to}/{id}.json` (written to a synced temp file first; the
    /// directory is synced after). A failure before it leaves nothing a
    /// reader can see. After it the message is sent, and the follow-up work
    /// is done as well as it can be: a message with `in_reply_to` is entered
    /// in the reply index (after it is published, so the index never claims
    /// a reply that does not exist), a response archives the request it
    /// answers, and a `sent` event is appended to the manifest (not synced
    /// on its own: see the crate docs, Durability). A failure of
    /// the follow-up does not fail the send (that would invite a duplicate):
    /// it is logged (`tracing`), and [`Mail::doctor`] with
    /// [`DoctorMode::Fix`](chipset_store::DoctorMode::Fix) completes it (a missing
    /// `sent` event, index entry, archive of an answered request, or its
    /// `archived` event); the
    /// gate and [`Mail::has_reply`] do not wait for it.
    ///
    /// With a caller-chosen id ([`NewMessage::with_id`]), sending again follows
    /// the store's idempotent-retry rule: when a message with the id exists
    /// anywhere (an inbox, `archive/`, a by-task or the orphan archive) and
    /// has the same content (every field but `created_at` and the declared
    /// `schema`), the first delivery
    /// is returned as success, nothing is written but the missing follow-up
    /// (reply index entry, archive of the answered request); other content is
    /// [`Error::IdTaken`], as is an id a group was sent under
    /// ([`Mail::send_group`]) when the group's copy to this addressee exists.
    ///
    /// # Errors
    ///
    /// Refusals, with nothing written: [`Error::InvalidSubject`],
    /// [`Error::BodyTooLarge`], [`Error::MessageTooLarge`],
    /// [`Error::UnknownRecipient`], [`Error::IdTaken`], and for replies
    /// [`Error::ParentNotFound`], [`Error::NotARequest`],
    /// [`Error::NotAddressee`], [`Error::TaskMismatch`]; a corrupt
    /// parent is [`Error::Corrupt`]. [`Error::Store`] when a
    /// filesystem step before the commit point fails: nothing is visible.
    /// [`Error::OutcomeUnknown`], carrying the id, when the publish
    /// happened but its directory sync failed: the message may be delivered,
    /// so retry with the same id.
    pub fn send(&self, draft: &NewMessage) -> Result<Message> {
        self.refuse_group_ids(std::slice::from_ref(draft))?;
        if let Some(server) = self.server() {
            return server.send(draft);
        }
        let p = self.prepare(draft)?;
        if let Some(first) = p.first {
            // A retry of a send that applied: finish its follow-up, if missing.
            self.follow_up(&[(first.clone(), p.parent)], false);
            return Ok(first);
        }
        let message = p.message;
        let path = self
            .layout
            .file(&Location::Inbox(message.to.clone()), &message.id);
        let meta = match self.state.create_new_stat(&path, &p.bytes) {
            Ok(meta) => meta,
            Err(chipset_store::Error::AlreadyExists { path }) => {
                if draft.id.is_none() {
                    return Err(Error::IdCollision { path });
                }
                // A concurrent send of the same chosen id won the race.
                return match self.found(&message.id)? {
                    Some(found) if found.message.same_content(&message) => Ok(found.message),
                    Some(found) => Err(Error::IdTaken {
                        id: message.id,
                        location: found.location,
                    }),
                    None => Err(Error::IdCollision { path }),
                };
            }
            Err(source @ chipset_store::Error::OutcomeUnknown { .. }) => {
                return Err(Error::OutcomeUnknown {
                    ids: vec![message.id],
                    source,
                });
            }
            Err(e) => return Err(e.into()),
        };
        tracing::debug!(id = %message.id, to = %message.to, kind = %message.kind, "sent message");
        self.record_sent([(&message, p.bytes.len(), meta)]);
        self.follow_up(&[(message.clone(), p.parent)], true);
        Ok(message)
    }

    /// Sends many messages sharing syncs: every file is synced once, each
    /// inbox directory once, and the manifest once for all the `sent` events.
    /// Returns the messages in draft order.
    ///
    /// Every draft is checked before anything is written; a reply's parent
    /// must exist before the batch (not be in it).
    ///
    /// **Commit points:** each message's own no-clobber publish; the batch
    /// has none of its own. The follow-up is as for [`Mail::send`], done once
    /// for the batch, and its failure does not fail the batch. Drafts with
    /// a chosen id whose message exists with the same content are returned
    /// as first delivered and not written again, so a retry of a batch that
    /// failed part way (with every draft given an id) sends only the rest.
    ///
    /// # Errors
    ///
    /// As [`Mail::send`]. A refusal of any draft writes nothing; a filesystem
    /// failure before any file is published leaves nothing visible; a failure
    /// after one is [`Error::OutcomeUnknown`] naming the batch's new ids. A
    /// draft found taken at its publish (a concurrent sender took its id:
    /// [`Error::IdTaken`], [`Error::IdCollision`], or a failure reading what
    /// is there) after others of the batch were published is
    /// [`Error::PartlySent`], naming the ones delivered and keeping the
    /// refusal as its source; with none published it is the refusal itself.
    pub fn send_batch(&self, drafts: &[NewMessage]) -> Result<Vec<Message>> {
        self.refuse_group_ids(drafts)?;
        if let Some(server) = self.server() {
            return server.send_batch(drafts);
        }
        let mut prepared = Vec::with_capacity(drafts.len());
        let mut chosen = std::collections::BTreeSet::new();
        for draft in drafts {
            let p = self.prepare(draft)?;
            if draft.id.is_some() && !chosen.insert(p.message.id.clone()) {
                return Err(Error::IdTaken {
                    location: Location::Inbox(p.message.to.clone()),
                    id: p.message.id,
                });
            }
            prepared.push(p);
        }
        let fresh: Vec<&Prepared> = prepared.iter().filter(|p| p.first.is_none()).collect();
        let items: Vec<(StatePath, Vec<u8>)> = fresh
            .iter()
            .map(|p| {
                let m = &p.message;
                let path = self.layout.file(&Location::Inbox(m.to.clone()), &m.id);
                (path, p.bytes.clone())
            })
            .collect();
        let outcomes = match self.state.create_new_batch_stat(&items) {
            Ok(outcomes) => outcomes,
            Err(source @ chipset_store::Error::OutcomeUnknown { .. }) => {
                return Err(Error::OutcomeUnknown {
                    ids: fresh.iter().map(|p| p.message.id.clone()).collect(),
                    source,
                });
            }
            Err(e) => return Err(e.into()),
        };
        let mut sent = Vec::with_capacity(fresh.len());
        let mut collision = None;
        let mut raced = Vec::new();
        for ((p, outcome), (path, _)) in fresh.iter().zip(&outcomes).zip(&items) {
            if outcome.0 == chipset_store::Created::New {
                sent.push((p.message.clone(), p.parent.clone()));
            } else if p.chosen {
                raced.push(p.message.clone());
            } else {
                collision.get_or_insert_with(|| path.clone().into_path_buf());
            }
        }
        self.record_sent(
            fresh
                .iter()
                .zip(outcomes)
                .filter(|(_, (created, _))| *created == chipset_store::Created::New)
                .map(|(p, (_, meta))| (&p.message, p.bytes.len(), meta)),
        );
        self.follow_up(&sent, true);
        // A failure from here on comes after this call delivered `sent`:
        // never "nothing changed".
        let partly = |source: Error| {
            if sent.is_empty() {
                return source;
            }
            Error::PartlySent {
                ids: sent.iter().map(|(m, _)| m.id.clone()).collect(),
                source: Box::new(source),
            }
        };
        if let Some(path) = collision {
            return Err(partly(Error::IdCollision { path }));
        }
        // A concurrent send of the same chosen id won the race: it is the
        // first delivery when its content is the same.
        let mut firsts: BTreeMap<MessageId, Message> = BTreeMap::new();
        for m in raced {
            match self.found(&m.id).map_err(&partly)? {
                Some(found) if found.message.same_content(&m) => {
                    firsts.insert(m.id.clone(), found.message);
                }
                Some(found) => {
                    return Err(partly(Error::IdTaken {
                        id: m.id,
                        location: found.location,
                    }));
                }
                None => {
                    return Err(partly(Error::IdCollision {
                        path: self
                            .layout
                            .file(&Location::Inbox(m.to.clone()), &m.id)
                            .into_path_buf(),
                    }));
                }
            }
        }
        let mut retried = Vec::new();
        let out = prepared
            .into_iter()
            .map(|p| match p.first {
                Some(first) => {
                    retried.push((first.clone(), p.parent));
                    first
                }
                None => firsts.remove(&p.message.id).unwrap_or(p.message),
            })
            .collect();
        self.follow_up(&retried, false);
        Ok(out)
    }

    /// The follow-up of sends past their commit point: the reply index, the
    /// archive of answered requests and (for `append`) the `sent` events.
    /// Failures are logged, not returned: the sends happened, and
    /// [`Mail::doctor`] completes what is missing.
    fn follow_up(&self, sent: &[(Message, Option<Found>)], append: bool) {
        if sent.is_empty() {
            return;
        }
        let mut events: Vec<ManifestEvent> = if append {
            sent.iter()
                .map(|(m, _)| ManifestEvent::sent(m, false))
                .collect()
        } else {
            Vec::new()
        };
        let replies: Vec<Message> = sent
            .iter()
            .filter(|(_, parent)| parent.is_some())
            .map(|(m, _)| m.clone())
            .collect();
        if let Err(e) = self.link_replies(&replies) {
            tracing::warn!(error = %e, "sent, but the reply index was not updated (the doctor completes it)");
        }
        for (message, parent) in sent {
            let Some(parent) = parent else { continue };
            match self.archive_answered(parent, message) {
                Ok(event) => events.extend(event),
                Err(e) => tracing::warn!(
                    id = %message.id, error = %e,
                    "sent, but the answered request was not archived (the doctor completes it)"
                ),
            }
        }
        if events.is_empty() {
            return;
        }
        if let Err(e) = self.append_send_events(&events) {
            tracing::warn!(error = %e, "the manifest append after a commit point failed (the doctor completes it)");
        }
    }

    /// Appends a send's manifest events. `sent` events alone are written
    /// without a data sync: the message files they describe are durable
    /// already, and [`Mail::doctor`] rebuilds a `sent` event a power cut
    /// lost from its file, so the sync is left to the next synced append
    /// (or the kernel's writeback). Any other event (a response's
    /// `archived`) is synced before `send` returns.
    fn append_send_events(&self, events: &[ManifestEvent]) -> Result<()> {
        let log = self.manifest()?;
        if events
            .iter()
            .all(|e| matches!(e, ManifestEvent::Sent { .. }))
        {
            log.append_batch_unsynced(events)?;
        } else {
            log.append_batch(events)?;
        }
        Ok(())
    }

    /// Checks a draft and turns it into a message, its parent and its bytes;
    /// for a chosen id already sent with the same content, also the first
    /// delivery.
    fn prepare(&self, draft: &NewMessage) -> Result<Prepared> {
        check_draft(draft, &self.config)?;
        let parent = match &draft.in_reply_to {
            Some(pid) => Some(
                self.find_with(pid, draft.task.as_ref())?
                    .ok_or_else(|| Error::ParentNotFound { id: pid.clone() })?,
            ),
            None => None,
        };
        let task = match (&parent, &draft.task) {
            (Some(p), _) => check_parent(draft, &p.message)?,
            (None, Some(task)) => task.clone(),
            (None, None) => unreachable!("only responses lack a task, and they name their request"),
        };
        let id = match &draft.id {
            Some(id) => id.clone(),
            None => MessageId::from(SortableId::generate(self.state.clock().as_ref())),
        };
        let message = to_message(draft, id, task, self.state.now());
        let mut first = None;
        if draft.id.is_some()
            && !draft.fresh
            && let Some(found) = self.found(&message.id)?
        {
            if !found.message.same_content(&message) {
                return Err(Error::IdTaken {
                    id: message.id,
                    location: found.location,
                });
            }
            first = Some(found.message);
        }
        let bytes = self.encode(&message)?;
        Ok(Prepared {
            message,
            parent,
            bytes,
            first,
            chosen: draft.id.is_some() && !draft.fresh,
        })
    }

    fn encode(&self, message: &Message) -> Result<Vec<u8>> {
        let bytes = chipset_store::StateDir::to_canonical_json(message).map_err(|source| {
            chipset_store::Error::Serialize {
                path: self
                    .layout
                    .file(&Location::Inbox(message.to.clone()), &message.id)
                    .into_path_buf(),
                source,
            }
        })?;
        if bytes.len() as u64 > self.state.read_cap() {
            return Err(Error::MessageTooLarge {
                size: bytes.len(),
                cap: self.state.read_cap(),
            });
        }
        Ok(bytes)
    }

    /// Enters published replies in the reply index (no-clobber: a marker that
    /// exists already is left alone).
    pub(crate) fn link_replies(&self, replies: &[Message]) -> Result<()> {
        let mut items = Vec::new();
        for m in replies {
            let Some(parent) = &m.in_reply_to else {
                continue;
            };
            let marker = ReplyMarker {
                id: m.id.clone(),
                kind: m.kind,
                to: m.to.clone(),
                parent: parent.clone(),
            };
            let path = self.layout.reply_marker(parent, m.kind, &m.id);
            let bytes = chipset_store::StateDir::to_canonical_json(&marker).map_err(|source| {
                chipset_store::Error::Serialize {
                    path: path.clone().into_path_buf(),
                    source,
                }
            })?;
            items.push((path, bytes));
        }
        match items.len() {
            0 => {}
            1 => match self.state.create_new(&items[0].0, &items[0].1) {
                Ok(()) | Err(chipset_store::Error::AlreadyExists { .. }) => {}
                Err(e) => return Err(e.into()),
            },
            _ => {
                self.state.create_new_batch(&items)?;
            }
        }
        Ok(())
    }

    /// The seed's side effect of a response: archive the request it answers.
    fn archive_answered(
        &self,
        parent: &Found,
        response: &Message,
    ) -> Result<Option<ManifestEvent>> {
        if response.kind != Kind::Response {
            return Ok(None);
        }
        let Location::Inbox(agent) = &parent.location else {
            return Ok(None);
        };
        let request = &parent.message;
        match self.move_message(&request.id, &parent.location, &Location::Archive)? {
            Moved::Done => Ok(Some(ManifestEvent::Archived {
                id: request.id.clone(),
                agent: agent.clone(),
                task: request.phase.clone(),
                reply: Some(response.id.clone()),
                at: self.state.now(),
                reconciled: false,
            })),
            Moved::Gone | Moved::Taken => Ok(None),
        }
    }
}
