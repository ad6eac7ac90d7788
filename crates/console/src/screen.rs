//! What the operator is looking at: the view, the selected row, the search
//! and the detail pane, and how keys change them. Pure: no terminal, no
//! files, so every key is tested without either.

use crate::detail::Detail;
use crate::model::{Snapshot, View};

/// A key the screen understands (the terminal's keys, translated).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Key {
    /// A printable character.
    Char(char),
    /// Up one row.
    Up,
    /// Down one row.
    Down,
    /// Up a page.
    PageUp,
    /// Down a page.
    PageDown,
    /// The first row.
    Home,
    /// The last row.
    End,
    /// Enter: ends the search input.
    Enter,
    /// Escape: ends the search input, or clears the search.
    Esc,
    /// Backspace in the search input.
    Backspace,
    /// The next view.
    Tab,
    /// The previous view.
    BackTab,
    /// Ctrl-C: quit.
    Interrupt,
}

/// What the caller does after [`Screen::press`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Effect {
    /// Draw again.
    Redraw,
    /// The selected row changed: load its detail, then draw again.
    Select,
    /// Leave.
    Quit,
}

/// The operator's place in the views.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Screen {
    /// The view shown.
    pub view: View,
    /// The selected row in each view (an index into the filtered rows).
    selected: [usize; View::ALL.len()],
    /// The search in each view.
    filter: [String; View::ALL.len()],
    /// True while `/` input is being typed.
    pub searching: bool,
    /// The detail of the selected row, once loaded.
    pub detail: Option<Detail>,
    /// The latest failure to show on the last line (the root gone, say).
    pub error: Option<String>,
}

impl Default for Screen {
    fn default() -> Self {
        Screen::new(View::Agents)
    }
}

impl Screen {
    /// Returns a screen on `view`, nothing selected beyond the first row.
    pub fn new(view: View) -> Self {
        Screen {
            view,
            selected: [0; View::ALL.len()],
            filter: Default::default(),
            searching: false,
            detail: None,
            error: None,
        }
    }

    /// Returns the search of the view shown.
    pub fn filter(&self) -> &str {
        &self.filter[slot(self.view)]
    }

    /// Sets the search of the view shown (the dashboard's `?q=`).
    pub fn set_filter(&mut self, filter: impl Into<String>) {
        self.filter[slot(self.view)] = filter.into();
        self.selected[slot(self.view)] = 0;
    }

    /// Returns the index of the selected row among the filtered rows of
    /// `snapshot`, clamped to them.
    pub fn selected(&self, snapshot: &Snapshot) -> Option<usize> {
        let n = snapshot.table(self.view).filtered(self.filter()).len();
        (n > 0).then(|| self.selected[slot(self.view)].min(n - 1))
    }

    /// Selects the row whose key is `key`, if it is shown.
    pub fn select_key(&mut self, snapshot: &Snapshot, key: &str) -> bool {
        let rows = snapshot.table(self.view).filtered(self.filter());
        match rows.iter().position(|r| r.key == key) {
            Some(i) => {
                self.selected[slot(self.view)] = i;
                true
            }
            None => false,
        }
    }

    /// Keeps the selection on the same row (by its key) when the rows of
    /// `old` become those of `new`: rows added or removed above it do not
    /// move it to another. Returns true when that row is gone, so the row
    /// now at its place is selected (its detail must be loaded again).
    pub fn follow(&mut self, old: &Snapshot, new: &Snapshot) -> bool {
        match self.selected_key(old) {
            Some(key) => !self.select_key(new, &key),
            None => false,
        }
    }

    /// Returns the key of the selected row, if any.
    pub fn selected_key(&self, snapshot: &Snapshot) -> Option<String> {
        let i = self.selected(snapshot)?;
        let rows = snapshot.table(self.view).filtered(self.filter());
        rows.get(i).map(|r| r.key.clone())
    }

    /// Takes one key.
    pub fn press(&mut self, key: Key, snapshot: &Snapshot) -> Effect {
        if key == Key::Interrupt {
            return Effect::Quit;
        }
        if self.searching {
            let s = slot(self.view);
            match key {
                Key::Char(c) => self.filter[s].push(c),
                Key::Backspace => {
                    self.filter[s].pop();
                }
                Key::Enter => self.searching = false,
                Key::Esc => {
                    self.searching = false;
                    self.filter[s].clear();
                }
                _ => return self.step(key, snapshot),
            }
            self.selected[s] = 0;
            return Effect::Select;
        }
        match key {
            Key::Char('q') => Effect::Quit,
            Key::Char('/') => {
                self.searching = true;
                Effect::Redraw
            }
            Key::Esc if !self.filter().is_empty() => {
                let s = slot(self.view);
                self.filter[s].clear();
                Effect::Select
            }
            Key::Char(c) => match View::from_key(c) {
                Some(v) => self.show(v),
                None => match c {
                    'j' => self.step(Key::Down, snapshot),
                    'k' => self.step(Key::Up, snapshot),
                    _ => Effect::Redraw,
                },
            },
            Key::Tab | Key::BackTab => {
                let i = slot(self.view);
                let n = View::ALL.len();
                let next = if key == Key::Tab {
                    (i + 1) % n
                } else {
                    (i + n - 1) % n
                };
                self.show(View::ALL[next])
            }
            _ => self.step(key, snapshot),
        }
    }

    fn show(&mut self, view: View) -> Effect {
        self.view = view;
        self.detail = None;
        Effect::Select
    }

    fn step(&mut self, key: Key, snapshot: &Snapshot) -> Effect {
        let n = snapshot.table(self.view).filtered(self.filter()).len();
        let s = slot(self.view);
        let at = self.selected[s].min(n.saturating_sub(1));
        let page = 10;
        let to = match key {
            Key::Up => at.saturating_sub(1),
            Key::Down => (at + 1).min(n.saturating_sub(1)),
            Key::PageUp => at.saturating_sub(page),
            Key::PageDown => (at + page).min(n.saturating_sub(1)),
            Key::Home => 0,
            Key::End => n.saturating_sub(1),
            _ => return Effect::Redraw,
        };
        self.selected[s] = to;
        if to == at {
            Effect::Redraw
        } else {
            Effect::Select
        }
    }
}

fn slot(view: View) -> usize {
    View::ALL
        .iter()
        .position(|v| *v == view)
        .unwrap_or_default()
}
