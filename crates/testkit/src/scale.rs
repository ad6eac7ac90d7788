//! Mail states at scale for benchmarks: messages and manifest lines in the
//! exact shape chipset-mail writes, laid down with plain writes and no
//! sync, so a state of 100,000 messages builds in seconds.

use std::fs;
use std::io::{BufWriter, Write as _};
use std::path::{Path, PathBuf};

/// Agent `i`'s name: `agent-000`, `agent-001`, ...
pub fn agent_name(i: usize) -> String {
    format!("agent-{i:03}")
}

/// The id of message `n`: sortable, unique, and a valid message id.
pub fn message_id(n: usize) -> String {
    format!("{}-{:08x}-0000-4000-8000-{:012x}", BASE_MS + n as u64, n, n)
}

/// The millisecond the generated ids count from.
const BASE_MS: u64 = 1_772_706_900_000;

/// Message `n`'s file: `kind` is `request` (expecting a reply) or `notify`.
pub fn message_json(n: usize, from: &str, to: &str, task: &str, kind: &str) -> String {
    let expects = kind == "request";
    let ms = BASE_MS + n as u64;
    let secs = ms / 1000;
    let created = format!(
        "2026-03-05T{:02}:{:02}:{:02}.{:03}Z",
        (secs / 3600) % 24,
        (secs / 60) % 60,
        secs % 60,
        ms % 1000
    );
    format!(
        "{{\n  \"body\": \"finding {n}: the assertion in tests/foo.rs:42 cannot fail\",\n  \"created_at\": \"{created}\",\n  \"expects_reply\": {expects},\n  \"from\": \"{from}\",\n  \"id\": \"{id}\",\n  \"in_reply_to\": null,\n  \"kind\": \"{kind}\",\n  \"phase\": \"{task}\",\n  \"priority\": \"normal\",\n  \"round\": 2,\n  \"subject\": \"weak-assertion\",\n  \"to\": \"{to}\"\n}}\n",
        id = message_id(n)
    )
}

/// Message `n`'s `sent` line in the audit manifest.
pub fn sent_line(n: usize, from: &str, to: &str, task: &str, kind: &str) -> String {
    format!(
        "{{\"at\":\"2026-03-05T10:35:00.123Z\",\"event\":\"sent\",\"from\":\"{from}\",\"id\":\"{}\",\"in_reply_to\":null,\"kind\":\"{kind}\",\"priority\":\"normal\",\"round\":2,\"subject\":\"weak-assertion\",\"task\":\"{task}\",\"to\":\"{to}\"}}\n",
        message_id(n)
    )
}

/// Writes messages into a state root's inboxes and manifest.
#[derive(Debug)]
pub struct MailWriter {
    mail: PathBuf,
    manifest: BufWriter<fs::File>,
}

impl MailWriter {
    /// Creates `state/mail` with an inbox for each of `agents` agents
    /// ([`agent_name`]) and an empty manifest.
    ///
    /// # Panics
    ///
    /// When a folder or the manifest cannot be created.
    pub fn create(state: &Path, agents: usize) -> Self {
        let mail = state.join("mail");
        for a in 0..agents {
            fs::create_dir_all(mail.join("inbox").join(agent_name(a))).unwrap();
        }
        let manifest = BufWriter::new(fs::File::create(mail.join("manifest.jsonl")).unwrap());
        MailWriter { mail, manifest }
    }

    /// Writes message `n` into `to`'s inbox and its manifest line.
    ///
    /// # Panics
    ///
    /// When a write fails.
    pub fn put(&mut self, n: usize, from: &str, to: &str, task: &str, kind: &str) {
        let path = self
            .mail
            .join("inbox")
            .join(to)
            .join(format!("{}.json", message_id(n)));
        fs::write(path, message_json(n, from, to, task, kind)).unwrap();
        self.manifest
            .write_all(sent_line(n, from, to, task, kind).as_bytes())
            .unwrap();
    }

    /// Writes the usual spread: message `n` of `messages` goes to agent
    /// `n % agents` from agent `(n + 7) % agents`, in one of `tasks` tasks
    /// (`M001-S001-T0000`, ...), one in ten a request.
    pub fn spread(&mut self, agents: usize, tasks: usize, messages: usize) {
        for n in 0..messages {
            let to = agent_name(n % agents);
            let from = agent_name((n + 7) % agents);
            let task = format!("M001-S001-T{:04}", n % tasks);
            let kind = if n % 10 == 0 { "request" } else { "notify" };
            self.put(n, &from, &to, &task, kind);
        }
    }

    /// Flushes the manifest.
    ///
    /// # Panics
    ///
    /// When the write fails.
    pub fn finish(mut self) {
        self.manifest.flush().unwrap();
    }
}
