//! The bus's part of a migration: each agent's folder as values, its
//! control log, its registry (whose position in the log is counted in
//! bytes on a directory and in records on a server) and its queue.

use std::sync::Arc;

use chipset_backend::Dir;
use chipset_bus::{Bus, BusConfig};
use chipset_store::AgentId;

use super::MigrateError;
use super::plan::{Item, push_log, walk};
use super::side::Side;

const AVAILABLE: &str = "available.json";
const REGISTRY: &str = "registry.json";
const CONTROL: &str = "control.jsonl";

/// Reads the bus on `side` into `items`.
pub(crate) fn read(side: &Side, bus: &Dir, items: &mut Vec<Item>) -> Result<(), MigrateError> {
    for (name, bytes) in side.values(bus)? {
        let key = bus.key(&name).map_err(|e| side.err(e))?;
        items.push(Item::Value { key, bytes });
    }
    for folder in side.dirs(bus)? {
        let dir = bus.join(&folder).map_err(|e| side.err(e))?;
        let agent: AgentId = folder.parse().map_err(|_| MigrateError::Corrupt {
            key: dir.to_string(),
            why: format!("`{folder}` is not a valid agent id"),
        })?;
        let control = dir.key(CONTROL).map_err(|e| side.err(e))?;
        let records = side.log(&control)?;
        let mut registry = None;
        for (name, bytes) in side.values(&dir)? {
            let key = dir.key(&name).map_err(|e| side.err(e))?;
            match name.as_str() {
                AVAILABLE if side.is_server() => items.push(Item::Queue {
                    agent: agent.clone(),
                }),
                REGISTRY => registry = Some((key, bytes)),
                _ => items.push(Item::Value { key, bytes }),
            }
        }
        if let Some((key, bytes)) = registry {
            let ends: Vec<u64> = records
                .iter()
                .scan(0u64, |end, r| {
                    *end += r.len() as u64 + 1;
                    Some(*end)
                })
                .collect();
            let offset = serde_json::from_slice::<serde_json::Value>(&bytes)
                .ok()
                .and_then(|v| v.get("applied_offset").and_then(serde_json::Value::as_u64))
                .ok_or_else(|| MigrateError::Corrupt {
                    key: key.to_string(),
                    why: "no `applied_offset` in a bus registry".into(),
                })?;
            let applied = if side.is_server() {
                offset
            } else {
                ends.iter().take_while(|&&e| e <= offset).count() as u64
            };
            items.push(Item::Registry {
                key,
                bytes,
                from_server: side.is_server(),
                applied,
                ends,
            });
        }
        for sub in side.dirs(&dir)? {
            if sub == "queue" && !side.is_server() {
                items.push(Item::Queue {
                    agent: agent.clone(),
                });
            }
            walk(side, &dir.join(&sub).map_err(|e| side.err(e))?, items)?;
        }
        for name in side.log_names(&dir)? {
            if name != CONTROL {
                let key = dir.key(&name).map_err(|e| side.err(e))?;
                push_log(side, key, items)?;
            }
        }
        if !records.is_empty() {
            items.push(Item::Log {
                key: control,
                records,
            });
        }
    }
    Ok(())
}

/// Makes `agent`'s queue exist on the target, as the bus does.
pub(crate) fn ensure_queue(target: &Side, agent: &AgentId) -> Result<(), MigrateError> {
    let bus = if target.is_server() {
        Bus::with_backend(
            target.state.clone(),
            BusConfig::default(),
            Arc::clone(&target.backend),
        )
    } else {
        Bus::new(target.state.clone())
    };
    bus.ensure_queue(agent).map(drop).map_err(MigrateError::Bus)
}
