//! The hook's own id.

chipset_store::define_id! {
    /// A work item (bead) id such as `gt-abc12`: the work a hook binds an
    /// agent to. Validated as one safe path segment
    /// ([`chipset_store::define_id!`]).
    pub struct BeadId("bead id");
}
