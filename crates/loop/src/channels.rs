//! The channel handles a loop works through, all on one state root.

use std::sync::Arc;

use chipset_backend::Backend;
use chipset_bus::{Bus, BusConfig};
use chipset_hook::Hooks;
use chipset_mail::{Mail, MailConfig};
use chipset_nudge::Nudges;
use chipset_store::StateDir;

use crate::error::{Error, Result};

/// The four channel handles a [`Witness`](crate::Witness),
/// [`Dispatcher`](crate::Dispatcher) or [`Worker`](crate::Worker) works
/// through. [`Channels::new`] (or [`Channels::with_backend`]) makes them
/// all, each with its default config; give it the mail and bus handles you
/// configured ([`Channels::with_mail`] for a
/// [`MailConfig`](chipset_mail::MailConfig), [`Channels::with_bus`] for a
/// [`BusConfig`](chipset_bus::BusConfig)), so the loop honours your
/// configuration. The hooks and nudges have no configuration: those
/// [`Channels::new`] makes are the ones to use.
///
/// Every handle must be on the same state root (mail may instead be a
/// folder of the seed's layout, [`Channels::with_mail`]): the setters
/// refuse one on another root with [`Error::MixedRoots`]. Cheap to clone.
///
/// ```
/// use chipset_bus::{Bus, BusConfig};
/// use chipset_loop::Channels;
/// use chipset_mail::{Mail, MailConfig};
/// use chipset_store::StateDir;
///
/// let tmp = tempfile::tempdir()?;
/// let state = StateDir::open(tmp.path())?;
/// let mail = Mail::with_config(state.clone(), MailConfig::default());
/// let channels = Channels::new(state.clone())
///     .with_mail(mail)?
///     .with_bus(Bus::with_config(state, BusConfig::default()))?;
///
/// // A handle on another state root is refused.
/// let other = tempfile::tempdir()?;
/// let elsewhere = Mail::new(StateDir::open(other.path())?);
/// assert!(channels.with_mail(elsewhere).is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct Channels {
    pub(crate) hooks: Hooks,
    pub(crate) nudges: Nudges,
    pub(crate) mail: Mail,
    pub(crate) bus: Bus,
    /// The server the channels and the loops' own records are on; `None`:
    /// the state root's files.
    pub(crate) seam: Option<Arc<dyn Backend>>,
}

impl Channels {
    /// Returns the channels of `state`, each with its default config.
    pub fn new(state: StateDir) -> Self {
        Channels {
            hooks: Hooks::new(state.clone()),
            nudges: Nudges::new(state.clone()),
            mail: Mail::new(state.clone()),
            bus: Bus::new(state),
            seam: None,
        }
    }

    /// Returns the channels on a server (issue 30), each with its default
    /// config: the hooks, nudges, mail and bus through `backend`
    /// ([`Hooks::with_backend`], [`Nudges::with_backend`],
    /// [`Mail::with_backend`], [`Bus::with_backend`]), and so the records
    /// of every loop built on them (`loop/witness/…`, `loop/dispatcher/…`,
    /// `loop/rounds/…`): each a value on the server under the key its
    /// file's path names, written with a create or a swap under the key's
    /// lock (a session lock the server releases if the client dies), and
    /// the logs appended in one statement. Times (ticks, ledger entries,
    /// checkpoints) come from the backend's clock, the server's. `state`
    /// is the local root: its clock makes ids, and what is not on the seam
    /// yet (the pool the witness returns stalled work to) still uses it. A
    /// [`LoopState`](crate::LoopState) of these channels counts the records
    /// on the server.
    ///
    /// This is for servers: on a directory use [`Channels::new`], whose
    /// files are the seed's (mail on a directory backend would be in the
    /// server's layout). Handles replaced with the setters must be on the
    /// same backend.
    pub fn with_backend(state: StateDir, backend: Arc<dyn Backend>) -> Self {
        Channels {
            hooks: Hooks::with_backend(state.clone(), Arc::clone(&backend)),
            nudges: Nudges::with_backend(state.clone(), Arc::clone(&backend)),
            mail: Mail::with_backend(state.clone(), MailConfig::default(), Arc::clone(&backend)),
            bus: Bus::with_backend(state, BusConfig::default(), Arc::clone(&backend)),
            seam: Some(backend),
        }
    }

    /// Returns the loop records of these channels: on their server, or
    /// the state root's files.
    pub(crate) fn files(&self) -> crate::files::Files {
        crate::files::Files::new(self.state().clone(), self.seam.clone())
    }

    /// Returns these channels with the mail handle replaced (its
    /// [`MailConfig`](chipset_mail::MailConfig) applies to every mail the
    /// loop sends and reads). A mail folder of the seed's layout
    /// ([`Mail::in_folder`], say a nubos-pilot project's
    /// `.nubos-pilot/messages`) may be outside the state root: the loops
    /// and attention then send, read and watch mail there.
    ///
    /// # Errors
    ///
    /// [`Error::MixedRoots`] when `mail` is `mail/` of another state root.
    pub fn with_mail(mut self, mail: Mail) -> Result<Self> {
        // A folder of the seed's layout (`Mail::in_folder`) may be
        // anywhere: it is mail's own root, not a second state root.
        let in_folder = mail.dir().as_path() == mail.state().root();
        if !in_folder {
            self.check("mail", mail.state())?;
        }
        self.mail = mail;
        Ok(self)
    }

    /// Returns these channels with the bus handle replaced (its
    /// [`BusConfig`](chipset_bus::BusConfig) applies to every event the loop
    /// publishes, reads and waits for).
    ///
    /// # Errors
    ///
    /// [`Error::MixedRoots`] when `bus` is on another state root.
    pub fn with_bus(mut self, bus: Bus) -> Result<Self> {
        self.check("bus", bus.state())?;
        self.bus = bus;
        Ok(self)
    }

    /// Returns the state root the channels are on.
    pub(crate) fn state(&self) -> &StateDir {
        self.hooks.state()
    }

    fn check(&self, channel: &'static str, other: &StateDir) -> Result<()> {
        let root = self.state().root();
        if other.root() == root {
            Ok(())
        } else {
            Err(Error::MixedRoots {
                channel,
                found: other.root().to_owned(),
                root: root.to_owned(),
            })
        }
    }
}

impl From<StateDir> for Channels {
    /// Returns the channels of `state`, each with its default config.
    fn from(state: StateDir) -> Self {
        Channels::new(state)
    }
}
