//! [`Folder`]: one directory of the state, opened once to read many of its
//! files by name.

use std::fs::File;
use std::os::fd::OwnedFd;
use std::path::PathBuf;

use super::reads::Noatime;
use super::*;
use crate::read::{read_open_file_stat, read_open_into};

/// How a folder is opened: a directory, never through a symlink.
const DIR_FLAGS: rustix::fs::OFlags = rustix::fs::OFlags::RDONLY
    .union(rustix::fs::OFlags::DIRECTORY)
    .union(rustix::fs::OFlags::NOFOLLOW)
    .union(rustix::fs::OFlags::CLOEXEC);

/// A directory of the state, opened once (from
/// [`StateDir::folder`]), to read many files in it by name: each read opens
/// its one name relative to the open directory, with no path resolved from
/// the root again. A listing that reads every file it lists
/// (an inbox, say) reads them this way.
///
/// It holds the directory open, so every read is of the directory that was
/// opened, even if another is renamed into its place meanwhile. It is
/// `Send + Sync`: threads may read through one `Folder` at once.
///
/// ```
/// use chipset_store::{Channel, ReadOutcome, StateDir};
/// let tmp = tempfile::tempdir()?;
/// let state = StateDir::open(tmp.path())?;
/// let dir = state.channel(Channel::new("reviews"));
/// state.write_json(&dir.join("r-1.json")?, &serde_json::json!({"ok": true}))?;
///
/// let folder = state.folder(&dir)?.expect("the directory is there");
/// for name in state.list(&dir)? {
///     if let ReadOutcome::Value((bytes, stat)) = folder.read_bytes_capped(&name, 4096)? {
///         assert!(stat.is_file());
///         let value: serde_json::Value = serde_json::from_slice(&bytes)?;
///         assert_eq!(value["ok"], true);
///     }
/// }
/// assert!(folder.read_bytes_capped("../r-1.json", 4096).is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct Folder {
    fd: OwnedFd,
    path: PathBuf,
    noatime: Noatime,
}

impl StateDir {
    /// Opens the directory `dir` for reading many of its files by name
    /// (see [`Folder`]), or `None` when there is no directory there. No
    /// symlink below the root is followed, as for every read.
    ///
    /// # Errors
    ///
    /// [`Error::Symlink`] when `dir` or a directory on the way is a symlink;
    /// [`Error::NotADirectory`] when something else stands there;
    /// [`Error::Io`] when it cannot be opened.
    pub fn folder(&self, dir: &StatePath) -> Result<Option<Folder>> {
        let path = dir.as_path();
        let mode = rustix::fs::Mode::empty();
        let file = match self.openat2_beneath(path, DIR_FLAGS, mode, Self::open_dir_checked) {
            // `O_DIRECTORY` meets a symlink as "not a directory": say which.
            Err(Error::NotADirectory { .. }) if is_symlink(path) => {
                return Err(Error::Symlink {
                    path: path.to_owned(),
                });
            }
            other => other?.map_err(|e| Error::io("open directory", path, e.into()))?,
        };
        Ok(file.map(|f| Folder {
            fd: OwnedFd::from(f),
            path: path.to_owned(),
            noatime: self.inner.noatime.clone(),
        }))
    }

    /// The fallback of [`StateDir::folder`]: checks each directory on the
    /// way, then opens the last without following it.
    fn open_dir_checked(&self, path: &Path) -> Result<Option<File>> {
        if !self.dir_there(path)? {
            return Ok(None);
        }
        match rustix::fs::open(path, DIR_FLAGS, rustix::fs::Mode::empty()) {
            Ok(fd) => Ok(Some(File::from(fd))),
            Err(rustix::io::Errno::NOENT) => Ok(None),
            // `dir_there` refused a symlink already: this is one put there since.
            Err(rustix::io::Errno::NOTDIR) if is_symlink(path) => Err(Error::Symlink {
                path: path.to_owned(),
            }),
            Err(rustix::io::Errno::NOTDIR) => Err(Error::NotADirectory {
                path: path.to_owned(),
            }),
            Err(e) => Err(Error::open_nofollow("open directory", path, e.into())),
        }
    }
}

