//! `chipset top`: the live operator view in the terminal, over
//! [`chipset_console`]'s model and drawing. This file owns the terminal:
//! raw mode, the alternate screen, the keys, and the loop that redraws on
//! a key or a change under the root.
//!
//! Nothing polls: one thread blocks reading keys, the console's watch
//! thread blocks on directory notifications (and wakes once per rescan),
//! and the loop blocks on both. An idle `top` wakes once per `--rescan`.

use std::sync::mpsc;

use chipset::Chipset;
use chipset_console::{Effect, Key, Loader, Screen, Snapshot, View};
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};

use crate::Ctx;
use crate::cli::TopArgs;
use crate::error::{CliError, Result};
use crate::output::Output;

/// What wakes the loop.
enum Wake {
    Key(Key),
    Redraw,
    /// A load, and whether it found anything changed under the root.
    Loaded(Box<std::result::Result<Snapshot, String>>, bool),
    /// The terminal's input ended (or failed): leave.
    InputGone(String),
    /// SIGTERM or SIGHUP: leave, giving the terminal back.
    Stop,
}

/// Runs `chipset top`.
pub(crate) fn run(ctx: &Ctx, args: &TopArgs) -> Result<Output> {
    let chipset = ctx.chipset.clone();
    let loader = Loader::new();
    // The first frame leaves out the open requests when a live view
    // follows: their first read costs what all mail costs.
    let first = match args.once {
        Some(_) => loader.load(&chipset),
        None => loader.load_quick(&chipset),
    };
    let mut snapshot = first.map_err(|e| CliError::refused(chipset_failure::chain(&e)))?;
    let mut screen = Screen::new(args.view.unwrap_or(View::Agents));
    reload_detail(&chipset, &snapshot, &mut screen);
    if let Some((width, height)) = args.once {
        let text = chipset_console::text(&screen, &snapshot, width, height);
        let frame = crate::view::TopFrame {
            width,
            height,
            lines: text.lines().map(str::to_owned).collect(),
        };
        return Ok(Output::new(text, crate::output::json(&frame)));
    }
    if !std::io::IsTerminal::is_terminal(&std::io::stdout()) {
        return Err(CliError::refused(
            "chipset top needs a terminal (--once WIDTHxHEIGHT prints one frame)",
        ));
    }
    let (tx, rx) = mpsc::channel();
    let changes = tx.clone();
    // Installed before the first frame: a SIGTERM sent as soon as the view
    // shows is handled, never left to the default action.
    on_stop_signal(tx.clone()).map_err(CliError::refused)?;
    let mut terminal = ratatui::try_init().map_err(|e| {
        ratatui::restore();
        CliError::refused(format!(
            "chipset top needs a terminal (--once WIDTHxHEIGHT prints one frame): {e}"
        ))
    })?;
    // The first frame comes before the watch is set up: on a large root,
    // setting up the notifications walks every directory. A failure after
    // it gives the terminal back first, so it prints plainly.
    let started = terminal
        .draw(|f| chipset_console::draw(f, &screen, &snapshot))
        .map_err(|e| format!("failed to draw on the terminal: {e}"))
        .and_then(|_| {
            let reader = chipset.clone();
            // The reads run on the watch thread: a slow one never blocks the keys.
            chipset_console::watch_team(&chipset, args.rescan, move |_| {
                let loaded = loader.load(&reader).map_err(|e| e.to_string());
                let fresh = loader.changed();
                changes.send(Wake::Loaded(Box::new(loaded), fresh)).is_ok()
            })
            .map_err(|e| e.to_string())
        })
        .and_then(|watch| {
            std::thread::Builder::new()
                .name("chipset-top-keys".to_owned())
                .spawn(move || read_keys(&tx))
                .map(|_| watch)
                .map_err(|e| format!("failed to start the key reader: {e}"))
        });
    let _watch = match started {
        Ok(watch) => watch,
        Err(e) => {
            ratatui::restore();
            return Err(CliError::refused(e));
        }
    };
    let outcome = (|| -> std::io::Result<Option<String>> {
        loop {
            terminal.draw(|f| chipset_console::draw(f, &screen, &snapshot))?;
            let Ok(wake) = rx.recv() else {
                return Ok(None);
            };
            let mut loaded = None;
            let mut fresh = false;
            let mut effect = Effect::Redraw;
            // Take everything that is waiting: a burst of changes is read once.
            for wake in std::iter::once(wake).chain(rx.try_iter()) {
                match wake {
                    Wake::Key(k) => match screen.press(k, &snapshot) {
                        Effect::Quit => return Ok(None),
                        Effect::Select => effect = Effect::Select,
                        _ => {}
                    },
                    Wake::Redraw => {}
                    Wake::Loaded(l, f) => {
                        loaded = Some(*l);
                        fresh |= f;
                    }
                    Wake::InputGone(why) => return Ok(Some(why)),
                    Wake::Stop => return Ok(None),
                }
            }
            match loaded {
                Some(Ok(s)) => {
                    // The selection stays on its row, wherever it moved.
                    if screen.follow(&snapshot, &s) {
                        effect = Effect::Select;
                    }
                    snapshot = s;
                    screen.error = None;
                }
                // Keep showing the last view, with the error on the last line.
                Some(Err(e)) => screen.error = Some(e),
                None => {}
            }
            // The detail (an agent's whole inbox, say) is read again only
            // when something changed: an idle rescan reads no file.
            if (fresh && screen.error.is_none()) || effect == Effect::Select {
                reload_detail(&chipset, &snapshot, &mut screen);
            }
        }
    })();
    ratatui::restore();
    match outcome {
        // Nothing to print after an interactive view, in text or JSON.
        Ok(None) => Ok(Output::streamed(|_, _| Ok(()))),
        Ok(Some(why)) => Err(CliError::refused(format!(
            "the terminal's input ended: {why}"
        ))),
        Err(e) => Err(CliError::refused(format!(
            "failed to draw on the terminal: {e}"
        ))),
    }
}

