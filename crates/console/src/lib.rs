//! The operator's live view of a chipset team: one model of who works on
//! what, drawn in the terminal (`chipset top`) and served as a read-only
//! web dashboard (`chipset serve`).
//!
//! ```
//! use chipset_console::{Screen, Snapshot, View};
//!
//! let tmp = tempfile::tempdir()?;
//! let chipset = chipset::Chipset::open(tmp.path())?;
//! let agent = "polecat-alpha".parse()?;
//! chipset.hooks().assign(&agent, "bd-1".parse()?, "Fix the parser", None)?;
//! let snapshot = Snapshot::load(&chipset)?;
//! let agents = snapshot.table(View::Agents);
//! assert_eq!(agents.rows[0].cells[..3], ["polecat-alpha", "pending", "bd-1"]);
//!
//! // Draw it anywhere ratatui draws: here into a test backend.
//! let mut terminal = ratatui::Terminal::new(ratatui::backend::TestBackend::new(100, 20))?;
//! terminal.draw(|f| chipset_console::draw(f, &Screen::default(), &snapshot))?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # The model
//!
//! [`Snapshot::load`] reads every [`View`] once through the front door
//! ([`chipset::Chipset::status`], the agent directory, the commit gate of
//! each task with an open request, the open reminders, the live leases)
//! into a [`Table`] of text cells per view, with a [`Mark`] per row (a
//! stalled agent, a corrupt file, a critical event) and a problem line for
//! everything that could not be read: nothing unreadable is dropped in
//! silence, and a task whose gate cannot be read says that its gate is
//! closed. [`detail`] reads what is behind one row (an agent's hook, inbox
//! and queue; a request's thread; a reminder) when it is selected.
//!
//! # The screen
//!
//! [`Screen`] is where the operator is (view, selection, `/` search, detail)
//! and [`Screen::press`] how a [`Key`] moves it; [`draw`] draws both into a
//! ratatui frame. Neither touches the terminal: the command line owns it.
//!
//! # Live
//!
//! [`watch`] runs the store's watcher over the whole root on a thread of
//! its own and calls back on a change (notifications) or at each rescan
//! (the safety net, [`DEFAULT_RESCAN`]): nothing polls faster than that,
//! and an idle team costs one read of the state per rescan.
//!
//! # The dashboard
//!
//! [`serve`] serves the same views as HTML (no script but the few inline
//! lines that take server-sent events), read-only, pushed again on every
//! change. The address rule is the MCP HTTP server's: loopback without a
//! token, any other address only with one.

#![forbid(unsafe_code)]

mod detail;
mod error;
mod html;
mod live;
mod model;
mod render;
mod requests;
mod screen;
mod serve;

pub use detail::{Detail, detail};
pub use error::{Error, Result};
pub use html::page;
pub use live::{Change, DEFAULT_RESCAN, watch};
pub use model::{Loader, Mark, Row, STALL_AFTER, Snapshot, Table, View, short_age};
pub use render::{draw, text};
pub use screen::{Effect, Key, Screen};
pub use serve::{ServeOptions, run, serve};
