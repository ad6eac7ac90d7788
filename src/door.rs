//! [`Chipset`]: one open, one handle, every channel.

use std::path::Path;
use std::sync::Arc;

use chipset_bus::{Bus, BusConfig};
use chipset_directory::Directory;
use chipset_hook::Hooks;
use chipset_lease::Leases;
use chipset_loop::{Attention, AttentionConfig, Channels, LoopState};
use chipset_mail::{Mail, MailConfig};
use chipset_nudge::{KindRegistry, Nudges, ReminderConfig, Reminders};
use chipset_pool::Pool;
use chipset_search::{Hit, Query, SearchIndex};
use chipset_store::{StateDir, StateOptions};

use crate::error::{Error, Result};
use crate::root::{Root, ServerUrl};
use crate::server::{Server, ServerOptions};

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
    /// A folder of the seed's mail layout to keep mail in instead of
    /// `mail/` under the state root: say a nubos-pilot project's
    /// `.nubos-pilot/messages`, so that chipset and the project's other
    /// programs share one mail store and one commit gate. Every part uses
    /// it: [`Chipset::mail`], attention and the loops, a forced lease
    /// release's notice, the directory's last activity, search, status
    /// and the doctor. `None` (the default): `mail/` under the root. A
    /// directory's setting: [`Chipset::open_server`] keeps mail on the
    /// server.
    ///
    /// ```
    /// use chipset::store::StateDir;
    ///
    /// let project = tempfile::tempdir()?;
    /// let mut config = chipset::Config::default();
    /// config.mail_folder = Some(StateDir::open(project.path().join(".nubos-pilot/messages"))?);
    /// let state = StateDir::open(project.path().join(".chipset/state"))?;
    /// let chipset = chipset::Chipset::with_config(state, config);
    /// let task = "M005-S007-T0002".parse()?;
    /// assert!(chipset.mail().pending_replies(&task)?.is_empty());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub mail_folder: Option<StateDir>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            reminders: ReminderConfig::default(),
            kinds: KindRegistry::preset(),
            mail: MailConfig::default(),
            bus: BusConfig::default(),
            attention: AttentionConfig::default(),
            mail_folder: None,
        }
    }
}

#[derive(Debug)]
struct Inner {
    /// The state root; on a server, the local folder for what is local by
    /// nature (see [`ServerOptions::local`]).
    state: StateDir,
    /// The server, when the state is on one.
    server: Option<Server>,
    hooks: Hooks,
    nudges: Nudges,
    reminders: Reminders,
    mail: Mail,
    bus: Bus,
    attention: Attention,
    /// The loops' channel handles: the door's own, on the same backend.
    channels: Channels,
    /// The loops' persisted records.
    loops: LoopState,
    directory: Directory,
    leases: Leases,
    pool: Pool,
    search: SearchIndex,
}

impl Chipset {
    /// Opens the state at `root` with the default options: a directory
    /// (created if needed, on the system clock), or a PostgreSQL server
    /// when `root` is a `postgres://` or `postgresql://` URL or a libpq
    /// `key=value` string (see [`Root`] and [`Chipset::open_server`]).
    ///
    /// # Errors
    ///
    /// [`Error::Store`](crate::Error::Store) when the root cannot be created
    /// or resolved; for a server, as [`Chipset::open_server`].
    pub fn open(root: impl AsRef<Path>) -> Result<Self> {
        match Root::parse(root) {
            Root::Dir(dir) => Ok(Self::from_state(StateDir::open(dir)?)),
            Root::Server(url) => Self::open_server(&url, &ServerOptions::default()),
        }
    }

    /// Opens the state directory at `root` with the store's `options` (say,
    /// a manual clock for a simulation). `root` is read as
    /// [`Chipset::open`] reads it, and a server is refused: its clock and
    /// limits are the server's, so it takes [`ServerOptions`] through
    /// [`Chipset::open_server`].
    ///
    /// # Errors
    ///
    /// [`Error::ServerRoot`](crate::Error::ServerRoot) when `root` names a
    /// server (nothing is created); [`Error::Store`](crate::Error::Store)
    /// when the directory cannot be created or resolved.
    pub fn open_with(root: impl AsRef<Path>, options: StateOptions) -> Result<Self> {
        match Root::parse(root) {
            Root::Dir(dir) => Ok(Self::from_state(StateDir::open_with(dir, options)?)),
            Root::Server(url) => Err(Error::ServerRoot {
                server: url.to_string(),
            }),
        }
    }

