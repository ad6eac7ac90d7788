//! Lease patterns: validated project-relative paths and globs, and the two
//! questions asked of them (do two patterns overlap, does a pattern cover a
//! path).

use std::fmt;

use globset::GlobBuilder;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::Error;

/// The longest pattern accepted, in bytes, after normalisation.
pub const MAX_PATTERN_LEN: usize = 512;

/// The characters that make a pattern a glob. The literal prefix of a glob
/// is everything before the first of them.
const GLOB_META: &[char] = &['*', '?', '[', '{'];

/// A path or glob relative to the project root, as leased.
///
/// Normalised when built: `./` and empty components are dropped and a
/// trailing `/` is removed, so `./src//auth/` is `src/auth`. Refused (with
/// [`Error::InvalidPath`]): an empty pattern (or one that names only
/// the root, like `.`), an absolute path, a `..` component, a backslash, a
/// NUL, more than [`MAX_PATTERN_LEN`] bytes, and a glob that `globset`
/// cannot compile.
///
/// A literal path covers itself and everything below it (a directory
/// lease). A glob follows `globset` with `literal_separator`: `*` and `?`
/// never cross a `/`, `**` does. A path is also covered when one of its
/// ancestor directories matches the glob.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LeasePath(String);

impl LeasePath {
    /// Returns the normalised pattern, or why it is refused.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidPath`] for the patterns listed on the type.
    pub fn new(pattern: impl AsRef<str>) -> Result<Self, Error> {
        // A line break would split the one line per lease that listings
        // print; no file name a project keeps under review holds one.
        if pattern.as_ref().chars().any(char::is_control) {
            return Err(invalid(
                pattern.as_ref(),
                "contains a control character (a line break, a tab)".to_owned(),
            ));
        }
        let p = Self::normalise(pattern.as_ref())?;
        if p.is_glob() {
            let glob = GlobBuilder::new(&p.0).literal_separator(true).build();
            if let Err(e) = glob {
                return Err(invalid(
                    pattern.as_ref(),
                    format!("not a valid glob: {}", e.kind()),
                ));
            }
        }
        Ok(p)
    }

    /// The checks of [`LeasePath::new`] without compiling the glob: for
    /// patterns read back from the table, which were compiled when leased.
    pub(crate) fn normalise(raw: &str) -> Result<Self, Error> {
        let bad = |why: &str| Err(invalid(raw, why.to_owned()));
        if raw.is_empty() {
            return bad("empty");
        }
        if raw.starts_with('/') {
            return bad("absolute: a lease names paths relative to the project root");
        }
        if raw.contains('\0') {
            return bad("contains NUL");
        }
        if raw.contains('\\') {
            return bad("contains a backslash: use `/` between components");
        }
        let mut parts = Vec::new();
        for part in raw.split('/') {
            match part {
                "" | "." => {}
                ".." => return bad("`..` would leave the project root"),
                other => parts.push(other),
            }
        }
        if parts.is_empty() {
            return bad("names the whole project root: use `**` to lease everything");
        }
        let joined = parts.join("/");
        if joined.len() > MAX_PATTERN_LEN {
            return Err(invalid(raw, format!("longer than {MAX_PATTERN_LEN} bytes")));
        }
        Ok(LeasePath(joined))
    }

    /// Returns the pattern as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Returns true when the pattern has a glob metacharacter (`*`, `?`, `[`, `{`).
    pub fn is_glob(&self) -> bool {
        self.0.contains(GLOB_META)
    }

    /// Returns true when everything this pattern may cover lies under the
    /// directory `dir` (a literal path): a lease on `src/auth/**` or on
    /// `src/auth/a.rs` lies under `src`. What `lease check` of a directory
    /// finds besides the patterns that cover the directory itself.
    pub(crate) fn lies_under(&self, dir: &LeasePath) -> bool {
        self.literal_prefix()
            .strip_prefix(dir.0.as_str())
            .is_some_and(|rest| rest.starts_with('/'))
    }

