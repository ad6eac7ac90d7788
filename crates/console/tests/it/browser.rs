//! The dashboard in a real browser: Debian's chromium, headless, driven
//! through chromedriver's WebDriver protocol (plain JSON over HTTP on a
//! `TcpStream`, as the CLI's dashboard test speaks it). An update must not
//! take what a person is doing on the page: a text selection in it, a
//! click in progress, the focus on a link.
//!
//! Each page counts the updates it takes: a script run before the page's
//! own (`Page.addScriptToEvaluateOnNewDocument`) keeps every `update`
//! event's data in `window.updates` once the page's handler has run.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::serve::Dashboard;
use crate::team::{id, team};

/// The flags this machine's chromium needs (no sandbox as root, nothing
/// fetched in the background).
const FLAGS: [&str; 8] = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
];

/// How long anything the page does may take here (a shared machine).
const PATIENCE: Duration = Duration::from_secs(20);

/// Counts the page's updates: wraps `EventSource`'s listeners of `update`.
const COUNT_UPDATES: &str = "window.updates = []; \
    var add = EventSource.prototype.addEventListener; \
    EventSource.prototype.addEventListener = function (type, f, o) { \
      var g = type !== 'update' ? f : function (e) { \
        f.call(this, e); window.updates.push(e.data); }; \
      return add.call(this, type, g, o); };";

/// The WebDriver name of an element reference.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// A child process killed when dropped.
struct Kill(Child);

impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Sends one HTTP request with a JSON body; returns the JSON answer.
fn call(addr: SocketAddr, method: &str, path: &str, body: Option<&Value>) -> Value {
    let mut s = TcpStream::connect(addr).unwrap();
    let body = body.map(Value::to_string).unwrap_or_default();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    // chromedriver may keep the connection open: read what the head says.
    let mut reader = BufReader::new(s);
    let mut length = 0;
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':')
            && k.eq_ignore_ascii_case("content-length")
        {
            length = v.trim().parse().unwrap();
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).unwrap();
    serde_json::from_slice(&body)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&body)))
}

/// A WebDriver session on a chromedriver of its own, whose pages count
/// their updates.
struct Browser {
    driver: SocketAddr,
    session: String,
    _process: Kill,
    _profile: tempfile::TempDir,
}

