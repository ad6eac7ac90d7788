//! `chipset top`'s drawing: a [`Screen`] over a [`Snapshot`] into a
//! ratatui [`Frame`]. Any backend draws it: the terminal's, or ratatui's
//! `TestBackend` in the snapshot tests.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style, Stylize as _};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph, Row as TableRow, Table, TableState, Wrap};

use chipset_mcp::view::one_line;

use crate::model::{Mark, Snapshot, View};
use crate::screen::Screen;

/// The widest a column is drawn before its cells are cut.
const MAX_COLUMN: usize = 48;

/// Draws `screen` over `snapshot` into the whole of `frame`.
pub fn draw(frame: &mut Frame<'_>, screen: &Screen, snapshot: &Snapshot) {
    let [head, tabs, body, foot] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(1),
        Constraint::Min(4),
        Constraint::Length(1),
    ])
    .areas(frame.area());
    let table = snapshot.table(screen.view);
    frame.render_widget(
        Line::from(vec![
            Span::styled(" chipset top ", Style::new().bold().reversed()),
            Span::raw(format!(
                " {}{}  at {}",
                snapshot.root.display(),
                snapshot
                    .mail
                    .as_ref()
                    .map_or_else(String::new, |m| format!("  mail {}", m.display())),
                snapshot.at
            )),
        ]),
        head,
    );
    frame.render_widget(tab_line(screen, snapshot), tabs);
    let detail_height = if body.height >= 16 {
        body.height * 2 / 5
    } else {
        0
    };
    let [list, detail] =
        Layout::vertical([Constraint::Min(3), Constraint::Length(detail_height)]).areas(body);
    draw_table(frame, screen, snapshot, list);
    if detail_height > 0 {
        draw_detail(frame, screen, table.problems.as_slice(), detail);
    }
    // Without the detail pane its problem lines would go unseen: the
    // footer counts them.
    let summary = match table.problems.len() {
        n if n > 0 && detail_height == 0 => format!(
            "! {n} unreadable (a taller window lists them); {}",
            table.summary
        ),
        _ => table.summary.clone(),
    };
    frame.render_widget(foot_line(screen, &summary), foot);
}

fn tab_line(screen: &Screen, snapshot: &Snapshot) -> Line<'static> {
    let mut spans = vec![Span::raw(" ")];
    for v in View::ALL {
        let label = format!("[{}] {} {}", v.key(), v.title(), snapshot.table(v).count());
        let style = if v == screen.view {
            Style::new().bold().reversed()
        } else {
            Style::new()
        };
        spans.push(Span::styled(label, style));
        spans.push(Span::raw("  "));
    }
    Line::from(spans)
}

fn draw_table(frame: &mut Frame<'_>, screen: &Screen, snapshot: &Snapshot, area: Rect) {
    let view = screen.view;
    let rows = snapshot.table(view).filtered(screen.filter());
    let columns = view.columns();
    let mut widths: Vec<usize> = columns.iter().map(|c| c.chars().count()).collect();
    for r in &rows {
        for (w, c) in widths.iter_mut().zip(&r.cells) {
            *w = (*w).max(c.chars().count()).min(MAX_COLUMN);
        }
    }
    let last = widths.len().saturating_sub(1);
    let constraints: Vec<Constraint> = widths
        .iter()
        .enumerate()
        .map(|(i, w)| {
            if i == last {
                Constraint::Min(0)
            } else {
                Constraint::Length(u16::try_from(*w).unwrap_or(u16::MAX))
            }
        })
        .collect();
    let header = TableRow::new(columns.iter().copied()).style(Style::new().bold());
    let body: Vec<TableRow<'_>> = rows
        .iter()
        .map(|r| {
            let style = match r.mark {
                Mark::Alert => Style::new().fg(Color::Red),
                Mark::Warn => Style::new().fg(Color::Yellow),
                _ => Style::new(),
            };
            TableRow::new(r.cells.iter().map(String::as_str)).style(style)
        })
        .collect();
    let title = if screen.filter().is_empty() {
        format!(" {} ", view.title())
    } else {
        format!(
            " {} ({} of {} match /{}) ",
            view.title(),
            rows.len(),
            snapshot.table(view).rows.len(),
            screen.filter()
        )
    };
    let empty = rows.is_empty();
    let widget = Table::new(body, constraints)
        .header(header)
        .block(Block::bordered().title(title))
        .row_highlight_style(Style::new().add_modifier(Modifier::REVERSED))
        .highlight_symbol("▶ ");
    let mut state = TableState::default().with_selected(screen.selected(snapshot));
    frame.render_stateful_widget(widget, area, &mut state);
    if empty && area.height > 3 {
        let inner = Rect {
            x: area.x + 2,
            y: area.y + 2,
            width: area.width.saturating_sub(4),
            height: 1,
        };
        frame.render_widget(Line::from("(nothing here)").italic(), inner);
    }
}

fn draw_detail(frame: &mut Frame<'_>, screen: &Screen, problems: &[String], area: Rect) {
    let mut lines: Vec<Line<'_>> = problems
        .iter()
        .map(|p| Line::styled(format!("! {}", one_line(p)), Style::new().fg(Color::Red)))
        .collect();
    let title = match &screen.detail {
        Some(d) => {
            lines.extend(d.lines.iter().map(|l| Line::raw(l.as_str())));
            format!(" {} ", d.title)
        }
        None => " Detail ".to_owned(),
    };
    frame.render_widget(
        Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .block(Block::bordered().title(title)),
        area,
    );
}

fn foot_line(screen: &Screen, summary: &str) -> Line<'static> {
    if let Some(e) = &screen.error {
        return Line::styled(
            format!(" error: {e} (showing the last view; q quits)"),
            Style::new().fg(Color::Red).bold(),
        );
    }
    if screen.searching {
        return Line::from(vec![
            Span::styled(" /", Style::new().bold()),
            Span::raw(format!("{}▏ (Enter keeps, Esc clears)", screen.filter())),
        ]);
    }
    let keys: Vec<String> = View::ALL.iter().map(|v| v.key().to_string()).collect();
    Line::from(vec![
        Span::raw(format!(" {}  ", one_line(summary))),
        Span::styled(
            format!("↑↓ select  / search  {} views  q quit", keys.join(" ")),
            Style::new().fg(Color::DarkGray),
        ),
    ])
}

/// Draws `screen` over `snapshot` on a `width` × `height` test backend
/// and returns the text, one line per row with trailing blanks cut: what
/// `chipset top --once` prints and the docs keep.
pub fn text(screen: &Screen, snapshot: &Snapshot, width: u16, height: u16) -> String {
    let backend = ratatui::backend::TestBackend::new(width, height);
    let Ok(mut terminal) = ratatui::Terminal::new(backend) else {
        return String::new();
    };
    if terminal.draw(|f| draw(f, screen, snapshot)).is_err() {
        return String::new();
    }
    let buffer = terminal.backend().buffer();
    let mut out = String::new();
    for y in 0..buffer.area.height {
        let mut line = String::new();
        for x in 0..buffer.area.width {
            line.push_str(buffer[(x, y)].symbol());
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}
