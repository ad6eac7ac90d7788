//! Where a test's mail lives (issue 30): a state root's directory, or a
//! PostgreSQL server (`CHIPSET_TEST_PG`) and a schema of the test's own
//! ([`chipset_backend::testing::Place`]). The model, property and race
//! tests take a place, so the same bodies run on both backends.

use chipset_backend::testing::{self, open_spec};
use chipset_mail::{Mail, MailConfig};
use chipset_store::StateDir;

/// The directory itself, or a server and a schema.
pub(crate) struct Place(testing::Place);

impl std::ops::Deref for Place {
    type Target = testing::Place;
    fn deref(&self) -> &testing::Place {
        &self.0
    }
}

impl Place {
    /// The state root's own directory: mail's tuned file paths.
    pub(crate) fn fs() -> Place {
        Place(testing::Place::fs())
    }

    /// A fresh schema on the test server, or `None` (saying so).
    pub(crate) fn pg(test: &str) -> Option<Place> {
        testing::Place::pg(test).map(Place)
    }

    /// Returns the mail on this place, with `state` as the local root
    /// (its clock makes the ids).
    pub(crate) fn mail(&self, state: StateDir, config: MailConfig) -> Mail {
        match self.seam() {
            None => Mail::with_config(state, config),
            Some(seam) => Mail::with_backend(state, config, seam),
        }
    }
}

/// Opens the mail a [`Place::spec`](testing::Place::spec) names.
pub(crate) fn mail_of(spec: &str, config: MailConfig) -> Mail {
    let opened = open_spec(spec);
    match opened.seam {
        None => Mail::with_config(opened.state, config),
        Some(seam) => Mail::with_backend(opened.state, config, seam),
    }
}