    /// Returns everything before the first glob metacharacter (all of a
    /// literal path).
    pub fn literal_prefix(&self) -> &str {
        match self.0.find(GLOB_META) {
            Some(i) => &self.0[..i],
            None => &self.0,
        }
    }

    /// Returns true when some path may be covered by both patterns.
    ///
    /// An over-approximation, so that it never lets two conflicting leases
    /// through: two literals overlap when they are equal or one is an
    /// ancestor directory of the other; a literal `L` and a glob with
    /// literal prefix `p` overlap when `L` starts with `p` or `p` starts
    /// with `L/`; two globs overlap when one literal prefix starts with the
    /// other. So `src/*.rs` and `src/auth/**` are judged to overlap (they
    /// do not), and `src/auth/**` and `docs/*.md` are not.
    pub fn overlaps(&self, other: &LeasePath) -> bool {
        match (self.is_glob(), other.is_glob()) {
            (false, false) => is_within(&self.0, &other.0) || is_within(&other.0, &self.0),
            (false, true) => literal_meets_glob(&self.0, other.literal_prefix()),
            (true, false) => literal_meets_glob(&other.0, self.literal_prefix()),
            (true, true) => {
                let (a, b) = (self.literal_prefix(), other.literal_prefix());
                a.starts_with(b) || b.starts_with(a)
            }
        }
    }

    /// Returns true when the lease of this pattern covers `path`, a
    /// normalised file path: exact `globset` matching of the path and of
    /// each of its ancestors. A stored glob that no longer compiles covers
    /// every path under its literal prefix (fail closed).
    pub fn covers(&self, path: &LeasePath) -> bool {
        !self.covered(std::slice::from_ref(path)).is_empty()
    }

    /// Returns those of `paths` this pattern covers, as [`LeasePath::covers`]
    /// does, compiling the glob at most once and only when some path starts
    /// with its literal prefix.
    pub(crate) fn covered<'p>(&self, paths: &'p [LeasePath]) -> Vec<&'p LeasePath> {
        if !self.is_glob() {
            return paths.iter().filter(|p| is_within(&p.0, &self.0)).collect();
        }
        let prefix = self.literal_prefix();
        let candidates: Vec<&LeasePath> =
            paths.iter().filter(|p| p.0.starts_with(prefix)).collect();
        if candidates.is_empty() {
            return candidates;
        }
        let Ok(glob) = GlobBuilder::new(&self.0).literal_separator(true).build() else {
            return candidates;
        };
        let matcher = glob.compile_matcher();
        candidates
            .into_iter()
            .filter(|p| {
                let mut end = p.0.len();
                loop {
                    if matcher.is_match(&p.0[..end]) {
                        return true;
                    }
                    match p.0[..end].rfind('/') {
                        Some(i) => end = i,
                        None => return false,
                    }
                }
            })
            .collect()
    }
}

