//! `chipset migrate`: moves a whole state between a directory and a
//! PostgreSQL server ([`chipset::migrate`]), prints one line per channel,
//! and exits 0 only when the target's counts equal the source's.

use std::path::{Path, PathBuf};

use chipset::Root;
use chipset::migrate::{Migration, Report};
use chipset::store::StateDir;
use clap::Args;

use crate::cli::Cli;
use crate::error::{CliError, Result};
use crate::output::{Cell, Output, Paint, Table, Tone};
use crate::view::Migrated;

/// `chipset migrate ...`.
#[derive(Debug, Args)]
pub(crate) struct MigrateArgs {
    /// Where to copy to: a directory (created if needed) or a server
    /// (`postgres://…`, or libpq `key=value` words; the password from
    /// PGPASSWORD or ~/.pgpass, never needed here).
    #[arg(long, value_name = "DIR|URL")]
    pub(crate) to: PathBuf,
    /// Where to copy from [default: the state root, found as every command
    /// finds it: --root, $CHIPSET_ROOT, the nearest `.chipset/state`, a
    /// nubos-pilot project's].
    #[arg(long, value_name = "DIR|URL")]
    pub(crate) from: Option<PathBuf>,
    /// Leave this channel (a folder under the root: `pool`, `loop`, …)
    /// out; may be repeated. Mail kept outside the root (a nubos-pilot
    /// project's folder, --mail-dir) is never moved: such a state needs
    /// `--skip mail`.
    #[arg(long, value_name = "CHANNEL")]
    pub(crate) skip: Vec<String>,
}

/// Whether `a` and `b` are one directory: the same device and inode when
/// both exist (symlinks and `..` resolved), else the same absolute path.
fn same_dir(a: &Path, b: &Path) -> Result<bool> {
    Ok(
        match (StateDir::stat_outside(a)?, StateDir::stat_outside(b)?) {
            (Some(a), Some(b)) => (a.dev, a.ino) == (b.dev, b.ino),
            _ => {
                matches!((std::path::absolute(a), std::path::absolute(b)), (Ok(a), Ok(b)) if a == b)
            }
        },
    )
}

/// The mail folder of the nubos-pilot project whose `.chipset/state` is
/// `root`, if `root` is one: a `.nubos-pilot` folder beside `.chipset`.
fn project_mail(root: &Path) -> Result<Option<PathBuf>> {
    let Some(project) = root
        .ends_with(StateDir::DEFAULT_ROOT)
        .then(|| root.parent().and_then(Path::parent))
        .flatten()
    else {
        return Ok(None);
    };
    let nubos = project.join(crate::NUBOS_PROJECT);
    Ok(crate::is_dir(&nubos)?.then(|| nubos.join(crate::NUBOS_MESSAGES)))
}

/// Runs `chipset migrate`.
pub(crate) fn run(cli: &Cli, args: &MigrateArgs) -> Result<Output> {
    let place = crate::locate(cli)?;
    let from = match &args.from {
        Some(from) => from.clone(),
        None => place.root.clone().expect("migrate is not a mail command"),
    };
    // A mail folder outside the root (a nubos-pilot project's, or
    // --mail-dir) is another program's too: moving its mail onto a server
    // would take it from that program, so it stays, and says so first.
    // `--from` naming the root found (however spelt) is that root, with
    // its mail folder; another nubos-pilot project's root, with that
    // project's.
    let mail_folder = match (&args.from, place.root.as_deref()) {
        (Some(from), Some(root)) if !same_dir(from, root)? => {
            cli.mail_dir.clone().or(project_mail(from)?)
        }
        _ => place.mail,
    };
    if let Some(dir) = mail_folder
        && !args.skip.iter().any(|c| c == "mail")
    {
        return Err(CliError::refused(format!(
            "mail is kept in `{}`, outside the state root, and a migration moves only the \
             root: add `--skip mail` to move the rest; the mail stays in that folder, \
             where chipset on a server will not read it",
            dir.display()
        )));
    }
    let mut migration = Migration::new(Root::parse(&from), Root::parse(&args.to));
    for channel in &args.skip {
        migration = migration.skip(channel.clone());
    }
    let report = migration.run().map_err(|e| CliError::classified(&e))?;
    let text = render(&report, Paint::detect());
    let failure = (!report.verified()).then(|| {
        CliError::refused(format!(
            "the counts on {} differ from the source's: run `chipset migrate` again, or look \
             at the channels marked differ",
            report.to
        ))
    });
    let view = Migrated {
        verified: report.verified(),
        written: report.written(),
        report,
    };
    Ok(Output::new(text, crate::output::json(&view)).with_failure(failure))
}

fn render(report: &Report, paint: Paint) -> String {
    let mut table = Table::new(&["CHANNEL", "SOURCE", "WRITTEN", "PRESENT", "TARGET", "CHECK"]);
    for line in &report.channels {
        let check = if line.verified() {
            Cell::toned("ok", Tone::Good)
        } else {
            Cell::toned("differ", Tone::Bad)
        };
        table.row(vec![
            Cell::plain(line.channel.clone()),
            Cell::plain(line.source.to_string()),
            Cell::plain(line.written.to_string()),
            Cell::plain(line.present.to_string()),
            Cell::plain(line.target.to_string()),
            check,
        ]);
    }
    let mut text = table.render(paint);
    let written = report.written();
    text.push_str(&format!(
        "{} -> {}: {} written{}\n",
        report.from,
        report.to,
        written,
        if written == 0 {
            " (the target held everything)"
        } else {
            ""
        }
    ));
    text
}
