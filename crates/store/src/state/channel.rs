//! [`Channel`]: a channel's subdirectory of the state root, an opaque,
//! validated name.

#[cfg(test)]
use crate::error::{Error, Result};

/// A channel's subdirectory of the state root: an opaque, validated name.
///
/// The store does not know which channels exist: each channel crate owns
/// its name, as an associated constant where other crates need it
/// (`chipset_bus::Bus::CHANNEL`, `chipset_nudge::Reminders::CHANNEL`, …)
/// and privately where only it does. A name is 1 to 32 bytes of lowercase ASCII
/// letters, digits, `-` and `_`, starting with a letter: always one safe
/// directory name.
///
/// ```
/// use chipset_store::Channel;
/// const REVIEWS: Channel = Channel::new("reviews");
/// assert_eq!(REVIEWS.as_str(), "reviews");
/// ```
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Channel(&'static str);

impl Channel {
    /// The longest channel name accepted, in bytes.
    const MAX_LEN: usize = 32;

    /// The kind of name, as named in errors.
    #[cfg(test)]
    const KIND: &'static str = "channel name";

    /// Wraps `name`, checked at compile time when used in a `const`.
    ///
    /// # Panics
    ///
    /// When `name` breaks the rule (see [`Channel`]); in a `const` item that
    /// is a compile error.
    pub const fn new(name: &'static str) -> Channel {
        match channel_rule(name) {
            None => Channel(name),
            Some(_) => panic!("invalid channel name: see chipset_store::Channel for the rule"),
        }
    }

    /// Wraps `name` if it is a valid channel name.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidId`] naming the value and the broken rule.
    #[cfg(test)]
    pub(crate) fn try_new(name: &'static str) -> Result<Channel> {
        match channel_rule(name) {
            None => Ok(Channel(name)),
            Some(rule) => Err(Error::InvalidId {
                kind: Self::KIND,
                value: name.to_owned(),
                rule,
            }),
        }
    }

    /// Returns the name, which is also the directory's name.
    pub const fn as_str(self) -> &'static str {
        self.0
    }
}

impl std::fmt::Display for Channel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

impl std::fmt::Debug for Channel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Channel({:?})", self.0)
    }
}

/// The rule a channel name breaks, if any.
const fn channel_rule(name: &str) -> Option<&'static str> {
    let bytes = name.as_bytes();
    if bytes.is_empty() {
        return Some("must not be empty");
    }
    if bytes.len() > Channel::MAX_LEN {
        return Some("must be at most 32 bytes");
    }
    if !bytes[0].is_ascii_lowercase() {
        return Some("must start with a lowercase ASCII letter");
    }
    let mut i = 1;
    while i < bytes.len() {
        let b = bytes[i];
        if !(b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_') {
            return Some("must be lowercase ASCII letters, digits, `-` and `_`");
        }
        i += 1;
    }
    None
}
