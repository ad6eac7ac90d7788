//! Mail's own id.

chipset_store::define_id! {
    /// A message id, normally `{unix-ms}-{uuid-v4}` (made from a
    /// [`SortableId`](chipset_store::SortableId)). Validated as one safe path
    /// segment ([`chipset_store::define_id!`]).
    pub struct MessageId("message id");
}

impl MessageId {
    /// Whether the id has the seed's form, `{unix-ms}-{uuid}`: decimal
    /// milliseconds, a hyphen, and a UUID in lower-case hexadecimal with its
    /// four hyphens. Every id chipset makes has it, ids of that form sort in
    /// send order, and nubos-pilot's reader skips a file whose id has any
    /// other, so [`Mail::send`](crate::Mail::send) refuses a chosen id
    /// without it. Reading accepts any valid id already on disk.
    ///
    /// ```
    /// use chipset_mail::MessageId;
    /// let id = MessageId::new("1730000000123-9b3e0c1a-5d2f-4e1b-8a6c-0123456789ab")?;
    /// assert!(id.is_seed_form());
    /// assert!(!MessageId::new("msg-42")?.is_seed_form());
    /// assert!(!MessageId::new("2026-11-28")?.is_seed_form());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn is_seed_form(&self) -> bool {
        // At most 19 digits: the time must parse (milliseconds in an `i64`).
        is_seed_id(self.as_str()) && self.as_str().find('-').is_some_and(|at| at <= 19)
    }
}

/// nubos-pilot's `ID_RE`,
/// `^\d+-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`: the
/// ids its reader lists (of any number of digits).
pub(crate) fn is_seed_id(id: &str) -> bool {
    let mut parts = id.split('-');
    let digits = parts
        .next()
        .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()));
    let hex = |n: usize| {
        move |p: &str| p.len() == n && p.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    };
    digits
        && parts.next().is_some_and(hex(8))
        && parts.next().is_some_and(hex(4))
        && parts.next().is_some_and(hex(4))
        && parts.next().is_some_and(hex(4))
        && parts.next().is_some_and(hex(12))
        && parts.next().is_none()
}

#[cfg(test)]
mod tests {
    use super::MessageId;

    /// The seed's form exactly (nubos-pilot's `ID_RE`): no upper case, no
    /// missing or moved hyphen, no other prefix, no braces.
    #[test]
    fn the_seed_form_is_unix_ms_then_a_lower_case_uuid() {
        let uuid = "9b3e0c1a-5d2f-4e1b-8a6c-0123456789ab";
        for good in [format!("1730000000123-{uuid}"), format!("0-{uuid}")] {
            assert!(MessageId::new(&good).unwrap().is_seed_form(), "{good}");
        }
        for bad in [
            format!("1730000000123-{}", uuid.to_uppercase()),
            format!("1730000000123-{}", uuid.replace('-', "")),
            format!("1730000000123-{uuid}0"),
            format!("1730000000123-{}", &uuid[1..]),
            "1730000000123-9b3e0c1a5-d2f-4e1b-8a6c-0123456789ab".to_owned(),
            format!("x1730000000123-{uuid}"),
            format!("-{uuid}"),
            format!("12345678901234567890-{uuid}"),
            "1730000000123-9b3e0c1a-5d2f-4e1b-8a6c-0123456789ag".to_owned(),
            "garbage".to_owned(),
            "2026-11-28".to_owned(),
        ] {
            assert!(!MessageId::new(&bad).unwrap().is_seed_form(), "{bad}");
        }
    }
}
