//! The closed set of reminder kinds an application registers.

use std::collections::BTreeMap;

use crate::error::{Error, Result};
use crate::format::Severity;
use crate::key::{check_name, check_text};

/// The seed's six kinds (§4.1), as registered by [`KindRegistry::preset`].
pub(crate) mod preset {
    /// `wrap_session` (source type `session`): resolved by `prism_wrap`.
    pub(crate) const WRAP_SESSION: &str = "wrap_session";
    /// `spec_draft` (source type `spec`): resolved by `prism_spec.update`.
    pub(crate) const SPEC_DRAFT: &str = "spec_draft";
    /// `adr_proposed` (source type `adr`): resolved by `prism_decide.update`.
    pub(crate) const ADR_PROPOSED: &str = "adr_proposed";
    /// `wip_unsealed` (source type `wip_state`): resolved by `prism_seal`.
    pub(crate) const WIP_UNSEALED: &str = "wip_unsealed";
    /// `invite_pending` (source type `invite`): resolved by
    /// `prism_accept_invite`, `prism_invite.decline` or `prism_invite.expire`.
    pub(crate) const INVITE_PENDING: &str = "invite_pending";
    /// `handoff_pending` (source type `handoff`): manual resolution only.
    pub(crate) const HANDOFF_PENDING: &str = "handoff_pending";
}

/// One kind: its canonical source type, the verbs that auto-resolve it, and
/// the actions offered when a writer gives none: plain data, started with
/// [`KindSpec::new`] and its fields set directly; [`KindRegistry::register`]
/// checks them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KindSpec {
    /// The kind's name.
    pub name: String,
    /// Its canonical source type.
    pub source_type: String,
    /// The verbs that auto-resolve it.
    pub resolving_verbs: Vec<String>,
    /// The actions offered when a writer gives none.
    pub default_actions: Vec<String>,
}

impl KindSpec {
    /// Returns a kind named `name` about `source_type`, with no resolving
    /// verb (manual resolution only) and no default actions. Names are
    /// checked when registered.
    pub fn new(name: impl Into<String>, source_type: impl Into<String>) -> Self {
        KindSpec {
            name: name.into(),
            source_type: source_type.into(),
            resolving_verbs: Vec::new(),
            default_actions: Vec::new(),
        }
    }

    /// Returns true when `verb` auto-resolves this kind.
    pub(crate) fn is_resolved_by(&self, verb: &str) -> bool {
        self.resolving_verbs.iter().any(|v| v == verb)
    }
}

/// The kinds an application allows. Writers cannot invent kinds: opening a
/// reminder of an unregistered kind is refused. Start from the seed's
/// kinds ([`KindRegistry::preset`]) or from none (`KindRegistry::default()`)
/// and [`register`](KindRegistry::register) more.
///
/// ```
/// use chipset_nudge::{KindRegistry, KindSpec};
/// let mut kinds = KindRegistry::preset();
/// kinds.register(KindSpec {
///     resolving_verbs: vec!["review.close".to_owned()],
///     ..KindSpec::new("review_pending", "review")
/// })?;
/// assert_eq!(kinds.get("wrap_session").unwrap().resolving_verbs, ["prism_wrap"]);
/// assert_eq!(kinds.kinds().count(), 7);
/// # Ok::<(), chipset_nudge::Error>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KindRegistry {
    kinds: BTreeMap<String, KindSpec>,
}

impl KindRegistry {
    /// Returns the seed's six kinds (§4.1) with their source types, resolving
    /// verbs and actions.
    pub fn preset() -> Self {
        let spec = |name: &str, source_type: &str, verbs: &[&str], actions: &[&str]| KindSpec {
            resolving_verbs: verbs.iter().map(|&v| v.to_owned()).collect(),
            default_actions: actions.iter().map(|&a| a.to_owned()).collect(),
            ..KindSpec::new(name, source_type)
        };
        let std_actions = |first| [first, "ignore", "snooze"];
        let specs = [
            spec(
                preset::WRAP_SESSION,
                "session",
                &["prism_wrap"],
                &["wrap", "continue", "ignore", "snooze"],
            ),
            spec(
                preset::SPEC_DRAFT,
                "spec",
                &["prism_spec.update"],
                &std_actions("update"),
            ),
            spec(
                preset::ADR_PROPOSED,
                "adr",
                &["prism_decide.update"],
                &std_actions("decide"),
            ),
            spec(
                preset::WIP_UNSEALED,
                "wip_state",
                &["prism_seal"],
                &std_actions("seal"),
            ),
            spec(
                preset::INVITE_PENDING,
                "invite",
                &[
                    "prism_accept_invite",
                    "prism_invite.decline",
                    "prism_invite.expire",
                ],
                &std_actions("follow_up"),
            ),
            spec(
                preset::HANDOFF_PENDING,
                "handoff",
                &[],
                &std_actions("acknowledge"),
            ),
        ];
        let mut registry = KindRegistry::default();
        for spec in specs {
            registry
                .register(spec)
                .expect("the preset kinds are valid and distinct");
        }
        registry
    }

