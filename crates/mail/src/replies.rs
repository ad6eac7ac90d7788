//! Replies and the commit gate: whether a request is answered, and the
//! requests of a task still waiting for one.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use chipset_store::{ReadOutcome, StatePath, TaskId};

use crate::MessageId;

use crate::error::Result;
use crate::format::{Kind, Message, parse_message};
use crate::layout::{id_of, parse_marker};
use crate::mail::{MTIME_SLACK, Mail, answers, contains, message_cap, modified};
use crate::tail::Caught;

/// How many requests [`Mail::pending_replies`] looks up in the reply index
/// one at a time; with more, it lists `replies/` once.
const LOOKUPS: usize = 256;

impl Mail {
    /// Returns true when a response to `id` exists.
    ///
    /// Decided by the response files that exist, not only by chipset's reply
    /// index. The fast path is one listing of the index (`replies/{id}/`),
    /// which holds an entry for every response chipset sent. On a miss, the
    /// request is located and its responses are looked for where they can
    /// be: a response is addressed to the request's sender, so in
    /// `inbox/{sender}/`, and in `archive/` and `archive/by-task/{task}/`
    /// once archived. What entered `archive/` is learnt from the manifest's
    /// `archived` events since the last look (the archive tail, see the
    /// crate docs), so `archive/` is listed only for a request older than
    /// the tail. A response whose `sent` event the tail just read is read
    /// from the file the event names before any folder is listed. A folder
    /// whose mtime shows nothing entered it since
    /// the request was sent is not listed; of the others only files whose
    /// names sort after the request's id are read (a response is sent after
    /// its request), and a file counts
    /// only when it is a response that names the request, comes from its
    /// addressee and belongs to its task (what [`Mail::send`] would accept).
    /// The folders are looked at in that order, and the search stops at
    /// the first response found. So a response written by another program, or by a chipset sender that
    /// crashed before its index entry, counts at once, without
    /// [`Mail::doctor`].
    ///
    /// # Errors
    ///
    /// [`Error::Store`](crate::Error::Store) when a directory cannot be listed;
    /// [`Error::Corrupt`](crate::Error::Corrupt) when the request's own file is unreadable.
    /// Unreadable files among the candidates are passed over: they can only
    /// make a request look unanswered (the safe side; the doctor reports them).
    pub fn has_reply(&self, id: &MessageId) -> Result<bool> {
        if let Some(server) = self.server() {
            return server.has_reply(id);
        }
        if self.indexed_reply(id)? {
            return Ok(true);
        }
        match self.found(id)? {
            Some(found) => Ok(self.unindexed_reply(&found.message)?.is_some()),
            None => Ok(false),
        }
    }

    /// Returns true when the reply index holds a response to `id`.
    pub(crate) fn indexed_reply(&self, id: &MessageId) -> Result<bool> {
        Ok(self
            .replies_of(id)?
            .iter()
            .any(|(k, _)| *k == Kind::Response))
    }

    /// Returns a response to `request` that the reply index does not know:
    /// the fallback of [`Mail::has_reply`].
    pub(crate) fn unindexed_reply(&self, request: &Message) -> Result<Option<Message>> {
        // Responses archived since the tail last looked enter the index.
        let mut caught = self.catch_up_archive()?;
        if let Some(response) = caught.responses.remove(&request.id) {
            return Ok(Some(response));
        }
        // A response sent since the tail last looked is where its `sent`
        // event says: read that file instead of listing the inbox.
        if let Some(response) = self.sent_response(&caught, request)? {
            return Ok(Some(response));
        }
        // Another reader may have caught up since this one looked at the index.
        if self.indexed_reply(&request.id)? {
            return self.indexed_response(request);
        }
        let mut dirs = vec![
            self.layout.inbox(&request.from),
            self.layout.by_task(&request.phase),
        ];
        if !caught.covers(request.created_at) {
            dirs.push(self.layout.archive_root());
        }
        let mut found = self.responses_among(&[request], &dirs)?;
        Ok(found.pop_first().map(|(_, response)| response))
    }

    /// Returns a response to `request` that the reply index holds (the
    /// message itself, wherever it is now).
    fn indexed_response(&self, request: &Message) -> Result<Option<Message>> {
        for (kind, id) in self.replies_of(&request.id)? {
            if kind == Kind::Response
                && let Some(found) = self.find_with(&id, Some(&request.phase))?
            {
                return Ok(Some(found.message));
            }
        }
        Ok(None)
    }

