//! `last_seen`: computed when read, from files other channels already
//! write, so that no operation pays an extra write for it.

use std::collections::BTreeMap;
use std::time::UNIX_EPOCH;

use chipset_hook::HookStatus;
use chipset_store::{AgentId, ReadOutcome, Timestamp};
use serde::{Deserialize, Serialize};

use crate::directory::Directory;
use crate::error::Result;

/// How many bytes of the end of `mail/manifest.jsonl` are read for sends
/// and archives: 256 KiB, about a thousand events.
pub const MANIFEST_TAIL: u64 = 256 * 1024;

/// Where a [`Seen`] instant came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Source {
    /// The profile's `updated_at` (a registration).
    Registered,
    /// The bus presence's `last_seen` (`bus/{agent}/presence.json`).
    Presence,
    /// The hook's `last_activity`, when the hook is active or completed
    /// (the agent's own touches and completion; an assignment or a clear is
    /// the dispatcher's).
    Hook,
    /// The modification time of `bus/{agent}/processed/`: the last
    /// acknowledgement (or retention prune) there.
    Ack,
    /// A `sent` event from the agent in the tail of the mail manifest.
    Sent,
    /// An `archived` event of the agent's inbox in the tail of the mail
    /// manifest (it read and archived a message).
    Archived,
}

impl Source {
    /// Returns the name used in `--json` and MCP output.
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Registered => "registered",
            Source::Presence => "presence",
            Source::Hook => "hook",
            Source::Ack => "ack",
            Source::Sent => "sent",
            Source::Archived => "archived",
        }
    }
}

/// The latest activity found for an agent, and where.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Seen {
    /// When.
    pub at: Timestamp,
    /// Which file told.
    pub source: Source,
}

/// The latest `sent` (by sender) and `archived` (by inbox) instants in the
/// manifest's tail.
pub(crate) type MailTail = BTreeMap<AgentId, Seen>;

/// The fields of a manifest event the directory needs; others are ignored.
#[derive(Deserialize)]
struct TailEvent {
    event: String,
    #[serde(default)]
    from: Option<AgentId>,
    #[serde(default)]
    agent: Option<AgentId>,
    at: Timestamp,
}

fn newer(best: &mut Option<Seen>, at: Timestamp, source: Source) {
    if best.is_none_or(|b| at > b.at) {
        *best = Some(Seen { at, source });
    }
}

impl Directory {
    /// Reads the manifest's last [`MANIFEST_TAIL`] bytes once: every whole
    /// line after the first newline, skipping lines that do not parse (a
    /// torn last line, a foreign record).
    pub(crate) fn mail_tail(&self) -> Result<MailTail> {
        let mut out = MailTail::new();
        let path = self.mail.manifest_path();
        let files = self.mail.state();
        let Some(stat) = files.stat(&path)? else {
            return Ok(out);
        };
        let len = stat.len;
        let start = len.saturating_sub(MANIFEST_TAIL);
        let Some(bytes) = files.log_reader(&path)?.bytes_at(start, len)? else {
            return Ok(out);
        };
        let mut lines = bytes.split(|b| *b == b'\n');
        if start > 0 {
            lines.next(); // Cut in the middle of a line.
        }
        for line in lines {
            let Ok(e) = serde_json::from_slice::<TailEvent>(line) else {
                continue;
            };
            let (who, source) = match (e.event.as_str(), e.from, e.agent) {
                ("sent", Some(from), _) => (from, Source::Sent),
                ("archived", _, Some(agent)) => (agent, Source::Archived),
                _ => continue,
            };
            let mut best = out.get(&who).copied();
            newer(&mut best, e.at, source);
            if let Some(b) = best {
                out.insert(who, b);
            }
        }
        Ok(out)
    }

    /// Returns the latest activity of `agent` from its profile, presence,
    /// hook, processed folder and `tail`. A corrupt presence or hook is no
    /// evidence (it is reported by the doctor of its channel, not here).
    pub(crate) fn seen(
        &self,
        agent: &AgentId,
        updated_at: Timestamp,
        tail: &MailTail,
    ) -> Result<Seen> {
        let mut best = None;
        newer(&mut best, updated_at, Source::Registered);
        if let ReadOutcome::Value(p) = self.bus.presence(agent)? {
            newer(&mut best, p.last_seen, Source::Presence);
        }
        if let ReadOutcome::Value(h) = self.hooks.read(agent)?
            && matches!(h.state.status(), HookStatus::Active | HookStatus::Completed)
        {
            newer(&mut best, h.last_activity, Source::Hook);
        }
        if let Some(stat) = self.state.stat(&self.bus.processed_dir(agent))?
            && stat.is_dir()
            && let Some(ms) = stat
                .modified()
                .and_then(|m| m.duration_since(UNIX_EPOCH).ok())
                .and_then(|d| i64::try_from(d.as_millis()).ok())
        {
            newer(&mut best, Timestamp::from_unix_ms(ms), Source::Ack);
        }
        if let Some(s) = tail.get(agent) {
            newer(&mut best, s.at, s.source);
        }
        Ok(best.expect("the registration is always evidence"))
    }
}