    /// Adds a kind.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidField`] when the name or source type is not 1 to 32
    /// of `a-z`, `0-9`, `_`, or a verb or action is empty, longer than 64
    /// bytes or has control characters; [`Error::DuplicateKind`] when the
    /// name is taken.
    pub fn register(&mut self, spec: KindSpec) -> Result<()> {
        check_name("reminder kind", &spec.name)?;
        check_name("source type", &spec.source_type)?;
        for verb in &spec.resolving_verbs {
            check_text("resolving verb", verb, 64)?;
        }
        for action in &spec.default_actions {
            check_text("action", action, 64)?;
        }
        if self.kinds.contains_key(&spec.name) {
            return Err(Error::DuplicateKind { kind: spec.name });
        }
        self.kinds.insert(spec.name.clone(), spec);
        Ok(())
    }

    /// Returns the kind named `kind`.
    pub fn get(&self, kind: &str) -> Option<&KindSpec> {
        self.kinds.get(kind)
    }

    /// Returns every kind, by name.
    pub fn kinds(&self) -> impl Iterator<Item = &KindSpec> {
        self.kinds.values()
    }

    /// Returns the kind, checking that it is registered and takes `source_type`.
    pub(crate) fn check(&self, kind: &str, source_type: &str) -> Result<&KindSpec> {
        let spec = self.get(kind).ok_or_else(|| Error::UnknownKind {
            kind: kind.to_owned(),
        })?;
        if spec.source_type != source_type {
            return Err(Error::SourceTypeMismatch {
                kind: kind.to_owned(),
                expected: spec.source_type.clone(),
                found: source_type.to_owned(),
            });
        }
        Ok(spec)
    }
}

/// Checks a writer's severity: `blocking` is refused.
pub(crate) fn check_severity(severity: Severity) -> Result<()> {
    match severity {
        Severity::Blocking => Err(Error::BlockingSeverity),
        Severity::Info | Severity::Nudge => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preset_has_the_seed_kinds() {
        let r = KindRegistry::preset();
        let names: Vec<_> = r
            .kinds()
            .map(|k| (k.name.as_str(), k.source_type.as_str()))
            .collect();
        assert_eq!(
            names,
            [
                ("adr_proposed", "adr"),
                ("handoff_pending", "handoff"),
                ("invite_pending", "invite"),
                ("spec_draft", "spec"),
                ("wip_unsealed", "wip_state"),
                ("wrap_session", "session"),
            ]
        );
        assert!(r.get("handoff_pending").unwrap().resolving_verbs.is_empty());
    }

    #[test]
    fn a_new_registry_is_empty_until_a_kind_is_registered() {
        let mut r = KindRegistry::default();
        assert_eq!(r.kinds().count(), 0);
        r.register(KindSpec::new("ok", "x")).unwrap();
        assert_eq!(r.kinds().count(), 1);
        assert_eq!(KindRegistry::preset().kinds().count(), 6);
    }

    #[test]
    fn bad_specs_are_refused() {
        let mut r = KindRegistry::preset();
        assert!(matches!(
            r.register(KindSpec::new("wrap_session", "session")),
            Err(Error::DuplicateKind { .. })
        ));
        assert!(matches!(
            r.register(KindSpec::new("Bad-Kind", "x")),
            Err(Error::InvalidField {
                field: "reminder kind",
                ..
            })
        ));
        assert!(matches!(
            r.register(KindSpec {
                resolving_verbs: vec![String::new()],
                ..KindSpec::new("ok", "x")
            }),
            Err(Error::InvalidField {
                field: "resolving verb",
                ..
            })
        ));
    }

    #[test]
    fn check_refuses_unknown_kind_and_wrong_source_type() {
        let r = KindRegistry::preset();
        assert!(matches!(
            r.check("nope", "session"),
            Err(Error::UnknownKind { .. })
        ));
        assert!(matches!(
            r.check("wrap_session", "spec"),
            Err(Error::SourceTypeMismatch { .. })
        ));
        assert!(r.check("wrap_session", "session").is_ok());
        assert!(matches!(
            check_severity(Severity::Blocking),
            Err(Error::BlockingSeverity)
        ));
    }
}