    /// Opens the state on the PostgreSQL server `url` names, completed
    /// from libpq's environment variables (`PGHOST`, `PGPASSWORD`,
    /// `PGPASSFILE` or `~/.pgpass`, `PGSSLMODE`, `PGSSLROOTCERT`, …), and
    /// creates or migrates chipset's tables there.
    ///
    /// Every channel runs on the server: the hooks, the nudges, the
    /// reminders, mail, the bus, the leases, the agent directory and the
    /// pool, and what is built over them (attention, the loops, status,
    /// search, the doctor). What is local by nature (caches, the search
    /// index) lives in [`ServerOptions::local`].
    ///
    /// # Errors
    ///
    /// [`Error::Backend`](crate::Error::Backend): settings that cannot be
    /// used, a server that cannot be reached, a refused login, a schema
    /// newer than this binary; [`Error::Store`](crate::Error::Store) when
    /// the local folder cannot be created;
    /// [`Error::NoServerSupport`](crate::Error::NoServerSupport) in a build
    /// without the `postgres` feature.
    pub fn open_server(url: &ServerUrl, options: &ServerOptions) -> Result<Self> {
        let server = Server::open(url, options)?;
        let state = StateDir::open(server.local_folder(options))?;
        Ok(Self::wire(state, Some(server), Config::default()))
    }

    /// Returns every channel over a state root already open, each with its
    /// default settings and the seed's preset reminder kinds.
    pub fn from_state(state: StateDir) -> Self {
        Self::with_config(state, Config::default())
    }

    /// Returns every channel over a state root already open, set up as
    /// `config` says.
    pub fn with_config(state: StateDir, config: Config) -> Self {
        Self::wire(state, None, config)
    }

    /// Builds every channel, on the directory `state` or on `server`. The
    /// one place that says which channel runs where: every channel takes
    /// the server's backend on a server.
    fn wire(state: StateDir, server: Option<Server>, config: Config) -> Self {
        let seam = server.as_ref().map(Server::backend);
        let hooks = match &seam {
            Some(backend) => Hooks::with_backend(state.clone(), Arc::clone(backend)),
            None => Hooks::new(state.clone()),
        };
        let nudges = match &seam {
            Some(backend) => Nudges::with_backend(state.clone(), Arc::clone(backend)),
            None => Nudges::new(state.clone()),
        };
        let search_kinds = config.kinds.clone();
        let reminders = match &seam {
            Some(backend) => Reminders::with_backend(
                state.clone(),
                config.kinds,
                config.reminders,
                Arc::clone(backend),
            ),
            None => Reminders::with_config(state.clone(), config.kinds, config.reminders),
        };
        let mail = match (&seam, config.mail_folder) {
            (Some(backend), _) => {
                Mail::with_backend(state.clone(), config.mail, Arc::clone(backend))
            }
            (None, Some(folder)) => Mail::in_folder(folder, config.mail),
            (None, None) => Mail::with_config(state.clone(), config.mail),
        };
        let bus = match &seam {
            Some(backend) => Bus::with_backend(state.clone(), config.bus, Arc::clone(backend)),
            None => Bus::with_config(state.clone(), config.bus),
        };
        let channels = match &seam {
            Some(backend) => Channels::with_backend(state.clone(), Arc::clone(backend)),
            None => Channels::new(state.clone()),
        };
        // The door's own mail and bus, so a loop honours `config`: each is
        // on `state` (and on `seam`), or mail in its folder, which the
        // setters check.
        let channels = channels
            .with_mail(mail.clone())
            .and_then(|c| c.with_bus(bus.clone()))
            .expect("the door's handles share one state root");
        let loops = LoopState::new(channels.clone());
        let attention =
            Attention::new(channels.clone(), reminders.clone()).with_config(config.attention);
        let directory = match &seam {
            Some(backend) => Directory::with_backend(state.clone(), Arc::clone(backend)),
            None => Directory::new(state.clone()).with_mail(mail.clone()),
        };
        let leases = match &seam {
            Some(backend) => Leases::with_backend(state.clone(), Arc::clone(backend)),
            None => Leases::new(state.clone()),
        }
        .with_mail(mail.clone());
        let pool = match &seam {
            Some(backend) => Pool::with_backend(state.clone(), Arc::clone(backend)),
            None => Pool::new(state.clone()),
        };
        // The index is a local cache of the channels' records, caught up
        // from their files or the server's rows.
        let search = match &seam {
            Some(backend) => {
                SearchIndex::with_backend(state.clone(), search_kinds, Arc::clone(backend))
            }
            None => SearchIndex::new(state.clone()).with_mail(mail.clone()),
        };
        Chipset {
            inner: Arc::new(Inner {
                state,
                server,
                hooks,
                nudges,
                reminders,
                mail,
                bus,
                attention,
                channels,
                loops,
                directory,
                leases,
                pool,
                search,
            }),
        }
    }

    /// Returns the server the state is on, `None` for a directory.
    pub fn server(&self) -> Option<&ServerUrl> {
        self.inner.server.as_ref().map(Server::url)
    }

    /// Returns the server's storage backend, `None` for a directory: for
    /// a wait on folders across channels (a live view's
    /// [`Backend::watch`](chipset_backend::Backend::watch)), or a tool
    /// that reads the rows as they are. The channels' handles are the way
    /// to change them: a write here skips their rules.
    pub fn backend(&self) -> Option<Arc<dyn chipset_backend::Backend>> {
        self.inner.server.as_ref().map(Server::backend)
    }

