//! The pure application of control commands to a registry.

use crate::format::{ControlLine, ControlOp, Registry};

/// Applies `lines` (read from the registry's offset on) to `registry` and
/// moves its offset to `end_offset`.
///
/// The registry is a set: registering a registered resource and
/// unregistering an absent one change nothing, so applying a suffix of the
/// log a second time gives the same registry.
pub(crate) fn apply(mut registry: Registry, lines: &[ControlLine], end_offset: u64) -> Registry {
    for line in lines {
        let resource = &line.command.resource;
        match line.command.op {
            ControlOp::Register => {
                registry
                    .resources
                    .entry(resource.clone())
                    .or_insert(line.at);
            }
            ControlOp::Unregister => {
                registry.resources.remove(resource);
            }
        }
    }
    registry.applied_offset = registry.applied_offset.max(end_offset);
    registry
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{ControlCommand, Resource};
    use chipset_store::Timestamp;

    fn line(op: ControlOp, target: &str, at: i64) -> ControlLine {
        ControlLine {
            at: Timestamp::from_unix_ms(at),
            command: ControlCommand {
                op,
                resource: Resource::new("chat", target),
            },
        }
    }

    fn targets(r: &Registry) -> Vec<&str> {
        r.resources.keys().map(|r| r.target.as_str()).collect()
    }

    #[test]
    fn registry_is_a_sorted_set() {
        let lines = [
            line(ControlOp::Register, "b", 1),
            line(ControlOp::Register, "a", 2),
            line(ControlOp::Register, "b", 3),
            line(ControlOp::Unregister, "c", 4),
        ];
        let r = apply(Registry::default(), &lines, 40);
        assert_eq!(targets(&r), ["a", "b"]);
        let b = Resource::new("chat", "b");
        assert_eq!(r.resources[&b], Timestamp::from_unix_ms(1));
        assert_eq!(r.applied_offset, 40);
    }

    #[test]
    fn applying_a_suffix_again_changes_nothing() {
        let lines = [
            line(ControlOp::Register, "a", 1),
            line(ControlOp::Register, "b", 2),
            line(ControlOp::Unregister, "a", 3),
            line(ControlOp::Register, "c", 4),
            line(ControlOp::Unregister, "c", 5),
        ];
        let once = apply(Registry::default(), &lines, 50);
        for start in 0..lines.len() {
            let again = apply(once.clone(), &lines[start..], 50);
            assert_eq!(again, once, "replaying from line {start}");
        }
        assert_eq!(targets(&once), ["b"]);
    }
}
