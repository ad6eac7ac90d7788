//! Failures and their exit codes: 2 for invalid arguments or ids, 3 when the
//! outcome is unknown (the change may have been made), 1 for a refused
//! operation or any other failure. The libraries' typed errors are sorted
//! by [`chipset_failure`], which the MCP server shares,
//! so both say the same thing; their messages are printed as they are.

/// Why a command failed, and how it exits.
pub(crate) use chipset_failure::Failure as CliError;

/// A specialized result for commands.
pub(crate) type Result<T, E = CliError> = std::result::Result<T, E>;
