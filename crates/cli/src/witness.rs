//! `chipset witness run`: [`chipset_loop::Witness`] ticks from a shell,
//! until SIGTERM or SIGINT.
//!
//! The signals only set a flag (signal-hook's `flag::register`, the one
//! async-signal-safe thing to do); the loop checks it between ticks and
//! every 50 ms of the pause, so a tick in progress finishes (its intents
//! written, its log line appended) and the command exits 0 within one
//! pause slice. A line on stderr after the first tick says it is running
//! (the signals are handled from then on). Each action is printed as it happens: one line of text, or
//! with `--json` one JSON object per line (a stream of documents rather
//! than one, since the command runs until stopped).

use std::io::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use chipset_loop::{Witness, WitnessAction, WitnessConfig};

use crate::Ctx;
use crate::cli::WitnessCommand;
use crate::error::{CliError, Result};
use crate::output::{self, Output};
use crate::view::Stopped;

/// How often the pause between ticks looks at the stop flag.
const SLICE: Duration = Duration::from_millis(50);

/// Runs one witness command.
pub(crate) fn run(ctx: &Ctx, command: WitnessCommand, json: bool) -> Result<Output> {
    match command {
        WitnessCommand::Run {
            every,
            me,
            dispatcher,
            stall_after,
            nudge_interval,
            grace,
        } => {
            let defaults = WitnessConfig::default();
            let config = WitnessConfig {
                stall_threshold: stall_after.unwrap_or(defaults.stall_threshold),
                nudge_interval: nudge_interval.unwrap_or(defaults.nudge_interval),
                grace: grace.unwrap_or(defaults.grace),
                ..defaults
            };
            let stop = Arc::new(AtomicBool::new(false));
            for signal in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
                signal_hook::flag::register(signal, Arc::clone(&stop)).map_err(|e| {
                    CliError::refused(format!("cannot handle signal {signal}: {e}"))
                })?;
            }
            let witness = Witness::new(
                ctx.chipset.channels(),
                me.clone(),
                dispatcher.clone(),
                config,
            );
            let mut ticks = 0u64;
            let mut actions = 0u64;
            while !stop.load(Ordering::Relaxed) {
                for action in witness.tick()? {
                    actions += 1;
                    let line = if json {
                        output::json(&action).to_string()
                    } else {
                        describe(&action)
                    };
                    say(&line);
                }
                ticks += 1;
                if ticks == 1 {
                    // On stderr, in both modes: stdout holds only the actions (and,
                    // with --json, only JSON lines). It is printed once the signals
                    // are handled and the first tick is done.
                    let _ = writeln!(
                        std::io::stderr(),
                        "chipset: witness {me} watching every {} (escalations to {dispatcher}); \
                     SIGTERM or SIGINT stops it",
                        every_text(every)
                    );
                }
                // A pause too long for an `Instant` lasts until a signal.
                let until = Instant::now().checked_add(every);
                while !stop.load(Ordering::Relaxed) && until.is_none_or(|u| Instant::now() < u) {
                    let left = until.map_or(SLICE, |u| u.saturating_duration_since(Instant::now()));
                    std::thread::sleep(SLICE.min(left));
                }
            }
            let text = format!(
                "witness {me} stopped after {} ({})\n",
                output::plural(usize::try_from(ticks).unwrap_or(usize::MAX), "tick"),
                output::plural(usize::try_from(actions).unwrap_or(usize::MAX), "action")
            );
            let view = Stopped {
                stopped: true,
                ticks,
                actions,
            };
            Ok(Output::new(text, output::json(&view)).compact())
        }
    }
}

/// The pause as typed back: milliseconds under a second, else as a short duration.
fn every_text(every: Duration) -> String {
    if every < Duration::from_secs(1) {
        format!("{}ms", every.as_millis())
    } else {
        output::short_duration(every)
    }
}

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    // A closed pipe is not worth stopping the witness for.
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// One line for an action: its tag and its fields.
fn describe(action: &WitnessAction) -> String {
    let doc = output::json(action);
    let tag = doc["action"].as_str().unwrap_or("action").to_owned();
    let fields: Vec<String> = doc
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(k, _)| *k != "action")
        .map(|(k, v)| match v {
            serde_json::Value::String(s) => format!("{k}={s}"),
            other => format!("{k}={other}"),
        })
        .collect();
    format!("{tag} {}", fields.join(" "))
}
