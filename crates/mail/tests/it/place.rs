//! Where a test's mail lives (issue 30): a state root's directory, or a
//! PostgreSQL server (`CHIPSET_TEST_PG`) and a schema of the test's own
//! ([`chipset_backend::testing::Placed`]). The model, property and race
//! tests take a place, so the same bodies run on both backends.

use std::sync::Arc;

use chipset_backend::Backend;
use chipset_backend::testing::{Channel, Placed};
use chipset_mail::{Mail, MailConfig};
use chipset_store::StateDir;

/// The directory itself (mail's tuned file paths), or a server and a
/// schema: `open` gives the mail with the default configuration.
pub(crate) type Place = Placed<MailChannel>;

/// The mail; its local root's clock makes the ids.
pub(crate) struct MailChannel;

impl MailChannel {
    fn with(state: StateDir, seam: Option<Arc<dyn Backend>>, config: MailConfig) -> Mail {
        match seam {
            None => Mail::with_config(state, config),
            Some(seam) => Mail::with_backend(state, config, seam),
        }
    }
}

impl Channel for MailChannel {
    type Handle = Mail;
    fn open(state: StateDir, seam: Option<Arc<dyn Backend>>) -> Mail {
        MailChannel::with(state, seam, MailConfig::default())
    }
}

/// As [`Placed::open`], with `config`.
pub(crate) fn mail_with(place: &Place, state: &StateDir, config: MailConfig) -> Mail {
    MailChannel::with(state.clone(), place.seam(), config)
}
