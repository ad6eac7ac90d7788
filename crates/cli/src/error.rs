//! Failures and their exit codes: 2 for invalid arguments or ids, 3 when the
//! outcome is unknown (the change may have been made), 1 for a refused
//! operation or any other failure. The libraries' typed errors are sorted
//! here; their messages are printed as they are.

use std::error::Error as StdError;
use std::fmt;
use std::process::ExitCode;

/// Why a command failed, and how it exits.
#[derive(Debug)]
pub(crate) struct CliError {
    code: u8,
    message: String,
}

/// The exit status of a failure whose outcome is unknown.
pub(crate) const OUTCOME_UNKNOWN: u8 = 3;

impl CliError {
    /// Returns a usage error (exit 2): an argument the command cannot take.
    pub(crate) fn usage(message: impl Into<String>) -> Self {
        CliError {
            code: 2,
            message: message.into(),
        }
    }

    /// Returns a refusal or other failure (exit 1).
    pub(crate) fn refused(message: impl Into<String>) -> Self {
        CliError {
            code: 1,
            message: message.into(),
        }
    }

    /// Returns the exit code: 2 for usage errors, 3 for an unknown outcome, 1 otherwise.
    pub(crate) fn exit_code(&self) -> ExitCode {
        ExitCode::from(self.code)
    }

    fn from_error(usage: bool, error: &dyn StdError) -> Self {
        CliError {
            code: if usage { 2 } else { 1 },
            message: chain(error),
        }
    }

    /// Returns `self` with exit status 3 when `unknown`: the change may have been made.
    fn unknown_if(mut self, unknown: bool) -> Self {
        if unknown {
            self.code = OUTCOME_UNKNOWN;
        }
        self
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // One line, whatever the message holds.
        let mut first = true;
        for line in self.message.lines().filter(|l| !l.trim().is_empty()) {
            if !first {
                f.write_str(" ")?;
            }
            f.write_str(line.trim())?;
            first = false;
        }
        Ok(())
    }
}

/// Returns the error and its sources joined by `: ` (the libraries never
/// repeat a source in their own message).
fn chain(error: &dyn StdError) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(s) = source {
        let next = s.to_string();
        if !text.ends_with(&next) {
            text.push_str(": ");
            text.push_str(&next);
        }
        source = s.source();
    }
    text
}

fn store_is_usage(e: &chipset_store::Error) -> bool {
    matches!(
        e,
        chipset_store::Error::InvalidId { .. } | chipset_store::Error::InvalidTimestamp { .. }
    )
}

impl From<chipset_store::Error> for CliError {
    fn from(e: chipset_store::Error) -> Self {
        CliError::from_error(store_is_usage(&e), &e).unknown_if(e.is_outcome_unknown())
    }
}

impl From<chipset_hook::Error> for CliError {
    fn from(e: chipset_hook::Error) -> Self {
        let usage = matches!(&e, chipset_hook::Error::Store(s) if store_is_usage(s));
        let unknown = matches!(&e, chipset_hook::Error::Store(s) if s.is_outcome_unknown());
        CliError::from_error(usage, &e).unknown_if(unknown)
    }
}

impl From<chipset_nudge::Error> for CliError {
    fn from(e: chipset_nudge::Error) -> Self {
        use chipset_nudge::Error as E;
        let usage = match &e {
            E::Store(s) => store_is_usage(s),
            E::UnknownKind { .. }
            | E::SourceTypeMismatch { .. }
            | E::BlockingSeverity
            | E::EmptySourceId
            | E::InvalidField { .. }
            | E::NotAResolvingVerb { .. } => true,
            _ => false,
        };
        CliError::from_error(usage, &e).unknown_if(e.is_outcome_unknown())
    }
}

impl From<chipset_mail::MailError> for CliError {
    fn from(e: chipset_mail::MailError) -> Self {
        use chipset_mail::MailError as E;
        let usage = match &e {
            E::Store(s) => store_is_usage(s),
            E::InvalidSubject { .. }
            | E::InvalidAgentName { .. }
            | E::RoundTooLarge { .. }
            | E::BodyTooLarge { .. }
            | E::MessageTooLarge { .. }
            | E::UnknownRecipient { .. } => true,
            _ => false,
        };
        CliError::from_error(usage, &e).unknown_if(e.is_outcome_unknown())
    }
}

impl From<chipset_bus::Error> for CliError {
    fn from(e: chipset_bus::Error) -> Self {
        use chipset_bus::Error as E;
        let usage = match &e {
            E::Store(s) => store_is_usage(s),
            E::InvalidField { .. } => true,
            _ => false,
        };
        CliError::from_error(usage, &e).unknown_if(e.is_outcome_unknown())
    }
}

impl From<chipset_loop::Error> for CliError {
    fn from(e: chipset_loop::Error) -> Self {
        let usage = matches!(&e, chipset_loop::Error::Store(s) if store_is_usage(s));
        let unknown = matches!(&e, chipset_loop::Error::Store(s) if s.is_outcome_unknown());
        CliError::from_error(usage, &e).unknown_if(unknown)
    }
}

/// A specialized result for commands.
pub(crate) type Result<T, E = CliError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_ids_are_usage_errors_and_refusals_are_not() {
        let bad = chipset_store::AgentId::new("a/b").unwrap_err();
        assert_eq!(CliError::from(bad).exit_code(), ExitCode::from(2));
        let missing = chipset_nudge::Error::ReminderNotFound { id: "x".into() };
        let e = CliError::from(missing);
        assert_eq!(e.exit_code(), ExitCode::from(1));
        assert_eq!(e.to_string(), "no reminder with id `x`");
        let unknown = chipset_store::Error::OutcomeUnknown {
            op: "sync directory",
            path: "/q/1-x.json".into(),
            source: std::io::Error::from_raw_os_error(5),
        };
        let e = CliError::from(unknown);
        assert_eq!(e.exit_code(), ExitCode::from(OUTCOME_UNKNOWN));
        assert!(e.to_string().contains("/q/1-x.json"), "{e}");
    }

    #[test]
    fn messages_are_one_line_with_their_sources() {
        let io = std::io::Error::new(std::io::ErrorKind::PermissionDenied, "denied");
        let e = chipset_store::Error::Io {
            op: "open",
            path: "/x".into(),
            source: io,
        };
        assert_eq!(CliError::from(e).to_string(), "failed to open `/x`: denied");
        assert_eq!(
            CliError::usage("a\n  b\n\nc").to_string(),
            "a b c",
            "lines are joined"
        );
    }
}