impl Browser {
    fn start() -> Browser {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let process = Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver runs (apt-get install chromium chromium-driver)");
        let process = Kill(process);
        let driver: SocketAddr = ([127, 0, 0, 1], port).into();
        let start = Instant::now();
        while TcpStream::connect(driver).is_err() {
            assert!(start.elapsed() < PATIENCE, "chromedriver did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        let profile = tempfile::tempdir().unwrap();
        let mut args: Vec<String> = FLAGS.iter().map(|f| (*f).to_owned()).collect();
        args.push(format!("--user-data-dir={}", profile.path().display()));
        args.push("--window-size=1280,800".to_owned());
        let binary = ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
            .into_iter()
            .find(|p| Path::new(p).exists())
            .expect("chromium is installed (apt-get install chromium chromium-driver)");
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": binary, "args": args},
            "goog:loggingPrefs": {"browser": "ALL"},
        }}});
        let answer = call(driver, "POST", "/session", Some(&caps));
        let session = answer["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {answer}"))
            .to_owned();
        let browser = Browser {
            driver,
            session,
            _process: process,
            _profile: profile,
        };
        browser.cmd(
            "POST",
            "goog/cdp/execute",
            Some(&json!({
                "cmd": "Page.addScriptToEvaluateOnNewDocument",
                "params": {"source": COUNT_UPDATES},
            })),
        );
        browser
    }

    fn cmd(&self, method: &str, what: &str, body: Option<&Value>) -> Value {
        let path = format!("/session/{}/{what}", self.session);
        let answer = call(self.driver, method, &path, body);
        if answer["value"]["error"].is_string() {
            panic!("{method} {what}: {answer}");
        }
        answer["value"].clone()
    }

    fn open(&self, url: &str) {
        self.cmd("POST", "url", Some(&json!({ "url": url })));
    }

    fn script(&self, script: &str) -> Value {
        self.cmd(
            "POST",
            "execute/sync",
            Some(&json!({"script": script, "args": []})),
        )
    }

    /// Runs `script` until it returns true.
    fn wait_for(&self, what: &str, script: &str) {
        let start = Instant::now();
        while self.script(script) != json!(true) {
            assert!(
                start.elapsed() < PATIENCE,
                "{what}: not within {PATIENCE:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits until the page has taken an update that shows `text`.
    fn wait_for_update(&self, text: &str) {
        self.wait_for(
            &format!("an update with {text}"),
            &format!(
                "return window.updates.some(function (d) {{ return d.includes('{text}'); }});"
            ),
        );
    }

    /// Returns `#live`'s text.
    fn live(&self) -> String {
        let text = self.script("return document.getElementById('live').innerText;");
        text.as_str().unwrap().to_owned()
    }

    /// The browser's console lines at SEVERE (errors).
    fn console_errors(&self) -> Vec<Value> {
        let log = self.cmd("POST", "se/log", Some(&json!({"type": "browser"})));
        log.as_array()
            .unwrap()
            .iter()
            .filter(|e| e["level"] == "SEVERE")
            .cloned()
            .collect()
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = call(
            self.driver,
            "DELETE",
            &format!("/session/{}", self.session),
            None,
        );
    }
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
    let browser = Browser::start();
    browser.open(&format!("http://{}/?view=agents", d.addr));
    let selected = browser.script(
        "var a = document.querySelector('#live tr[data-key=\"polecat-alpha\"] td a'); \
         var r = document.createRange(); r.selectNodeContents(a); \
         var s = window.getSelection(); s.removeAllRanges(); s.addRange(r); \
         return s.toString();",
    );
    assert_eq!(selected, json!("polecat-alpha"));

    assign(&team.chipset, "polecat-zulu");
    browser.wait_for_update("polecat-zulu");
    let selection = browser.script(
        "var s = window.getSelection(); \
         return [s.isCollapsed, s.toString(), s.anchorNode.isConnected];",
    );
    assert_eq!(
        selection,
        json!([false, "polecat-alpha", true]),
        "the update took the selection"
    );
    let text = browser.live();
    assert!(
        text.contains("polecat-alpha") && !text.contains("polecat-zulu"),
        "the update was shown under the selection:\n{text}"
    );

    // A second update while it is held: the newest is the one shown.
    assign(&team.chipset, "polecat-yankee");
    browser.wait_for_update("polecat-yankee");
    assert!(!browser.live().contains("polecat-yankee"));
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
    let browser = Browser::start();
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
    browser.wait_for_update("polecat-zulu");
    assert!(browser.live().contains("polecat-zulu"));
    let focused = browser.script(
        "var a = document.activeElement; \
         return [document.getElementById('live').contains(a), a.getAttribute('href')];",
    );
    assert_eq!(focused, json!([true, href]), "the update took the focus");

    // The button goes down on the link, an update comes, the button goes up.
    let element = browser.cmd(
        "POST",
        "element",
        Some(&json!({"using": "css selector", "value": link})),
    );
    let pointer = |actions: Value| {
        browser.cmd(
            "POST",
            "actions",
            Some(&json!({"actions": [{
                "type": "pointer",
                "id": "mouse",
                "parameters": {"pointerType": "mouse"},
                "actions": actions,
            }]})),
        );
    };
    pointer(json!([
        {"type": "pointerMove", "duration": 0, "x": 0, "y": 0,
         "origin": {ELEMENT: element[ELEMENT]}},
        {"type": "pointerDown", "button": 0},
    ]));
    assign(&team.chipset, "polecat-yankee");
    browser.wait_for_update("polecat-yankee");
    let text = browser.live();
    assert!(
        !text.contains("polecat-yankee"),
        "the update was shown under the button:\n{text}"
    );
    pointer(json!([{"type": "pointerUp", "button": 0}]));
    let start = Instant::now();
    loop {
        let url = browser.cmd("GET", "url", None);
        if url.as_str().unwrap().contains("row=polecat-beta") {
            break;
        }
        assert!(start.elapsed() < PATIENCE, "the click was lost: {url}");
        std::thread::sleep(Duration::from_millis(50));
    }
    let errors = browser.console_errors();
    assert!(errors.is_empty(), "console errors: {errors:?}");
}
