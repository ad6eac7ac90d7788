//! Every id parses from text (`FromStr`, `TryFrom<&str>`, `TryFrom<String>`)
//! with exactly the checks of its constructor.

use std::str::FromStr;

use chipset::bus::EventId;
use chipset::hook::BeadId;
use chipset::mail::MessageId;
use chipset::store::{AgentId, TaskId};

/// Checks that each way of parsing `text` agrees with `new`.
fn check<T, E>(text: &str, new: impl Fn(&str) -> Result<T, E>)
where
    T: FromStr + for<'a> TryFrom<&'a str> + TryFrom<String> + PartialEq + std::fmt::Debug,
{
    let by_new = new(text).ok();
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
        check(text, EventId::parse);
    }
    assert!("polecat-alpha".parse::<AgentId>().is_ok());
    assert!("a/b".parse::<AgentId>().is_err());
    assert!("gt-abc12".parse::<EventId>().is_err());
}
