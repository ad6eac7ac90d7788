//! Every pair of the facade's channel modules glob-imports together, and the
//! names that used to collide across crates (`NewMessage`, `Priority`, `Event`,
//! `Wake`, `Finding`; issue 13) are then used without renames.
//! A name that two modules export again makes its uses ambiguous, and this
//! file stops compiling.
//!
//! `Error` and `Result` are left out on purpose: each crate keeps its own,
//! named through the module (`bus::Error`), as `std::io` and `std::fmt` do.

/// Uses, by its bare name, every formerly colliding name one module exports,
/// and checks one fact about each.
macro_rules! uses {
    (store) => {{
        assert_ne!(WatchWake::Rescan, WatchWake::TimedOut);
    }};
    (hook) => {{
        let agent = chipset::store::AgentId::new("polecat-alpha").unwrap();
        let bead = BeadId::new("gt-abc12").unwrap();
        assert_eq!(bead.as_str(), "gt-abc12");
        let hook = chipset::hook::Hook::missing(agent);
        assert_eq!(hook.state.status(), chipset::hook::HookStatus::Empty);
    }};
    (nudge) => {{
        let from = chipset::store::AgentId::new("witness").unwrap();
        let nudge = NewNudge::new(from, chipset::nudge::NudgeType::HealthCheck, "working?")
            .requiring_response();
        assert!(nudge.requires_response);
        assert_eq!(Reminders::CHANNEL.as_str(), "reminders");
    }};
    (mail) => {{
        let id = |name| chipset::store::AgentId::new(name).unwrap();
        let draft = NewMessage::notify(
            id("polecat-alpha"),
            id("mayor"),
            chipset::store::TaskId::new("gt-abc12").unwrap(),
            "completion-report",
            "done",
        )
        .with_priority(MailPriority::Urgent);
        assert!(format!("{draft:?}").contains("Urgent"));
        assert_eq!(MessageId::new("1-x").unwrap().as_str(), "1-x");
    }};
    (bus) => {{
        let new = NewEvent::new("polecat-alpha", "work-completed").with_priority(Priority::High);
        assert!(format!("{new:?}").contains("High"));
        let kinds = |events: &[Event]| events.iter().map(|e| e.kind.to_owned()).collect::<Vec<_>>();
        assert!(kinds(&[]).is_empty());
        assert!(Option::<Waiter>::None.is_none());
        assert_eq!(Bus::CHANNEL.as_str(), "bus");
    }};
    (r#loop) => {{
        let finding = CriticFinding {
            category: "style".into(),
            detail: "long line".into(),
        };
        assert_eq!(finding.category, "style");
    }};
}

/// A test module that glob-imports two channel modules and uses both.
macro_rules! pair {
    ($test:ident: $a:tt + $b:tt) => {
        mod $test {
            #[allow(clippy::wildcard_imports)]
            use chipset::$a::*;
            #[allow(clippy::wildcard_imports)]
            use chipset::$b::*;

            #[test]
            fn glob_imports_together_without_renames() {
                uses!($a);
                uses!($b);
            }
        }
    };
}

pair!(store_hook: store + hook);
pair!(store_nudge: store + nudge);
pair!(store_mail: store + mail);
pair!(store_bus: store + bus);
pair!(store_loop: store + r#loop);
pair!(hook_nudge: hook + nudge);
pair!(hook_mail: hook + mail);
pair!(hook_bus: hook + bus);
pair!(hook_loop: hook + r#loop);
pair!(nudge_mail: nudge + mail);
pair!(nudge_bus: nudge + bus);
pair!(nudge_loop: nudge + r#loop);
pair!(mail_bus: mail + bus);
pair!(mail_loop: mail + r#loop);
pair!(bus_loop: bus + r#loop);

/// All six at once, as a program that drives every channel would write it.
mod all_six {
    #[allow(clippy::wildcard_imports)]
    use chipset::{bus::*, hook::*, r#loop::*, mail::*, nudge::*, store::*};

    #[test]
    fn glob_imports_together_without_renames() {
        uses!(store);
        uses!(hook);
        uses!(nudge);
        uses!(mail);
        uses!(bus);
        uses!(r#loop);
    }
}