    /// Reads the files of `dirs` whose names sort after the oldest of
    /// `requests` and returns, per answered request, one response that fits
    /// it. A file is parsed only when it mentions one of the requests' ids.
    /// The folders are looked at in order, and those left once every
    /// request has a response are not listed.
    fn responses_among(
        &self,
        requests: &[&Message],
        dirs: &[StatePath],
    ) -> Result<BTreeMap<MessageId, Message>> {
        let mut answered = BTreeMap::new();
        let Some(oldest) = requests.iter().map(|r| &r.id).min() else {
            return Ok(answered);
        };
        // Built at the first candidate file: most folders hold none.
        let mut wanted: Option<HashMap<&MessageId, &Message>> = None;
        let sent = requests.iter().map(|r| r.created_at).min();
        for dir in dirs {
            // One response per request is all that is asked: once each has
            // one, the folders left are not listed (for one request answered
            // in its sender's inbox, `archive/` is never listed).
            if answered.len() == requests.len() {
                break;
            }
            // A response is put into a folder after its request was sent,
            // which sets the folder's mtime; a folder unchanged since (with
            // slack for clocks) cannot hold one, and is not listed. A wrong
            // skip could only keep a request pending, never open the gate.
            if let (Some(sent), Some(changed)) = (sent, modified(&self.state, dir)?)
                && changed + MTIME_SLACK < sent
            {
                continue;
            }
            // Compared as text before the id is parsed, and kept only when
            // newer: ids order as their text does, and most names sort
            // before the oldest request (nothing else is collected or
            // sorted). Then read in id order, as a sorted listing gives them.
            let mut newer = Vec::new();
            self.state.for_each_name(dir, |name| -> Result<()> {
                if name
                    .strip_suffix(".json")
                    .is_some_and(|s| s > oldest.as_str())
                {
                    newer.push(name);
                }
                Ok(())
            })?;
            newer.sort_unstable();
            for name in newer {
                let Some(id) = id_of(&name) else { continue };
                let path = dir.join_id(&id, ".json");
                let bytes = match self
                    .state
                    .read_bytes_capped(&path, message_cap(&self.state))
                {
                    Ok(ReadOutcome::Value((bytes, _))) => bytes,
                    // Moved on, unreadable, or not a regular file: not an answer.
                    Ok(_) | Err(chipset_store::Error::Symlink { .. }) => continue,
                    Err(e) => return Err(e.into()),
                };
                let wanted =
                    wanted.get_or_insert_with(|| requests.iter().map(|r| (&r.id, *r)).collect());
                if !wanted
                    .keys()
                    .any(|w| contains(&bytes, w.as_str().as_bytes()))
                {
                    continue;
                }
                let ReadOutcome::Value(m) = parse_message(&path, &bytes) else {
                    continue;
                };
                if m.id != id {
                    continue;
                }
                if let Some(parent) = m.in_reply_to.as_ref().and_then(|p| wanted.get(p))
                    && answers(&m, parent)
                {
                    answered.entry(parent.id.clone()).or_insert(m);
                }
            }
        }
        Ok(answered)
    }

    /// Returns the ids among `requests` that the reply index holds a
    /// response to ([`Mail::indexed_reply`] of each).
    ///
    /// For many requests, `replies/` is listed once (names only) and only
    /// the requests with a folder there are looked at: a lookup per request
    /// costs more than the listing once they outnumber [`LOOKUPS`]. Either
    /// way each folder is looked at once, after the call began, so the
    /// answer is what per-request lookups would give.
    fn indexed_among(&self, requests: &[&Message]) -> Result<BTreeSet<MessageId>> {
        let mut out = BTreeSet::new();
        if requests.len() <= LOOKUPS {
            for q in requests {
                if self.indexed_reply(&q.id)? {
                    out.insert(q.id.clone());
                }
            }
            return Ok(out);
        }
        let wanted: HashSet<&str> = requests.iter().map(|q| q.id.as_str()).collect();
        let mut present = Vec::new();
        self.state
            .for_each_name(&self.layout.replies_root(), |name| -> Result<()> {
                if wanted.contains(name.as_str())
                    && let Ok(id) = MessageId::new(name.as_str())
                {
                    present.push(id);
                }
                Ok(())
            })?;
        for id in present {
            if self.indexed_reply(&id)? {
                out.insert(id);
            }
        }
        Ok(out)
    }