/// Returns true when `path` is `dir` or lies below it.
fn is_within(path: &str, dir: &str) -> bool {
    path.strip_prefix(dir)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// The literal-versus-glob rule of [`LeasePath::overlaps`].
fn literal_meets_glob(literal: &str, prefix: &str) -> bool {
    literal.starts_with(prefix)
        || prefix
            .strip_prefix(literal)
            .is_some_and(|rest| rest.starts_with('/'))
}

fn invalid(path: &str, reason: String) -> Error {
    Error::InvalidPath {
        path: path.chars().take(80).collect(),
        reason,
    }
}

impl fmt::Display for LeasePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for LeasePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl AsRef<str> for LeasePath {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl Serialize for LeasePath {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for LeasePath {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = String::deserialize(d)?;
        LeasePath::normalise(&raw).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> LeasePath {
        LeasePath::new(s).unwrap()
    }

    fn check_overlap(a: &str, b: &str, expected: bool) {
        assert_eq!(p(a).overlaps(&p(b)), expected, "{a} vs {b}");
        assert_eq!(p(b).overlaps(&p(a)), expected, "{b} vs {a}");
    }

    #[test]
    fn overlap_table() {
        check_overlap("src/auth", "src/auth", true);
        check_overlap("src/auth", "src/auth/login.rs", true);
        check_overlap("src/auth", "src/authx", false);
        check_overlap("src/lib.rs", "src/lib.rs.bak", false);
        check_overlap("src/auth/**", "src/auth/login.rs", true);
        check_overlap("src/auth/**", "src/auth", true);
        check_overlap("src/auth/**", "src", true);
        check_overlap("src/auth/**", "docs/a.md", false);
        check_overlap("src/auth/**", "src/au", false);
        check_overlap("src/au*", "src/auth/x.rs", true);
        check_overlap("**/*.rs", "docs/a.md", true);
        check_overlap("src/*.rs", "src/auth/**", true);
        check_overlap("src/auth/**", "docs/*.md", false);
        check_overlap("src/{a,b}/**", "src/c.rs", true);
        check_overlap("tests/*.rs", "src/*.rs", false);
    }

    fn check_cover(pattern: &str, path: &str, expected: bool) {
        assert_eq!(
            p(pattern).covers(&p(path)),
            expected,
            "{pattern} covers {path}"
        );
    }

    #[test]
    fn cover_table() {
        check_cover("src/auth", "src/auth/login.rs", true);
        check_cover("src/auth", "src/authx.rs", false);
        check_cover("src/auth/**", "src/auth/a/b.rs", true);
        check_cover("src/*.rs", "src/lib.rs", true);
        check_cover("src/*.rs", "src/auth/lib.rs", false);
        check_cover("src/*", "src/auth/lib.rs", true);
        check_cover("**/*.md", "docs/x/y.md", true);
        check_cover("docs/*.md", "src/x.md", false);
        check_cover("src/{a,b}.rs", "src/b.rs", true);
    }

    /// Soundness of the over-approximation: whenever one concrete path is
    /// covered by two patterns, the patterns are judged to overlap.
    mod soundness {
        use proptest::prelude::*;

        use super::super::LeasePath;

        fn segment() -> impl Strategy<Value = String> {
            prop::sample::select(vec!["a", "b", "ab", "a.rs", "b.md", "x"]).prop_map(str::to_owned)
        }

        fn path() -> impl Strategy<Value = String> {
            prop::collection::vec(segment(), 1..5).prop_map(|v| v.join("/"))
        }

        fn pattern() -> impl Strategy<Value = String> {
            let part = prop::sample::select(vec![
                "a", "b", "ab", "a*", "*", "**", "*.rs", "?", "{a,b}", "[ab]", "x",
            ]);
            prop::collection::vec(part, 1..5).prop_map(|v| v.join("/"))
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(2000))]
            #[test]
            fn a_path_covered_by_both_means_overlap(a in pattern(), b in pattern(), p in path()) {
                let (Ok(a), Ok(b)) = (LeasePath::new(&a), LeasePath::new(&b)) else {
                    return Ok(());
                };
                let p = LeasePath::new(&p).unwrap();
                if a.covers(&p) && b.covers(&p) {
                    prop_assert!(a.overlaps(&b), "{a} and {b} both cover {p}");
                    prop_assert!(b.overlaps(&a), "{b} and {a} both cover {p}");
                }
            }
        }
    }

    #[test]
    fn normalisation_and_refusals() {
        assert_eq!(p("./src//auth/").as_str(), "src/auth");
        for bad in [
            "",
            ".",
            "/",
            "/etc/passwd",
            "../x",
            "src/../../x",
            "a\\b",
            "a\0b",
            "src/[x",
        ] {
            assert!(
                matches!(LeasePath::new(bad), Err(Error::InvalidPath { .. })),
                "{bad:?} must be refused"
            );
        }
        assert!(LeasePath::new("a".repeat(MAX_PATTERN_LEN + 1)).is_err());
        assert!(LeasePath::new("a".repeat(MAX_PATTERN_LEN)).is_ok());
    }
}
