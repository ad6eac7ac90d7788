//! Every id parses from text (`FromStr`, `TryFrom<&str>`, `TryFrom<String>`)
//! with exactly the checks of its constructor, and reads back as the same
//! text (`AsRef<str>`, `Borrow<str>`, `Display`, `Into<String>`).

use std::str::FromStr;

use std::borrow::Borrow;

use chipset::bus::EventId;
use chipset::directory::Role;
use chipset::hook::BeadId;
use chipset::mail::MessageId;
use chipset::pool::ItemId;
use chipset::store::{AgentId, TaskId};

/// Checks that each way of parsing `text` agrees with `new`, and that an
/// id that parses reads back as the same text every way.
fn check<T, E>(text: &str, new: impl Fn(&str) -> Result<T, E>)
where
    T: FromStr
        + for<'a> TryFrom<&'a str>
        + TryFrom<String>
        + AsRef<str>
        + Borrow<str>
        + Into<String>
        + std::fmt::Display
        + Clone
        + PartialEq
        + std::fmt::Debug,
{
    let by_new = new(text).ok();
    if let Some(id) = &by_new {
        assert_eq!(id.as_ref(), text);
        assert_eq!(Borrow::<str>::borrow(id), text);
        assert_eq!(id.to_string(), text);
        assert_eq!(id.clone().into(), text.to_owned());
    }
    assert_eq!(text.parse::<T>().ok(), by_new, "FromStr of {text:?}");
    assert_eq!(T::try_from(text).ok(), by_new, "TryFrom<&str> of {text:?}");
    assert_eq!(
        T::try_from(text.to_owned()).ok(),
        by_new,
        "TryFrom<String> of {text:?}"
    );
}

#[test]
fn ids_parse_with_the_checks_of_their_constructors() {
    let texts = [
        "polecat-alpha",
        "gt-abc12",
        "reviewers",
        "1730000000123-9b3e0c1a-5d2f-4e1b-8a6c-0123456789ab",
        "",
        "..",
        "a/b",
        ".hidden",
        "nul\0",
        &"x".repeat(300),
    ];
    for text in texts {
        check(text, |s: &str| AgentId::new(s));
        check(text, |s: &str| TaskId::new(s));
        check(text, |s: &str| BeadId::new(s));
        check(text, |s: &str| MessageId::new(s));
        check(text, |s: &str| EventId::new(s));
        check(text, |s: &str| ItemId::new(s));
        check(text, |s: &str| Role::new(s));
    }
    assert!("polecat-alpha".parse::<AgentId>().is_ok());
    assert!("a/b".parse::<AgentId>().is_err());
    assert!("gt-abc12".parse::<EventId>().is_err());
}
