//! The dashboard in a real browser: Debian's chromium, headless, driven
//! through chromedriver's WebDriver protocol by the testkit's client
//! (`chipset_testkit::browser`, which the CLI's dashboard test drives
//! too). An update must not take what a person is doing on the page: a
//! text selection in it, a click in progress, the focus on a link.
//!
//! Each page counts the updates it takes: a script run before the page's
//! own (`Page.addScriptToEvaluateOnNewDocument`) keeps every `update`
//! event's data in `window.updates` once the page's handler has run.

use std::time::{Duration, Instant};

use chipset_testkit::PATIENT;
use chipset_testkit::browser::Browser;
use serde_json::json;

use crate::serve::Dashboard;
use crate::team::{id, team};

/// Counts the page's updates: wraps `EventSource`'s listeners of `update`.
const COUNT_UPDATES: &str = "window.updates = []; \
    var add = EventSource.prototype.addEventListener; \
    EventSource.prototype.addEventListener = function (type, f, o) { \
      var g = type !== 'update' ? f : function (e) { \
        f.call(this, e); window.updates.push(e.data); }; \
      return add.call(this, type, g, o); };";

/// Starts a browser whose pages count their updates.
fn start() -> Browser {
    let browser = Browser::start();
    browser.add_init_script(COUNT_UPDATES);
    browser
}

/// Waits until the page has taken an update that shows `text`.
fn wait_for_update(browser: &Browser, text: &str) {
    browser.wait_for(
        &format!("an update with {text}"),
        &format!("return window.updates.some(function (d) {{ return d.includes('{text}'); }});"),
    );
}

/// Returns `#live`'s text.
fn live(browser: &Browser) -> String {
    let text = browser.script("return document.getElementById('live').innerText;");
    text.as_str().unwrap().to_owned()
}

/// Gives `agent` a hook: a new row in the agents view.
fn assign(chipset: &chipset::Chipset, agent: &str) {
    chipset
        .hooks()
        .assign(&id(agent), "bd-9".parse().unwrap(), "New work", None)
        .unwrap();
}

/// Text selected in the table stays selected, and the page as it was,
/// while updates come; the newest shows once the selection is cleared.
#[test]
fn a_text_selection_holds_updates_until_it_is_cleared() {
    let team = team();
    let d = Dashboard::start(team.chipset.clone(), None);
    let browser = start();
    browser.open(&format!("http://{}/?view=agents", d.addr));
    let selected = browser.script(
        "var a = document.querySelector('#live tr[data-key=\"polecat-alpha\"] td a'); \
         var r = document.createRange(); r.selectNodeContents(a); \
         var s = window.getSelection(); s.removeAllRanges(); s.addRange(r); \
         return s.toString();",
    );
    assert_eq!(selected, json!("polecat-alpha"));

    assign(&team.chipset, "polecat-zulu");
    wait_for_update(&browser, "polecat-zulu");
    let selection = browser.script(
        "var s = window.getSelection(); \
         return [s.isCollapsed, s.toString(), s.anchorNode.isConnected];",
    );
    assert_eq!(
        selection,
        json!([false, "polecat-alpha", true]),
        "the update took the selection"
    );
    let text = live(&browser);
    assert!(
        text.contains("polecat-alpha") && !text.contains("polecat-zulu"),
        "the update was shown under the selection:\n{text}"
    );

    // A second update while it is held: the newest is the one shown.
    assign(&team.chipset, "polecat-yankee");
    wait_for_update(&browser, "polecat-yankee");
    assert!(!live(&browser).contains("polecat-yankee"));
    browser.script("window.getSelection().removeAllRanges(); return null;");
    browser.wait_for(
        "the held update shown once the selection is cleared",
        "var t = document.getElementById('live').innerText; \
         return t.includes('polecat-zulu') && t.includes('polecat-yankee');",
    );
    let errors = browser.console_errors();
    assert!(errors.is_empty(), "console errors: {errors:?}");
}

/// A link focused from the keyboard is focused again after an update; a
/// button held down on a row's link holds the updates, and the click
/// still opens that row.
#[test]
fn the_focus_and_a_click_in_progress_survive_updates() {
    let team = team();
    let d = Dashboard::start(team.chipset.clone(), None);
    let browser = start();
    browser.open(&format!("http://{}/?view=agents", d.addr));
    let link = "#live tr[data-key=\"polecat-beta\"] td a";
    let href = browser.script(&format!(
        "var a = document.querySelector('{link}'); a.focus(); \
         return document.activeElement.getAttribute('href');"
    ));
    assert!(
        href.as_str().unwrap().contains("row=polecat-beta"),
        "{href}"
    );

    assign(&team.chipset, "polecat-zulu");
    wait_for_update(&browser, "polecat-zulu");
    assert!(live(&browser).contains("polecat-zulu"));
    let focused = browser.script(
        "var a = document.activeElement; \
         return [document.getElementById('live').contains(a), a.getAttribute('href')];",
    );
    assert_eq!(focused, json!([true, href]), "the update took the focus");

    // The button goes down on the link, an update comes, the button goes up.
    let element = browser.find(link);
    browser.pointer(json!([
        {"type": "pointerMove", "duration": 0, "x": 0, "y": 0, "origin": element},
        {"type": "pointerDown", "button": 0},
    ]));
    assign(&team.chipset, "polecat-yankee");
    wait_for_update(&browser, "polecat-yankee");
    let text = live(&browser);
    assert!(
        !text.contains("polecat-yankee"),
        "the update was shown under the button:\n{text}"
    );
    browser.pointer(json!([{"type": "pointerUp", "button": 0}]));
    let start = Instant::now();
    loop {
        let url = browser.cmd("GET", "url", None);
        if url.as_str().unwrap().contains("row=polecat-beta") {
            break;
        }
        assert!(start.elapsed() < PATIENT, "the click was lost: {url}");
        std::thread::sleep(Duration::from_millis(50));
    }
    let errors = browser.console_errors();
    assert!(errors.is_empty(), "console errors: {errors:?}");
}

/// A press whose release never comes (a right-click's menu, a native
/// drag, the window left, the button let go outside the page) does not
/// hold the updates for good: each of those ends it.
#[test]
fn a_press_without_a_release_stops_holding_updates() {
    let team = team();
    let d = Dashboard::start(team.chipset.clone(), None);
    let browser = start();
    browser.open(&format!("http://{}/?view=agents", d.addr));
    let ends = [
        (
            "contextmenu",
            "document.dispatchEvent(new MouseEvent('contextmenu', {bubbles: true}));",
        ),
        (
            "dragstart",
            "document.dispatchEvent(new DragEvent('dragstart', {bubbles: true}));",
        ),
        ("blur", "window.dispatchEvent(new Event('blur'));"),
        (
            "a move with no button",
            "document.dispatchEvent(new PointerEvent('pointermove', {bubbles: true, buttons: 0}));",
        ),
    ];
    for (n, (what, end)) in ends.iter().enumerate() {
        let agent = format!("polecat-held-{n}");
        browser.script(
            "document.dispatchEvent(new PointerEvent('pointerdown', {bubbles: true, buttons: 1}));",
        );
        assign(&team.chipset, &agent);
        wait_for_update(&browser, &agent);
        let text = live(&browser);
        assert!(
            !text.contains(&agent),
            "{what}: not held under the button:\n{text}"
        );
        browser.script(end);
        browser.wait_for(
            &format!("the held update shown after {what}"),
            &format!("return document.getElementById('live').innerText.includes('{agent}');"),
        );
    }
    let errors = browser.console_errors();
    assert!(errors.is_empty(), "console errors: {errors:?}");
}