/// Whether `path` is a symlink itself (for naming a failed open's cause).
fn is_symlink(path: &Path) -> bool {
    fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink())
}

impl Folder {
    /// Opens `name` (a checked segment) in this folder for reading.
    fn open(&self, name: &str) -> Result<rustix::io::Result<OwnedFd>> {
        let mode = rustix::fs::Mode::empty();
        self.noatime
            .open(|flags| Ok(rustix::fs::openat(&self.fd, name, flags, mode)))
    }

    /// Reads the file `name` in this folder as
    /// [`StateDir::read_bytes_capped`] reads a path, bounded by `cap`, with
    /// the file's [`Stat`]: `Missing` when no such name is there, a
    /// `Corrupt` outcome for a file over `cap` or one that is not a regular
    /// file.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidId`] (kind `path segment`) when `name` is not one
    /// safe path segment, by the rules of [`StatePath::join`] (so never a
    /// dot-name or a path); [`Error::Symlink`] when `name` is a symlink;
    /// [`Error::Io`] for other failures.
    pub fn read_bytes_capped(&self, name: &str, cap: u64) -> Result<ReadOutcome<(Vec<u8>, Stat)>> {
        StatePath::check_segment(name)?;
        let path = self.path.join(name);
        match self.open(name)? {
            Ok(fd) => read_open_file_stat(File::from(fd), &path, cap),
            Err(rustix::io::Errno::NOENT) => Ok(ReadOutcome::Missing),
            Err(e) => Err(Error::open_nofollow("open", &path, e.into())),
        }
    }

