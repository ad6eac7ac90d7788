//! [`Chipset`]: one open, one handle, every channel.

use std::path::Path;
use std::sync::Arc;

use chipset_bus::{Bus, BusConfig};
use chipset_directory::Directory;
use chipset_hook::Hooks;
use chipset_lease::Leases;
use chipset_loop::{Attention, AttentionConfig, LoopState};
use chipset_mail::{Mail, MailConfig};
use chipset_nudge::{KindRegistry, NudgeConfig, Nudges, ReminderConfig, Reminders};
use chipset_pool::Pool;
use chipset_search::{Hit, Query, SearchIndex};
use chipset_store::{StateDir, StateOptions};

use crate::error::Result;

/// The handle a program keeps: every channel over one state root.
///
/// Cheap to clone (one [`Arc`]) and `Send + Sync`: share it between
/// threads and tasks. Each accessor borrows a channel handle that is
/// itself cheap to clone, for code that wants to own one.
///
/// ```
/// let tmp = tempfile::tempdir()?;
/// let chipset = chipset::Chipset::open(tmp.path().join("state"))?;
/// let agent = "polecat-alpha".parse()?;
/// assert!(chipset.attention().brief(&agent)?.is_empty());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct Chipset {
    inner: Arc<Inner>,
}

/// How each channel behaves, for [`Chipset::with_config`]. The default is
/// what [`Chipset::open`] uses: every channel's default settings and the
/// seed's preset reminder kinds.
///
/// ```
/// let mut config = chipset::Config::default();
/// config.mail.max_body = 4096;
/// let tmp = tempfile::tempdir()?;
/// let state = chipset::store::StateDir::open(tmp.path())?;
/// let chipset = chipset::Chipset::with_config(state, config);
/// assert_eq!(chipset.mail().config().max_body, 4096);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Config {
    /// The nudges' settings.
    pub nudges: NudgeConfig,
    /// The reminders' settings.
    pub reminders: ReminderConfig,
    /// The reminder kinds that may be opened.
    pub kinds: KindRegistry,
    /// The mail's settings (body limit, recipient registry).
    pub mail: MailConfig,
    /// The bus's settings (wake-ups, nagging, retention).
    pub bus: BusConfig,
    /// How attention watches.
    pub attention: AttentionConfig,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            nudges: NudgeConfig::default(),
            reminders: ReminderConfig::default(),
            kinds: KindRegistry::preset(),
            mail: MailConfig::default(),
            bus: BusConfig::default(),
            attention: AttentionConfig::default(),
        }
    }
}

#[derive(Debug)]
struct Inner {
    state: StateDir,
    hooks: Hooks,
    nudges: Nudges,
    reminders: Reminders,
    mail: Mail,
    bus: Bus,
    attention: Attention,
    directory: Directory,
    leases: Leases,
    pool: Pool,
    search: SearchIndex,
}

impl Chipset {
    /// Opens the state root at `root` (creating it if needed) with the
    /// default options: the system clock.
    ///
    /// # Errors
    ///
    /// [`Error::Store`](crate::Error::Store) when the root cannot be created
    /// or resolved.
    pub fn open(root: impl AsRef<Path>) -> Result<Self> {
        Ok(Self::from_state(StateDir::open(root)?))
    }

    /// Opens the state root at `root` with `options` (say, a manual clock
    /// for a simulation).
    ///
    /// # Errors
    ///
    /// As [`Chipset::open`].
    pub fn open_with(root: impl AsRef<Path>, options: StateOptions) -> Result<Self> {
        Ok(Self::from_state(StateDir::open_with(root, options)?))
    }

    /// Returns every channel over a state root already open, each with its
    /// default settings and the seed's preset reminder kinds.
    pub fn from_state(state: StateDir) -> Self {
        Self::with_config(state, Config::default())
    }