    /// For each of `requests` (the open requests of `task` in its inboxes),
    /// whether it is still waiting for a response: none among `responses`
    /// (the task's responses in the inboxes: what they answer, and who sent
    /// them), none in the reply index, and none in `archive/` or the task's
    /// by-task archive.
    fn still_open(
        &self,
        task: &TaskId,
        requests: &[&Message],
        responses: &[(MessageId, chipset_store::AgentId)],
    ) -> Result<Vec<bool>> {
        // Positions in `requests` of those not known to be answered yet.
        let mut open: Vec<usize> = (0..requests.len()).collect();
        let of = |open: &[usize]| -> Vec<&Message> { open.iter().map(|&i| requests[i]).collect() };
        // A request whose response exists is answered, whoever wrote the
        // response and whether or not the request was moved yet: looked up
        // per request (what `answers` checks), so the check costs the task's
        // files once, not once per request.
        if !responses.is_empty() {
            let responses: HashSet<(&MessageId, &chipset_store::AgentId)> = responses
                .iter()
                .map(|(parent, from)| (parent, from))
                .collect();
            open.retain(|&i| !responses.contains(&(&requests[i].id, &requests[i].to)));
        }
        let indexed = self.indexed_among(&of(&open))?;
        open.retain(|&i| !indexed.contains(&requests[i].id));
        let mut caught = Caught::default();
        if !open.is_empty() {
            // Responses archived since the tail last looked enter the index.
            caught = self.catch_up_archive()?;
            open.retain(|&i| !caught.responses.contains_key(&requests[i].id));
            // Found by another reader that caught up since the index was
            // looked at above.
            let indexed = self.indexed_among(&of(&open))?;
            open.retain(|&i| !indexed.contains(&requests[i].id));
        }
        if !open.is_empty() {
            let found = self.responses_among(&of(&open), &[self.layout.by_task(task)])?;
            open.retain(|&i| !found.contains_key(&requests[i].id));
            // Only requests older than the tail can have a response in
            // `archive/` that the tail did not see.
            let old: Vec<&Message> = of(&open)
                .into_iter()
                .filter(|q| !caught.covers(q.created_at))
                .collect();
            if !old.is_empty() {
                let found = self.responses_among(&old, &[self.layout.archive_root()])?;
                open.retain(|&i| !found.contains_key(&requests[i].id));
            }
        }
        let mut still = vec![false; requests.len()];
        for i in open {
            still[i] = true;
        }
        Ok(still)
    }

    /// Returns the replies the index knows for `parent`: kind and id, by id.
    pub(crate) fn replies_of(&self, parent: &MessageId) -> Result<Vec<(Kind, MessageId)>> {
        Ok(self
            .state
            .list(&self.layout.replies(parent))?
            .iter()
            .filter_map(|n| parse_marker(n))
            .collect())
    }

    /// Returns the requests of `task` that expect a reply, are not archived
    /// and have no response, in id order: the commit gate (the task may
    /// commit when the list is empty).
    ///
    /// Looks at every inbox (archived messages are never pending), through the
    /// gate cache (see the crate docs): only the task's entries are read, and
    /// an inbox changed since the cache saw it is listed again. A request
    /// still in its inbox counts as answered when a response that fits it
    /// exists: in an inbox, in the reply index, or (looked for only when the
    /// first two do not answer) in `archive/` (through the archive tail, as
    /// [`Mail::has_reply`] does) or the task's by-task archive,
    /// among the files newer than the oldest such request. So a response
    /// another program wrote (nubos-pilot does not move the request when it
    /// sends one) takes the request off this list at once. A message whose
    /// phase no [`TaskId`] can be ([`Message::foreign_task`]) is another
    /// program's task's, never `task`'s: it is left out.
    ///
    /// # Errors
    ///
    /// Fails closed: [`Error::Corrupt`](crate::Error::Corrupt) naming the file when any inbox
    /// holds a file that is not a readable message (it could be one of this
    /// task's requests); [`Error::QuarantinedInbox`](crate::Error::QuarantinedInbox) when the doctor has
    /// moved such a file aside and no person has dealt with it yet (repair
    /// must not turn a blocked gate into an open one); and
    /// [`Error::Store`](crate::Error::Store) when an inbox cannot be read. Never a shorter list.
    pub fn pending_replies(&self, task: &TaskId) -> Result<Vec<Message>> {
        if let Some(server) = self.server() {
            return server.pending_replies(task);
        }
        // The open requests, each read and checked (failing closed), and
        // which of them are still waiting, decided (while the gate's caches
        // are written) by the task's responses in the inboxes, the reply
        // index and the archives.
        let (mut out, still) = self.gate_files(task, |requests, responses| {
            self.still_open(task, requests, responses)
        })?;
        let mut still = still.into_iter();
        out.retain(|_| still.next().unwrap_or(false));
        // A copy of an `any` group leaves once another copy is answered.
        self.settle_groups(&mut out)?;
        out.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(out)
    }
}
