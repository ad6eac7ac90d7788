//! The password file, as libpq reads it: `PGPASSFILE` (or the connection
//! string's `passfile`), else `~/.pgpass`; lines of
//! `hostname:port:database:username:password`, `*` matching anything,
//! `\:` and `\\` escaped, `#` a comment. A file that its group or others
//! may read is ignored with a warning (libpq's 0600 rule).

use std::path::{Path, PathBuf};

/// The largest password file read.
const MAX_PGPASS: u64 = 1 << 20;

/// Returns the password file's path: `passfile`, else `PGPASSFILE`, else
/// `~/.pgpass`.
pub(crate) fn path(
    passfile: Option<&str>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Option<PathBuf> {
    passfile
        .map(PathBuf::from)
        .or_else(|| env("PGPASSFILE").map(PathBuf::from))
        .or_else(|| env("HOME").map(|h| Path::new(&h).join(".pgpass")))
}

/// Returns the password for `(host, port, dbname, user)` from the file at
/// `path`: `None` when there is no file, no matching line, or the file is
/// open to its group or others.
pub(crate) fn lookup(
    path: &Path,
    host: &str,
    port: u16,
    dbname: &str,
    user: &str,
) -> Option<String> {
    if open_to_others(path)? {
        tracing::warn!(
            path = %path.display(),
            "password file has group or world access; permissions should be u=rw (0600) or less"
        );
        return None;
    }
    let bytes = chipset_store::StateDir::read_outside(path, MAX_PGPASS).ok()?;
    find(&String::from_utf8_lossy(&bytes), host, port, dbname, user)
}

/// Returns whether the file's mode lets its group or others in, `None`
/// when it is not there or not a file.
fn open_to_others(path: &Path) -> Option<bool> {
    let stat = chipset_store::StateDir::stat_outside(path).ok()??;
    stat.is_file().then_some(stat.mode & 0o077 != 0)
}

/// Finds the first line of `text` that matches.
pub(crate) fn find(text: &str, host: &str, port: u16, dbname: &str, user: &str) -> Option<String> {
    let port = port.to_string();
    text.lines()
        .filter(|l| !l.trim_start().starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| {
            let fields = split(l);
            (fields.len() == 5).then_some(fields)
        })
        .find(|f| {
            let ok = |field: &str, value: &str| field == "*" || field == value;
            ok(&f[0], host) && ok(&f[1], &port) && ok(&f[2], dbname) && ok(&f[3], user)
        })
        .map(|f| f[4].clone())
}

/// Splits a line at unescaped `:`, undoing `\:` and `\\`.
fn split(line: &str) -> Vec<String> {
    let mut fields = vec![String::new()];
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let Some(next) = chars.next() {
                    fields.last_mut().expect("one field").push(next);
                }
            }
            ':' if fields.len() < 5 => fields.push(String::new()),
            c => fields.last_mut().expect("one field").push(c),
        }
    }
    fields
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_match_as_libpq_matches_them() {
        let text = "# team\n\
                    db.example:5432:team:alice:first\n\
                    *:*:*:bob:p\\:w\\\\d\n\
                    db.example:*:*:*:fallback\n";
        assert_eq!(
            find(text, "db.example", 5432, "team", "alice").as_deref(),
            Some("first")
        );
        assert_eq!(
            find(text, "other", 1, "x", "bob").as_deref(),
            Some("p:w\\d")
        );
        assert_eq!(
            find(text, "db.example", 6000, "x", "carol").as_deref(),
            Some("fallback")
        );
        assert_eq!(find(text, "elsewhere", 5432, "team", "alice"), None);
    }

    #[test]
    fn a_file_open_to_others_is_ignored() {
        use std::os::unix::fs::PermissionsExt as _;
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("pgpass");
        #[allow(clippy::disallowed_methods, reason = "the test plants the user's file")]
        {
            std::fs::write(&path, "*:*:*:*:s3cret\n").unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        }
        assert_eq!(lookup(&path, "h", 5432, "d", "u"), None);
        #[allow(clippy::disallowed_methods, reason = "the test sets the user's mode")]
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(
            lookup(&path, "h", 5432, "d", "u").as_deref(),
            Some("s3cret")
        );
        assert_eq!(lookup(&tmp.path().join("none"), "h", 5432, "d", "u"), None);
    }
}
