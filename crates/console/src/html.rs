//! The dashboard's HTML: the same views as `chipset top`, server-rendered,
//! with a few inline lines of script that take the server-sent updates
//! (holding the newest while a person selects text in them).
//! Every text from the state is escaped; nothing is fetched from outside.

use std::fmt::Write as _;

use crate::detail::Detail;
use crate::model::{Mark, Snapshot, View};
use crate::screen::Screen;

const STYLE: &str = "body{font:14px/1.4 ui-monospace,monospace;margin:0;background:#111;color:#ddd}\
header{padding:.4em 1em;background:#222}header b{color:#fff}\
nav a{display:inline-block;padding:.3em .8em;color:#9cf;text-decoration:none}\
nav a.on{background:#9cf;color:#111}\
main{padding:0 1em}table{border-collapse:collapse;width:100%}\
th{text-align:left;border-bottom:1px solid #555;padding:.2em .6em}\
td{padding:.15em .6em;white-space:nowrap;max-width:40em;overflow:hidden;text-overflow:ellipsis}\
tr.warn td{color:#fc6}tr.alert td{color:#f66}tr.sel td{background:#334}\
td a{color:inherit}.problem{color:#f66}.summary{color:#aaa;margin:.5em 0}\
pre{background:#1a1a1a;padding:.6em;white-space:pre-wrap}form{display:inline}\
input{background:#222;color:#ddd;border:1px solid #555;font:inherit}";

/// The most rows a page lists: a view of 10,000 open requests would be
/// megabytes of HTML; the search narrows it.
const MAX_ROWS: usize = 500;

/// Returns the whole page for `screen` over `snapshot`, with `detail` for
/// `row`, the row the page was opened for (none: no detail pane; its
/// updates ask for the same row); `version` is the snapshot's number,
/// which the page hands back when it asks for updates (so none is missed
/// in between). The search box sits outside the part updates replace.
pub fn page(
    snapshot: &Snapshot,
    screen: &Screen,
    detail: Option<&Detail>,
    version: u64,
    row: Option<&str>,
) -> String {
    let mut out = String::with_capacity(16 * 1024);
    let view = screen.view.name();
    let _ = write!(
        out,
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width\">\
         <title>chipset · {}</title><link rel=\"icon\" href=\"data:,\">\
         <style>{STYLE}</style></head><body>\
         <header><b>chipset</b> {}{} \
         <form action=\"/\"><input type=\"hidden\" name=\"view\" value=\"{}\">\
         <input name=\"q\" placeholder=\"search this view\" value=\"{}\"></form>\
         </header><div id=\"live\">",
        esc(screen.view.title()),
        esc(&snapshot.root.display().to_string()),
        snapshot.mail.as_ref().map_or_else(String::new, |m| format!(
            " · mail {}",
            esc(&m.display().to_string())
        )),
        screen.view.name(),
        esc(screen.filter()),
    );
    // The search box is outside what the updates replace: what is typed
    // in it, and its focus, survive them.
    out.push_str(&fragment(snapshot, screen, detail, None, row));
    let query = query(screen.view, screen.filter(), None);
    // An update waits while a person selects text in #live, or holds a
    // button down (a click or a drag in progress); the newest shows once
    // the selection is cleared, or once the click has reached what it was
    // pressed on (hence the timeout: a link swapped under it loses it). A
    // press whose release never comes (a context menu, a native drag, the
    // window left) ends at that event, or at a move with no button down.
    // A link of #live that had the focus (from the keyboard) gets it back.
    let _ = write!(
        out,
        "</div><script>\"use strict\";(function(){{\
         var live=document.getElementById(\"live\"),held=null,down=false;\
         function busy(){{var s=window.getSelection();\
         return down||(!s.isCollapsed&&s.containsNode(live,true));}}\
         function show(){{if(held===null||busy())return;\
         var a=document.activeElement,h=live.contains(a)&&a.getAttribute(\"href\");\
         live.innerHTML=held;held=null;\
         if(h)[].some.call(live.querySelectorAll(\"a\"),function(l){{\
         return l.getAttribute(\"href\")===h&&(l.focus({{preventScroll:true}}),true);}});}}\
         function up(){{if(down){{down=false;setTimeout(show,0);}}}}\
         document.addEventListener(\"selectionchange\",show);\
         document.addEventListener(\"pointerdown\",function(){{down=true;}},true);\
         [\"pointerup\",\"pointercancel\",\"contextmenu\",\"dragstart\"].forEach(\
         function(t){{document.addEventListener(t,up,true);}});\
         window.addEventListener(\"blur\",up);\
         document.addEventListener(\"pointermove\",function(e){{if(!e.buttons)up();}},true);\
         var es=new EventSource(\"/events{}v={version}\");\
         es.addEventListener(\"update\",function(e){{held=e.data;show();}});}})();\
         </script><!-- view {view} --></body></html>",
        js_query(&query, row),
    );
    out
}

