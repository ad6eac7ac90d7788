//! The brute-force search the index is checked against: every record read
//! again from the channels' files, matched word by word.

use std::collections::BTreeSet;
use std::path::Path;

use chipset_bus::Bus;
use chipset_hook::Hooks;
use chipset_mail::Message;
use chipset_nudge::{KindRegistry, ReminderFilter, Reminders};
use chipset_search::{Origin, Query};
use chipset_store::{ReadOutcome, StateDir};

/// One record as the brute force sees it.
#[derive(Debug)]
struct Record {
    channel: Origin,
    id: String,
    from: Option<String>,
    to: Option<String>,
    task: Option<String>,
    kind: Option<String>,
    at_ms: i64,
    text: String,
}

fn tokens(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|t| !t.is_empty())
        .map(str::to_lowercase)
        .collect()
}

fn messages(dir: &Path, out: &mut Vec<Record>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            continue;
        }
        let Ok(bytes) = std::fs::read(&path) else {
            continue;
        };
        let Ok(m) = serde_json::from_slice::<Message>(&bytes) else {
            continue;
        };
        if path.file_stem().and_then(|s| s.to_str()) != Some(m.id.as_str()) {
            continue;
        }
        out.push(Record {
            channel: Origin::Mail,
            id: m.id.to_string(),
            from: Some(m.from.to_string()),
            to: Some(m.to.to_string()),
            task: Some(m.task().to_string()),
            kind: Some(m.kind.to_string()),
            at_ms: m.created_at.unix_ms(),
            text: format!("{} {}", m.subject, m.body),
        });
    }
}

fn subdirs(dir: &Path) -> Vec<std::path::PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir() && !p.file_name().unwrap().to_string_lossy().starts_with('.'))
        .collect()
}

fn records(state: &StateDir) -> Vec<Record> {
    let mut out = Vec::new();
    let mail = state.root().join("mail");
    for inbox in subdirs(&mail.join("inbox")) {
        messages(&inbox, &mut out);
    }
    messages(&mail.join("archive"), &mut out);
    messages(&mail.join("archive/orphan"), &mut out);
    for task in subdirs(&mail.join("archive/by-task")) {
        messages(&task, &mut out);
    }
    let bus = Bus::new(state.clone());
    for agent in bus.agents().unwrap() {
        for e in bus.pending(&agent).unwrap().events {
            let payload = match &e.payload {
                serde_json::Value::Null => String::new(),
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            out.push(Record {
                channel: Origin::Bus,
                id: e.id.to_string(),
                from: Some(e.source.clone()),
                to: Some(agent.to_string()),
                task: None,
                kind: Some(e.kind.clone()),
                at_ms: e.created_at.unix_ms(),
                text: format!("{} {payload}", e.kind),
            });
        }
    }
    for (agent, read) in Hooks::new(state.clone()).list().unwrap() {
        let ReadOutcome::Value(hook) = read else {
            continue;
        };
        let Some(work) = hook.state.work() else {
            continue;
        };
        out.push(Record {
            channel: Origin::Hook,
            id: agent.to_string(),
            from: work.assigned_by.as_ref().map(ToString::to_string),
            to: Some(agent.to_string()),
            task: Some(work.bead_id.to_string()),
            kind: Some(hook.state.status().to_string()),
            at_ms: work.assigned_at.unix_ms(),
            text: work.title.clone(),
        });
    }
    let reminders = Reminders::new(state.clone(), KindRegistry::preset());
    for r in reminders
        .list(&ReminderFilter {
            history: true,
            ..ReminderFilter::default()
        })
        .unwrap()
        .items
    {
        out.push(Record {
            channel: Origin::Reminder,
            id: r.id.to_string(),
            from: None,
            to: None,
            task: None,
            kind: Some(r.kind.clone()),
            at_ms: r.created_at.unix_ms(),
            text: format!("{} {} {}", r.message, r.source_type, r.source_id),
        });
    }
    out
}

/// Returns (channel, id) of every record that `query` matches, where the
/// query's text is plain words, each maybe ending in `*`.
pub(crate) fn search(state: &StateDir, query: &Query) -> BTreeSet<(Origin, String)> {
    let words: Vec<(String, bool)> = query
        .text
        .split_whitespace()
        .map(|w| match w.strip_suffix('*') {
            Some(stem) => (stem.to_lowercase(), true),
            None => (w.to_lowercase(), false),
        })
        .collect();
    let eq = |want: &Option<String>, have: &Option<String>| want.is_none() || want == have;
    records(state)
        .into_iter()
        .filter(|r| {
            let toks = tokens(&r.text);
            words.iter().all(|(w, prefix)| {
                toks.iter().any(|t| {
                    if *prefix {
                        t.starts_with(w.as_str())
                    } else {
                        t == w
                    }
                })
            })
        })
        .filter(|r| eq(&query.from, &r.from) && eq(&query.to, &r.to) && eq(&query.task, &r.task))
        .filter(|r| eq(&query.kind, &r.kind))
        .filter(|r| query.channel.is_none_or(|c| c == r.channel))
        .filter(|r| query.since.is_none_or(|s| r.at_ms >= s.unix_ms()))
        .map(|r| (r.channel, r.id))
        .collect()
}