    /// Reads the file `name` in this folder into `buf` (emptied first), as
    /// [`Folder::read_bytes_capped`] reads it, without the [`Stat`]: for a
    /// walk that reads every file of a folder and needs only the bytes,
    /// reusing one buffer. A file read whole by its first read is never
    /// stat-ed, which spares a system call for each file of such a walk.
    ///
    /// That first read asks for 16 KiB or more, and when it returns less,
    /// the bytes are the whole file: a read of a regular file returns less
    /// than asked only at its end. Every Linux filesystem keeps that rule
    /// but a FUSE filesystem mounted with `direct_io`, whose daemon may
    /// return less; a file read there could come back cut short.
    ///
    /// `Value(())` means `buf` holds the file's bytes; after any other
    /// outcome, or an error, it holds nothing.
    ///
    /// ```
    /// use chipset_store::{Channel, ReadOutcome, StateDir};
    /// let tmp = tempfile::tempdir()?;
    /// let state = StateDir::open(tmp.path())?;
    /// let dir = state.channel(Channel::new("reviews"));
    /// state.write_json(&dir.join("r-1.json")?, &serde_json::json!({"ok": true}))?;
    ///
    /// let folder = state.folder(&dir)?.expect("the directory is there");
    /// let mut buf = Vec::new();
    /// for name in state.list(&dir)? {
    ///     if let ReadOutcome::Value(()) = folder.read_into(&name, 4096, &mut buf)? {
    ///         let value: serde_json::Value = serde_json::from_slice(&buf)?;
    ///         assert_eq!(value["ok"], true);
    ///     }
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`Folder::read_bytes_capped`].
    pub fn read_into(&self, name: &str, cap: u64, buf: &mut Vec<u8>) -> Result<ReadOutcome<()>> {
        buf.clear();
        StatePath::check_segment(name)?;
        let path = || self.path.join(name);
        match self.open(name)? {
            Ok(fd) => read_open_into(fd, &path, cap, buf),
            Err(rustix::io::Errno::NOENT) => Ok(ReadOutcome::Missing),
            Err(e) => Err(Error::open_nofollow("open", &path(), e.into())),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::super::tests::two_ways_fixture;
    use super::*;
    use crate::read::{CorruptReason, Corruption};

    fn value(read: ReadOutcome<(Vec<u8>, Stat)>) -> Vec<u8> {
        match read {
            ReadOutcome::Value((bytes, stat)) => {
                assert!(stat.is_file());
                bytes
            }
            other => panic!("not a value: {other:?}"),
        }
    }

    /// A folder reads its files by name as a read by path does: the bytes
    /// and stat of a file, `Missing` for a name not there, a typed error for
    /// a symlink, and a corrupt outcome for a file over the cap or not a
    /// regular file (a FIFO does not block the read).
    #[test]
    fn a_folder_reads_its_files_by_name_as_a_path_read_does() {
        let (_tmp, state, hooks) = two_ways_fixture();
        let folder = state.folder(&hooks).unwrap().expect("the folder is there");
        let read = folder.read_bytes_capped("a.json", 64).unwrap();
        let by_path = state
            .read_bytes_capped(&hooks.join("a.json").unwrap(), 64)
            .unwrap();
        assert_eq!(read, by_path);
        assert_eq!(value(read), b"{}");
        assert_eq!(
            folder.read_bytes_capped("missing.json", 64).unwrap(),
            ReadOutcome::Missing
        );
        assert!(matches!(
            folder.read_bytes_capped("link.json", 64),
            Err(Error::Symlink { path }) if path == hooks.join_static("link.json").as_path()
        ));
        assert_eq!(
            folder.read_bytes_capped("a.json", 1).unwrap(),
            ReadOutcome::Corrupt(Corruption {
                path: hooks.join_static("a.json").into_path_buf(),
                reason: CorruptReason::TooLarge { size: 2, cap: 1 },
            })
        );
        crate::test_support::make_fifo(hooks.join_static("fifo.json"));
        // On a thread, so a read that blocks on the FIFO fails the test
        // instead of hanging it.
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || tx.send(folder.read_bytes_capped("fifo.json", 64).unwrap()));
        let read = rx
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("the read of a FIFO blocked");
        assert!(matches!(
            read,
            ReadOutcome::Corrupt(Corruption {
                reason: CorruptReason::NotARegularFile,
                ..
            })
        ));
    }

    /// A name is one safe segment, by `StatePath::join`'s rules: never a
    /// path, a parent, or a dot-name (the store's own temps, locks and
    /// quarantine). Nothing is opened for one.
    #[test]
    fn a_folder_refuses_a_name_that_is_not_one_safe_segment() {
        let (_tmp, state, hooks) = two_ways_fixture();
        std::fs::write(state.root().join("top.json"), "{}").unwrap();
        let quarantine = hooks.as_path().join(".quarantine");
        std::fs::create_dir(&quarantine).unwrap();
        std::fs::write(quarantine.join("q.json"), "{}").unwrap();
        let folder = state.folder(&hooks).unwrap().unwrap();
        for name in [
            "",
            ".",
            "..",
            "../top.json",
            "sub/a.json",
            ".quarantine",
            ".a.json.1.tmp",
            "a\u{7}.json",
        ] {
            match folder.read_bytes_capped(name, 64) {
                Err(Error::InvalidId { kind, value, .. }) => {
                    assert_eq!((kind, value.as_str()), ("path segment", name));
                }
                other => panic!("{name:?}: {other:?}"),
            }
        }
    }

    /// The folder is the directory that was opened: another renamed into
    /// its place is not read through it. A missing directory has no folder;
    /// a file or a symlink in its place is a typed error, on both ways of
    /// opening it.
    #[test]
    fn a_folder_is_the_directory_it_opened() {
        let (tmp, state, hooks) = two_ways_fixture();
        let folder = state.folder(&hooks).unwrap().unwrap();
        let moved = tmp.path().join("moved");
        std::fs::rename(hooks.as_path(), &moved).unwrap();
        std::fs::create_dir(hooks.as_path()).unwrap();
        std::fs::write(hooks.join_static("b.json"), "[]").unwrap();
        assert_eq!(
            value(folder.read_bytes_capped("a.json", 64).unwrap()),
            b"{}"
        );
        assert_eq!(
            folder.read_bytes_capped("b.json", 64).unwrap(),
            ReadOutcome::Missing
        );

        let nothing = hooks.join("nothing").unwrap();
        let file = hooks.join("b.json").unwrap();
        std::fs::create_dir(state.root().join("real")).unwrap();
        symlink(state.root().join("real"), hooks.join_static("dirlink")).unwrap();
        let link = hooks.join("dirlink").unwrap();
        // `mail` is a symlink to the directory that holds the root: refused
        // as the folder, and on the way to one.
        let the_link = state.root_path().join("mail").unwrap();
        let through_link = the_link.join("state").unwrap();
        assert!(state.folder(&nothing).unwrap().is_none());
        assert!(matches!(
            state.folder(&file),
            Err(Error::NotADirectory { .. })
        ));
        let got = state.folder(&link);
        assert!(matches!(got, Err(Error::Symlink { .. })), "{got:?}");
        assert!(state.open_dir_checked(nothing.as_path()).unwrap().is_none());
        assert!(state.open_dir_checked(hooks.as_path()).unwrap().is_some());
        assert!(matches!(
            state.open_dir_checked(file.as_path()),
            Err(Error::NotADirectory { .. })
        ));
        assert!(matches!(
            state.open_dir_checked(link.as_path()),
            Err(Error::Symlink { .. })
        ));
        for via in [&the_link, &through_link] {
            let got = state.folder(via);
            assert!(
                matches!(got, Err(Error::Symlink { .. })),
                "{via:?}: {got:?}"
            );
            let got = state.open_dir_checked(via.as_path());
            assert!(
                matches!(got, Err(Error::Symlink { .. })),
                "{via:?}: {got:?}"
            );
        }
    }

    /// The root is a folder too (a layout that keeps its files at the top,
    /// as `Mail::in_folder` does), on both ways of opening it, and `stat`
    /// sees it.
    #[test]
    fn the_root_is_a_folder() {
        let (_tmp, state, _hooks) = two_ways_fixture();
        std::fs::write(state.root().join("top.json"), "{}").unwrap();
        let root = state.root_path();
        let folder = state.folder(&root).unwrap().expect("the root is there");
        assert_eq!(
            value(folder.read_bytes_capped("top.json", 64).unwrap()),
            b"{}"
        );
        assert!(state.open_dir_checked(root.as_path()).unwrap().is_some());
        assert!(state.stat(&root).unwrap().is_some_and(|s| s.is_dir()));
    }

    /// What `read_into` found for `name`: the buffer's bytes for a value,
    /// else the outcome (the buffer then empty).
    fn read_into(folder: &Folder, name: &str, cap: u64, buf: &mut Vec<u8>) -> ReadOutcome<Vec<u8>> {
        let read = folder.read_into(name, cap, buf).unwrap();
        if !matches!(read, ReadOutcome::Value(())) {
            assert!(buf.is_empty(), "{name}: {read:?} left {} bytes", buf.len());
        }
        read.map(|()| buf.clone())
    }

    /// `read_into` finds what `read_bytes_capped` finds, through one buffer
    /// reused from file to file: a file's bytes (small, empty, and larger
    /// than its first read, before and after a smaller one), `Missing`, a
    /// typed error for a symlink, a file over the cap (within the first
    /// read, and beyond it), and a directory or a FIFO as not a regular
    /// file, even a FIFO that holds bytes (a `pread` of one fails), never
    /// blocking. After anything but a value, the buffer holds nothing.
    #[test]
    fn read_into_finds_what_read_bytes_finds() {
        let (_tmp, state, hooks) = two_ways_fixture();
        let at = |name: &str| hooks.join_static("a.json").with_file_name(name);
        let big: Vec<u8> = (0..40_000u32).map(|i| b'a' + (i % 26) as u8).collect();
        std::fs::write(at("big.json"), &big).unwrap();
        std::fs::write(at("empty.json"), "").unwrap();
        std::fs::create_dir(at("dir.json")).unwrap();
        crate::test_support::make_fifo(at("fifo.json"));
        // Held open for writing (read-write: no reader is needed to open it
        // so) with bytes in it, for as long as the test runs.
        let writer = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(at("fifo.json"))
            .unwrap();
        std::io::Write::write_all(&mut &writer, b"{}").unwrap();
        let folder = state.folder(&hooks).unwrap().unwrap();
        let mut buf = b"left from before".to_vec();
        for (name, cap) in [
            ("a.json", 64),
            ("big.json", 1 << 20),
            ("a.json", 64),
            ("empty.json", 64),
            ("missing.json", 64),
            ("a.json", 1),
            ("big.json", 20_000),
            ("dir.json", 64),
        ] {
            let by_bytes = folder.read_bytes_capped(name, cap).unwrap().map(|(b, _)| b);
            assert_eq!(read_into(&folder, name, cap, &mut buf), by_bytes, "{name}");
        }
        assert_eq!(
            read_into(&folder, "big.json", 1 << 20, &mut buf),
            ReadOutcome::Value(big)
        );
        assert!(matches!(
            folder.read_into("link.json", 64, &mut buf),
            Err(Error::Symlink { .. })
        ));
        assert!(buf.is_empty());
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            tx.send(read_into(&folder, "fifo.json", 64, &mut buf))
        });
        let read = rx
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("the read of a FIFO blocked");
        assert!(
            matches!(
                read,
                ReadOutcome::Corrupt(Corruption {
                    reason: CorruptReason::NotARegularFile,
                    ..
                })
            ),
            "{read:?}"
        );
        drop(writer);
    }

    /// The read system calls this thread has made (`syscr` of
    /// `/proc/thread-self/io`), read twice around `f`: how many `f` made,
    /// besides the first reading's own.
    fn reads_around(f: impl FnOnce()) -> u64 {
        let syscr = || {
            let io = std::fs::read_to_string("/proc/thread-self/io").unwrap();
            let line = io.lines().find(|l| l.starts_with("syscr:")).unwrap();
            line["syscr:".len()..].trim().parse::<u64>().unwrap()
        };
        let before = syscr();
        f();
        syscr() - before
    }

    /// A file that one read shows whole is read by that one read and never
    /// again: the stat and the read that `read_bytes_capped` makes are
    /// skipped. An empty file, which that read cannot tell from a file
    /// that is not a regular one, takes the second way, so the count tells
    /// the ways apart.
    #[test]
    fn a_file_read_whole_by_one_read_is_read_once() {
        let (_tmp, state, hooks) = two_ways_fixture();
        let empty = hooks.join_static("a.json").with_file_name("empty.json");
        std::fs::write(&empty, "").unwrap();
        let folder = state.folder(&hooks).unwrap().unwrap();
        let mut buf = Vec::new();
        let none = reads_around(|| {});
        let small = reads_around(|| {
            assert_eq!(
                read_into(&folder, "a.json", 64, &mut buf),
                ReadOutcome::Value(b"{}".to_vec())
            );
        });
        let empty = reads_around(|| {
            assert_eq!(
                read_into(&folder, "empty.json", 64, &mut buf),
                ReadOutcome::Value(Vec::new())
            );
        });
        assert_eq!((small - none, empty - none), (1, 2));
    }

    /// One folder is read from several threads at once.
    #[test]
    fn a_folder_is_read_from_many_threads() {
        let (_tmp, state, hooks) = two_ways_fixture();
        for i in 0..16 {
            std::fs::write(
                hooks
                    .join_static("a.json")
                    .with_file_name(format!("f{i}.json")),
                i.to_string(),
            )
            .unwrap();
        }
        let folder = state.folder(&hooks).unwrap().unwrap();
        std::thread::scope(|s| {
            for i in 0..16 {
                let folder = &folder;
                s.spawn(move || {
                    let read = folder.read_bytes_capped(&format!("f{i}.json"), 64).unwrap();
                    assert_eq!(value(read), i.to_string().into_bytes());
                });
            }
        });
    }
}
