//! The pool's own id.

chipset_store::define_id! {
    /// A work item id such as `w-3f2a9c1b7d4e`: one safe path segment
    /// ([`chipset_store::define_id!`]). A claimed item goes on its
    /// claimer's hook under the same id, as the hook's bead id.
    pub struct ItemId("item id");
}

impl ItemId {
    /// Returns a fresh id, `w-` and 12 random hex digits.
    pub(crate) fn generate() -> ItemId {
        let hex = uuid::Uuid::new_v4().simple().to_string();
        ItemId(format!("w-{}", &hex[..12]))
    }

    /// Returns the hook's bead id for this item (the same text).
    pub(crate) fn bead(&self) -> chipset_hook::BeadId {
        chipset_hook::BeadId::new(self.as_str()).expect("an item id is a valid bead id")
    }

    /// Returns the item id of a hook's bead (the same text).
    pub(crate) fn of_bead(bead: &chipset_hook::BeadId) -> ItemId {
        ItemId(bead.as_str().to_owned())
    }
}
