//! `inbox`: listing one inbox of nubos-pilot's own files, chipset's
//! `Mail::inbox` against nubos-pilot's `inbox`, alternating, on the very
//! same files (issue 31 lists "inbox of 10,000: 2.9x" as met, to keep),
//! after one untimed listing each; then each side's first listing of the
//! same files as new mail (every file's access time set back to its
//! modification time, as a file just written has it).

use std::path::Path;
use std::time::Instant;

use chipset_mail::{Mail, MailConfig};
use chipset_store::{AgentId, StateDir};

use super::{Nubos, rotate, settle_disk};

/// `n` messages sent by nubos-pilot into one inbox of a fresh project,
/// then listed `rounds` times by each side, taking turns going first (each
/// side lists once, untimed, before the first round).
pub(crate) fn inbox_scenario(work: &Path, nubos: &mut Nubos, n: usize, rounds: usize) {
    let project = work.join("inbox-n");
    nubos.send(&project, n);
    settle_disk(work);
    let mail = Mail::in_folder(
        StateDir::open(project.join(".nubos-pilot").join("messages")).unwrap(),
        MailConfig::default(),
    );
    let executor = AgentId::new("np-executor").unwrap();
    let ask = format!("inbox {} np-executor", project.display());
    let chipset_list = || {
        let t = Instant::now();
        let listed = mail.inbox(&executor).unwrap();
        let us = t.elapsed().as_secs_f64() * 1e6;
        assert_eq!(listed.len(), n);
        us
    };
    let nubos_list = |nubos: &mut Nubos| {
        let words = nubos.ask(&ask);
        assert_eq!(
            words.get(1).map(String::as_str),
            Some(n.to_string().as_str())
        );
        Nubos::micros(&words)
    };
    chipset_list();
    nubos_list(nubos);
    let (mut c, mut p) = (Vec::new(), Vec::new());
    for r in 0..rounds {
        rotate(
            r,
            &mut [&mut || c.push(chipset_list()), &mut || {
                p.push(nubos_list(nubos))
            }],
        );
    }
    // The first listing of new mail: each listing after the files' access
    // times are set back to their modification times (what `relatime`
    // writes again on the next read) and written back.
    let inbox = project
        .join(".nubos-pilot")
        .join("messages")
        .join("inbox")
        .join("np-executor");
    let as_new = || {
        as_just_written(&inbox);
        settle_disk(work);
    };
    let (mut c_new, mut p_new) = (Vec::new(), Vec::new());
    for r in 0..rounds {
        rotate(
            r,
            &mut [
                &mut || {
                    as_new();
                    c_new.push(chipset_list());
                },
                &mut || {
                    as_new();
                    p_new.push(nubos_list(nubos));
                },
            ],
        );
    }
    let ms = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64 / 1e3;
    let range = |v: &[f64]| {
        let lo = v.iter().copied().fold(f64::INFINITY, f64::min) / 1e3;
        let hi = v.iter().copied().fold(0.0, f64::max) / 1e3;
        format!("{lo:.1}-{hi:.1}")
    };
    println!(
        "inbox {n} (nubos's files) chipset {:>8.1} ms ({})   nubos {:>8.1} ms ({})   speed vs nubos {:.2}x",
        ms(&c),
        range(&c),
        ms(&p),
        range(&p),
        ms(&p) / ms(&c)
    );
    println!(
        "inbox {n} first listing of new mail  chipset {:>8.1} ms ({})   nubos {:>8.1} ms ({})   speed vs nubos {:.2}x",
        ms(&c_new),
        range(&c_new),
        ms(&p_new),
        range(&p_new),
        ms(&p_new) / ms(&c_new)
    );
}

/// Sets every file's access time in `dir` back to its modification time,
/// as a file just written has it: the next read under `relatime` writes
/// it again (unless it opens the file with `O_NOATIME`).
#[allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    reason = "plays new mail in a nubos-pilot inbox"
)]
fn as_just_written(dir: &Path) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let modified = std::fs::metadata(&path).unwrap().modified().unwrap();
        let times = std::fs::FileTimes::new().set_accessed(modified);
        let file = std::fs::File::options().write(true).open(&path).unwrap();
        file.set_times(times).unwrap();
    }
}
