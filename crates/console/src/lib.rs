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
//! [`Snapshot::load`] reads every [`View`] once through the front door's
//! channels (hooks, nudges, inbox counts, bus queues, the agent directory,
//! the commit gate of each task with an open request, the open reminders,
//! the leases, the work pool) into a [`Table`] of text cells per view, with
//! a [`Mark`] per row (a stalled agent, a corrupt file, a critical event)
//! and a problem line for everything that could not be read: nothing
//! unreadable is dropped in silence, and a task whose gate cannot be read
//! says that its gate is closed. [`detail`] reads what is behind one row
//! (an agent's hook, inbox and queue; a request's thread; a reminder; a
//! work item's body) when it is selected.
//!
//! A [`Loader`] kept between loads rereads only what changed: it stamps
//! every directory under the root (and the two logs appended in place) and
//! rereads an area (hooks, nudges, each inbox, the bus, reminders, the
//! directory, leases, the pool) only when a stamp under it moved or is too
//! young to trust. A load of an idle root is one `stat` per directory and
//! no file read; the tables are rebuilt from what is kept, so the ages
//! still move with the clock.
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
//! and an idle team costs one look at the directory stamps per rescan.
//! [`watch_team`] is the same for the state a [`Chipset`](chipset::Chipset)
//! is on: on a PostgreSQL server it waits for the server's notifications
//! (`LISTEN/NOTIFY`) of the team's folders, and a load there reads every
//! area again (rows have no directory stamps).
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
mod pool;
mod reads;
mod render;
mod requests;
mod screen;
mod serve;
mod stamps;

pub use detail::{Detail, detail};
pub use error::{Error, Result};
pub use html::page;
pub use live::{Change, DEFAULT_RESCAN, watch, watch_team};
pub use model::{Loader, Mark, Row, STALL_AFTER, Snapshot, Table, View, short_age};
pub use render::{draw, text};
pub use screen::{Effect, Key, Screen};
pub use serve::{ServeOptions, run, serve};
