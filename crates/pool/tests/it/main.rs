//! Integration tests for chipset-pool.

#![allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    reason = "tests plant, corrupt and inspect files as another program would, outside the store's API"
)]

mod place;

mod doctor_seam;
mod input;
mod lifecycle;
mod model;
mod procs;
mod seam;
mod seam_cut;
mod server;
mod upkeep;

use std::sync::Arc;

use chipset_backend::Backend;
use chipset_hook::Hooks;
use chipset_pool::{ItemId, NewItem, Pool};
use chipset_store::ManualClock;
use chipset_testkit::TempState;

pub(crate) use chipset_testkit::agent;

/// A state root on a manual clock at `T0`, its pool and its hooks (on a
/// server, the server's clock and a backend to read its rows).
pub(crate) struct Setup {
    pub(crate) tmp: TempState,
    pub(crate) pool: Pool,
    pub(crate) hooks: Hooks,
    pub(crate) clock: ManualClock,
    pub(crate) backend: Option<Arc<dyn Backend>>,
}

pub(crate) fn setup() -> Setup {
    setup_on(&place::Place::fs())
}

/// [`setup`] with the pool and the hooks on `place`.
pub(crate) fn setup_on(place: &place::Place) -> Setup {
    let (tmp, clock) = TempState::manual();
    let (pool, hooks) = place.open(&tmp.state);
    Setup {
        tmp,
        pool,
        hooks,
        clock,
        backend: place.seam(),
    }
}

pub(crate) fn id(s: &str) -> ItemId {
    ItemId::new(s).unwrap()
}

/// A new item with the caller's id `name`, titled after it.
pub(crate) fn item(name: &str) -> NewItem {
    NewItem::new(format!("do {name}")).with_id(id(name))
}

/// The bytes of every file under `pool/` and `hooks/`, to show that a
/// refused operation changed nothing.
pub(crate) fn snapshot(s: &Setup) -> Vec<(String, Vec<u8>)> {
    if let Some(backend) = &s.backend {
        return place::rows(backend.as_ref());
    }
    let mut out = Vec::new();
    for dir in ["pool", "pool/items", "hooks"] {
        let Ok(read) = std::fs::read_dir(s.tmp.state.root().join(dir)) else {
            continue;
        };
        for e in read {
            let e = e.unwrap();
            if e.file_type().unwrap().is_file() {
                out.push((
                    format!("{dir}/{}", e.file_name().to_string_lossy()),
                    std::fs::read(e.path()).unwrap(),
                ));
            }
        }
    }
    out.sort();
    out
}