    /// Returns every channel over a state root already open, set up as
    /// `config` says.
    pub fn with_config(state: StateDir, config: Config) -> Self {
        let hooks = Hooks::new(state.clone());
        let nudges = Nudges::with_config(state.clone(), config.nudges);
        let reminders = Reminders::with_config(state.clone(), config.kinds, config.reminders);
        let mail = Mail::with_config(state.clone(), config.mail);
        let bus = Bus::with_config(state.clone(), config.bus);
        let attention = Attention::new(
            hooks.clone(),
            nudges.clone(),
            mail.clone(),
            bus.clone(),
            reminders.clone(),
        )
        .with_config(config.attention);
        let directory = Directory::new(state.clone());
        let leases = Leases::new(state.clone());
        let pool = Pool::new(state.clone());
        let search = SearchIndex::new(state.clone());
        Chipset {
            inner: Arc::new(Inner {
                state,
                hooks,
                nudges,
                reminders,
                mail,
                bus,
                attention,
                directory,
                leases,
                pool,
                search,
            }),
        }
    }

    /// Returns the state root every channel shares.
    pub fn state(&self) -> &StateDir {
        &self.inner.state
    }

    /// Returns the hooks: one work item per agent.
    pub fn hooks(&self) -> &Hooks {
        &self.inner.hooks
    }

    /// Returns the nudges: the latest urgent signal per agent.
    pub fn nudges(&self) -> &Nudges {
        &self.inner.nudges
    }

    /// Returns the reminders for open obligations, with the preset kinds.
    pub fn reminders(&self) -> &Reminders {
        &self.inner.reminders
    }

    /// Returns the mail: addressed, threaded messages.
    pub fn mail(&self) -> &Mail {
        &self.inner.mail
    }

    /// Returns the bus: prioritised event queues.
    pub fn bus(&self) -> &Bus {
        &self.inner.bus
    }

    /// Returns attention: what needs an agent now across every channel,
    /// and the waits for it.
    pub fn attention(&self) -> &Attention {
        &self.inner.attention
    }

    /// Returns the agent directory: profiles, roles and last seen.
    pub fn directory(&self) -> &Directory {
        &self.inner.directory
    }

    /// Returns the path leases: who may edit which files, and the check a
    /// pre-commit hook runs.
    pub fn leases(&self) -> &Leases {
        &self.inner.leases
    }

    /// Returns the work pool: items agents claim themselves onto their hook.
    pub fn pool(&self) -> &Pool {
        &self.inner.pool
    }

    /// Returns the hits for `query` across mail, bus events, hook titles and
    /// reminders, best first, after catching the search index up with the
    /// files (see [`crate::search`]).
    ///
    /// ```
    /// let tmp = tempfile::tempdir()?;
    /// let chipset = chipset::Chipset::open(tmp.path().join("state"))?;
    /// chipset.hooks().assign(&"polecat".parse()?, "bead-1".parse()?, "Fix the flaky parser test", None)?;
    /// let hits = chipset.search(&chipset::search::Query::new("flaky parser"))?;
    /// assert_eq!(hits[0].id, "polecat");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`SearchIndex::search`]: a query with no words, too long or with
    /// too many words is refused before anything is read.
    pub fn search(&self, query: &Query) -> chipset_search::Result<Vec<Hit>> {
        self.inner.search.search(query)
    }

    /// Returns the search index itself: to catch it up or rebuild it.
    pub fn search_index(&self) -> &SearchIndex {
        &self.inner.search
    }

    /// Returns the loops' persisted state (for counts and the doctor).
    pub fn loop_state(&self) -> LoopState {
        LoopState::new(self.inner.state.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_handle_is_send_sync_and_cheap_to_clone() {
        fn shared<T: Send + Sync + Clone + 'static>() {}
        shared::<Chipset>();
        let tmp = tempfile::tempdir().unwrap();
        let a = Chipset::open(tmp.path()).unwrap();
        let b = a.clone();
        assert!(Arc::ptr_eq(&a.inner, &b.inner));
        assert_eq!(a.state().root(), b.hooks().state().root());
    }
}