/// Returns the part of the page that updates: the tabs, the table and the
/// detail pane of `row` (the row the page was opened for: marked in the
/// table when it is there, never another in its place); `error` (the root
/// gone) on top.
pub(crate) fn fragment(
    snapshot: &Snapshot,
    screen: &Screen,
    detail: Option<&Detail>,
    error: Option<&str>,
    row: Option<&str>,
) -> String {
    let mut out = String::with_capacity(16 * 1024);
    if let Some(e) = error {
        let _ = write!(
            out,
            "<p class=\"problem\">error: {} (showing the last view)</p>",
            esc(e)
        );
    }
    out.push_str("<nav>");
    for v in View::ALL {
        let _ = write!(
            out,
            "<a href=\"/{}\" class=\"{}\" accesskey=\"{}\">{} {}</a>",
            query(v, "", None),
            if v == screen.view { "on" } else { "" },
            v.key(),
            v.title(),
            snapshot.table(v).count(),
        );
    }
    let _ = write!(
        out,
        "<span class=\"summary\"> updated {}</span></nav><main>",
        snapshot.at
    );
    let table = snapshot.table(screen.view);
    let _ = write!(out, "<p class=\"summary\">{}</p>", esc(&table.summary));
    for p in &table.problems {
        let _ = write!(out, "<p class=\"problem\">! {}</p>", esc(p));
    }
    out.push_str("<table><thead><tr>");
    for c in screen.view.columns() {
        let _ = write!(out, "<th>{}</th>", esc(c));
    }
    out.push_str("</tr></thead><tbody>");
    let rows = table.filtered(screen.filter());
    for r in rows.iter().take(MAX_ROWS) {
        let class = match r.mark {
            Mark::Alert => "alert",
            Mark::Warn => "warn",
            _ => "",
        };
        let sel = if row == Some(r.key.as_str()) && detail.is_some() {
            " sel"
        } else {
            ""
        };
        let _ = write!(
            out,
            "<tr class=\"{class}{sel}\" data-key=\"{}\">",
            esc(&r.key)
        );
        let href = query(screen.view, screen.filter(), Some(&r.key));
        for (i, c) in r.cells.iter().enumerate() {
            if i == 0 {
                let _ = write!(out, "<td><a href=\"/{href}\">{}</a></td>", esc(c));
            } else {
                let _ = write!(out, "<td>{}</td>", esc(c));
            }
        }
        out.push_str("</tr>");
    }
    if rows.is_empty() {
        out.push_str("<tr><td><i>(nothing here)</i></td></tr>");
    }
    if rows.len() > MAX_ROWS {
        let _ = write!(
            out,
            "<tr><td colspan=\"{}\"><i>… and {} more rows: search to narrow</i></td></tr>",
            screen.view.columns().len(),
            rows.len() - MAX_ROWS
        );
    }
    out.push_str("</tbody></table>");
    if let Some(d) = detail {
        let _ = write!(out, "<h3>{}</h3><pre>", esc(&d.title));
        for l in &d.lines {
            out.push_str(&esc(l));
            out.push('\n');
        }
        out.push_str("</pre>");
    }
    out.push_str("</main>");
    out
}

/// Returns `?view=…&q=…&row=…` for a link.
fn query(view: View, filter: &str, row: Option<&str>) -> String {
    let mut q = format!("?view={}", view.name());
    if !filter.is_empty() {
        let _ = write!(q, "&amp;q={}", percent(filter));
    }
    if let Some(r) = row {
        let _ = write!(q, "&amp;row={}", percent(r));
    }
    q
}

/// Returns the query for the update stream inside the script (no HTML
/// escapes there; the values are percent-encoded, so no quote survives).
fn js_query(query: &str, row: Option<&str>) -> String {
    let mut q = query.replace("&amp;", "&");
    if let Some(r) = row
        && !q.contains("&row=")
    {
        let _ = write!(q, "&row={}", percent(r));
    }
    q.push('&');
    q
}

/// Escapes text for HTML content and attribute values.
pub(crate) fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

/// Percent-encodes everything but unreserved characters.
pub(crate) fn percent(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// Decodes a query value (`+` is a space); malformed escapes stay as they are.
pub(crate) fn unpercent(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                (Some(h), Some(l)) => {
                    out.push(h * 16 + l);
                    i += 2;
                }
                _ => out.push(b'%'),
            },
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hex(b: u8) -> Option<u8> {
    char::from(b)
        .to_digit(16)
        .and_then(|d| u8::try_from(d).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped_and_encoded() {
        assert_eq!(
            esc("<script>\"x\"&'"),
            "&lt;script&gt;&quot;x&quot;&amp;&#39;"
        );
        assert_eq!(percent("a b/../é"), "a%20b%2F..%2F%C3%A9");
        assert_eq!(unpercent("a%20b+c%2F..%2F%C3%A9"), "a b c/../é");
        assert_eq!(unpercent("100%"), "100%");
        assert_eq!(unpercent("%zz%4"), "%zz%4");
    }
}
