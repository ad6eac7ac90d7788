//! Mail's own id.

chipset_store::define_id! {
    /// A message id, normally `{unix-ms}-{uuid-v4}` (made from a
    /// [`SortableId`](chipset_store::SortableId)). Validated as one safe path
    /// segment ([`chipset_store::define_id!`]).
    pub struct MessageId("message id");
}