    /// Returns the time views judge ages by: the state's clock on a
    /// directory, the server's on a server (so every host agrees).
    ///
    /// # Errors
    ///
    /// [`Error::Backend`] when the server's clock cannot be read.
    pub fn now(&self) -> Result<chipset_store::Timestamp> {
        match &self.inner.server {
            None => Ok(self.inner.state.now()),
            Some(server) => Ok(server.backend().now()?),
        }
    }

    /// Returns the state root every channel shares; on a server, the local
    /// folder of what is local by nature ([`ServerOptions::local`]).
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

    /// Returns the folder mail is kept in when it is not `mail/` under the
    /// state root ([`Config::mail_folder`]), `None` otherwise (for a folder
    /// that is that `mail/`, and always on a server): for a tool that
    /// watches or checks mail's files itself.
    pub fn mail_folder(&self) -> Option<&StateDir> {
        if self.inner.server.is_some() {
            return None;
        }
        let mail = self.inner.mail.state();
        let root = self.inner.state.root();
        (mail.root() != root && mail.root() != root.join("mail")).then_some(mail)
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
    ///
    /// ```
    /// use chipset::directory::Registration;
    ///
    /// let tmp = tempfile::tempdir()?;
    /// let chipset = chipset::Chipset::open(tmp.path().join("state"))?;
    /// let ann = "ann".parse()?;
    /// let mut me = Registration::new(); // `non_exhaustive`: set its fields
    /// me.roles = Some(vec!["reviewers".parse()?]);
    /// me.model = Some("opus-4".into());
    /// chipset.directory().register(&ann, &me)?;
    /// let who = chipset.directory().whois(&ann)?;
    /// assert_eq!(who.profile.roles[0].as_str(), "reviewers");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn directory(&self) -> &Directory {
        &self.inner.directory
    }

    /// Returns the path leases: who may edit which files, and the check a
    /// pre-commit hook runs.
    ///
    /// ```
    /// use chipset::lease::{Error, LeaseMode, LeaseRequest};
    ///
    /// let tmp = tempfile::tempdir()?;
    /// let chipset = chipset::Chipset::open(tmp.path().join("state"))?;
    /// let (ann, bob) = ("ann".parse()?, "bob".parse()?);
    /// let mine = chipset.leases().acquire(&LeaseRequest::new(ann, LeaseMode::Exclusive, ["src/parser/**"]))?;
    /// let theirs = LeaseRequest::new(bob, LeaseMode::Exclusive, ["src/parser/lexer.rs"]);
    /// match chipset.leases().acquire(&theirs) {
    ///     Err(Error::Conflict { conflicts }) => assert_eq!(conflicts[0].token, mine.lease.token),
    ///     other => panic!("expected a conflict, got {other:?}"),
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn leases(&self) -> &Leases {
        &self.inner.leases
    }

    /// Returns the work pool: items agents claim themselves onto their hook.
    ///
    /// A claim puts the item on the claimer's hook, pending: the agent works
    /// it through [`Chipset::hooks`] like any assignment, and
    /// [`Pool::done`] (or its next claim) records it done.
    ///
    /// ```
    /// use chipset::pool::{NewItem, ReadyFilter};
    ///
    /// let tmp = tempfile::tempdir()?;
    /// let chipset = chipset::Chipset::open(tmp.path().join("state"))?;
    /// let (lead, ann) = ("lead".parse()?, "ann".parse()?);
    /// chipset.pool().post(&lead, &NewItem::new("Fix the flaky parser test"))?;
    /// let claimed = chipset.pool().claim_next(&ann, &ReadyFilter::new())?.ok_or("none ready")?;
    /// let pickup = chipset.hooks().pickup(&ann)?;
    /// assert_eq!(pickup.work().map(|w| w.work.bead_id.as_str()), Some(claimed.entry.id.as_str()));
    /// chipset.pool().done(&ann, &claimed.entry.id)?;
    /// assert_eq!(chipset.pool().counts()?.done, 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn pool(&self) -> &Pool {
        &self.inner.pool
    }

    /// Returns the hits for `query` across mail, bus events, hook titles and
    /// reminders, best first, after catching the search index up with the
    /// files, or on a server its rows (see [`crate::search`]; the index is
    /// a cache in the local folder, [`ServerOptions::local`]).
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
        self.search_index().search(query)
    }

    /// Returns the search index itself: to catch it up or rebuild it.
    pub fn search_index(&self) -> &SearchIndex {
        &self.inner.search
    }

    /// Returns the loops' persisted state (for counts and the doctor): on
    /// a server, the records the loops keep there.
    pub fn loop_state(&self) -> LoopState {
        self.inner.loops.clone()
    }

    /// Returns the channel handles a loop works through
    /// ([`Witness::new`](chipset_loop::Witness::new),
    /// `Dispatcher::new`, `Worker::new`, rounds): this door's own handles,
    /// with its [`Config`], on the directory or the server, so the loops'
    /// records live where the channels do
    /// ([`Channels::with_backend`]).
    pub fn channels(&self) -> Channels {
        self.inner.channels.clone()
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