fn reload_detail(chipset: &Chipset, snapshot: &Snapshot, screen: &mut Screen) {
    screen.detail = screen
        .selected_key(snapshot)
        .map(|key| chipset_console::detail(chipset, snapshot, screen.view, &key));
}

/// Sends [`Wake::Stop`] on SIGTERM or SIGHUP (a `kill`, a closed
/// terminal window), so the view leaves the alternate screen and shows
/// the cursor again, as `q` does, instead of dying in the middle of it.
fn on_stop_signal(tx: mpsc::Sender<Wake>) -> std::result::Result<(), String> {
    let (mut read, write) = std::os::unix::net::UnixStream::pair()
        .map_err(|e| format!("failed to set up the signal handler: {e}"))?;
    for signal in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGHUP] {
        let write = write
            .try_clone()
            .map_err(|e| format!("failed to set up the signal handler: {e}"))?;
        signal_hook::low_level::pipe::register(signal, write)
            .map_err(|e| format!("cannot handle signal {signal}: {e}"))?;
    }
    std::thread::Builder::new()
        .name("chipset-top-signals".to_owned())
        .spawn(move || {
            let mut byte = [0u8; 1];
            if std::io::Read::read(&mut read, &mut byte).is_ok_and(|n| n > 0) {
                let _ = tx.send(Wake::Stop);
            }
        })
        .map(|_| ())
        .map_err(|e| format!("failed to start the signal handler: {e}"))
}

/// Reads keys until the loop is gone; blocks in between (no polling).
fn read_keys(tx: &mpsc::Sender<Wake>) {
    loop {
        let wake = match event::read() {
            Ok(Event::Key(k)) if k.kind != KeyEventKind::Release => {
                let ctrl = k.modifiers.contains(KeyModifiers::CONTROL);
                let key = match k.code {
                    KeyCode::Char('c') if ctrl => Key::Interrupt,
                    KeyCode::Char(c) => Key::Char(c),
                    KeyCode::Up => Key::Up,
                    KeyCode::Down => Key::Down,
                    KeyCode::PageUp => Key::PageUp,
                    KeyCode::PageDown => Key::PageDown,
                    KeyCode::Home => Key::Home,
                    KeyCode::End => Key::End,
                    KeyCode::Enter => Key::Enter,
                    KeyCode::Esc => Key::Esc,
                    KeyCode::Backspace => Key::Backspace,
                    KeyCode::Tab => Key::Tab,
                    KeyCode::BackTab => Key::BackTab,
                    _ => continue,
                };
                Wake::Key(key)
            }
            Ok(Event::Resize(..)) => Wake::Redraw,
            Ok(_) => continue,
            Err(e) => {
                let _ = tx.send(Wake::InputGone(e.to_string()));
                return;
            }
        };
        if tx.send(wake).is_err() {
            return;
        }
    }
}

/// Parses `WIDTHxHEIGHT` for `--once`.
pub(crate) fn parse_size(text: &str) -> std::result::Result<(u16, u16), String> {
    let (w, h) = text
        .split_once('x')
        .ok_or_else(|| format!("not a size: {text:?} (such as 120x40)"))?;
    let w: u16 = w.parse().map_err(|_| format!("not a width: {w:?}"))?;
    let h: u16 = h.parse().map_err(|_| format!("not a height: {h:?}"))?;
    if !(20..=1000).contains(&w) || !(8..=1000).contains(&h) {
        return Err(format!("{text}: from 20x8 to 1000x1000"));
    }
    Ok((w, h))
}

/// Parses a view name for `--view`.
pub(crate) fn parse_view(text: &str) -> std::result::Result<View, String> {
    View::from_name(text).ok_or_else(|| {
        format!(
            "unknown view {text:?}: use one of {}",
            View::ALL.map(View::name).join(", ")
        )
    })
}
