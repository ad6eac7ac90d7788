//! A page in a real browser, for the dashboard's end-to-end tests:
//! Debian's chromium, headless, driven through chromedriver's WebDriver
//! protocol (plain JSON over HTTP, spoken here over a `TcpStream`, so no
//! HTTP client crate is needed).
//!
//! [`Browser::start`] runs a chromedriver of its own on a free loopback
//! port and opens a session on it; the session is closed and chromedriver
//! killed when the [`Browser`] is dropped. Its methods cover what the
//! tests do with a page: [`open`](Browser::open) a URL, run a
//! [`script`](Browser::script) (or [`wait_for`](Browser::wait_for) one to
//! return true), [`find`](Browser::find) an element and move the mouse
//! with [`pointer`](Browser::pointer) actions, run a script in every page
//! before the page's own ([`add_init_script`](Browser::add_init_script)),
//! read the [`console_errors`](Browser::console_errors), take a
//! [`screenshot`](Browser::screenshot); [`cmd`](Browser::cmd) sends any
//! other WebDriver command.
//!
//! A machine without chromium or chromedriver fails the test that starts
//! a browser, with a panic that says what to install: these tests are
//! never skipped.
//!
//! ```no_run
//! use chipset_testkit::browser::Browser;
//! let browser = Browser::start();
//! browser.open("http://127.0.0.1:8080/");
//! let title = browser.script("return document.title;");
//! assert_eq!(title, "chipset");
//! ```

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::PATIENT;

/// The flags this machine's chromium needs (no sandbox as root, nothing
/// fetched in the background).
pub const FLAGS: [&str; 8] = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
];

/// The WebDriver name of an element reference's key.
pub const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// A child process killed (and reaped) when dropped: the browser's
/// chromedriver, or a server a test starts for it to open.
#[derive(Debug)]
pub struct Kill(pub Child);

impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A WebDriver session on a chromedriver of its own, in a fresh profile,
/// with a 1280×800 window and the browser's console logged.
#[derive(Debug)]
pub struct Browser {
    driver: SocketAddr,
    session: String,
    _process: Kill,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// Starts chromedriver on a free loopback port and opens a session in
    /// headless chromium with [`FLAGS`].
    ///
    /// # Panics
    ///
    /// When chromedriver or chromium is not installed, chromedriver does
    /// not answer within [`PATIENT`], or no session opens.
    pub fn start() -> Browser {
        let port = free_port();
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
            assert!(start.elapsed() < PATIENT, "chromedriver did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        let profile = tempfile::tempdir().expect("a temporary profile folder");
        let mut args: Vec<String> = FLAGS.iter().map(|f| (*f).to_owned()).collect();
        args.push(format!("--user-data-dir={}", profile.path().display()));
        args.push("--window-size=1280,800".to_owned());
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": chromium(), "args": args},
            "goog:loggingPrefs": {"browser": "ALL"},
        }}});
        let answer = call(driver, "POST", "/session", Some(&caps));
        let session = answer["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {answer}"))
            .to_owned();
        Browser {
            driver,
            session,
            _process: process,
            _profile: profile,
        }
    }

    /// Sends the session command `method /session/{id}/{what}` with `body`;
    /// returns the answer's `value`.
    ///
    /// # Panics
    ///
    /// When chromedriver cannot be reached or answers with an error.
    pub fn cmd(&self, method: &str, what: &str, body: Option<&Value>) -> Value {
        let path = format!("/session/{}/{what}", self.session);
        let answer = call(self.driver, method, &path, body);
        if answer["value"]["error"].is_string() {
            panic!("{method} {what}: {answer}");
        }
        answer["value"].clone()
    }

    /// Opens `url` in the window and waits until the page has loaded.
    ///
    /// # Panics
    ///
    /// As [`cmd`](Browser::cmd).
    pub fn open(&self, url: &str) {
        self.cmd("POST", "url", Some(&json!({ "url": url })));
    }

    /// Runs `script`, a function body, in the page; returns what it returns.
    ///
    /// # Panics
    ///
    /// As [`cmd`](Browser::cmd), and when the script throws.
    pub fn script(&self, script: &str) -> Value {
        self.cmd(
            "POST",
            "execute/sync",
            Some(&json!({"script": script, "args": []})),
        )
    }

    /// Runs `script` until it returns true.
    ///
    /// # Panics
    ///
    /// As [`script`](Browser::script), and when it has not returned true
    /// within [`PATIENT`] (the message names `what`).
    pub fn wait_for(&self, what: &str, script: &str) {
        let start = Instant::now();
        while self.script(script) != json!(true) {
            assert!(start.elapsed() < PATIENT, "{what}: not within {PATIENT:?}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Runs `source` in every page opened from now on, before the page's
    /// own scripts (the DevTools command
    /// `Page.addScriptToEvaluateOnNewDocument`, through chromedriver).
    ///
    /// # Panics
    ///
    /// As [`cmd`](Browser::cmd).
    pub fn add_init_script(&self, source: &str) {
        self.cmd(
            "POST",
            "goog/cdp/execute",
            Some(&json!({
                "cmd": "Page.addScriptToEvaluateOnNewDocument",
                "params": {"source": source},
            })),
        );
    }

    /// Returns a reference to the first element that matches the CSS
    /// selector `css`: `{ELEMENT: id}`, which a pointer action takes as
    /// its `origin`.
    ///
    /// # Panics
    ///
    /// As [`cmd`](Browser::cmd), and when no element matches.
    pub fn find(&self, css: &str) -> Value {
        let element = self.cmd(
            "POST",
            "element",
            Some(&json!({"using": "css selector", "value": css})),
        );
        json!({ELEMENT: element[ELEMENT]})
    }

    /// Performs `actions`, a JSON array of WebDriver pointer actions
    /// (`pointerMove`, `pointerDown`, `pointerUp`, ...), with the mouse.
    /// A button pressed stays down until an action lifts it.
    ///
    /// # Panics
    ///
    /// As [`cmd`](Browser::cmd).
    pub fn pointer(&self, actions: Value) {
        self.cmd(
            "POST",
            "actions",
            Some(&json!({"actions": [{
                "type": "pointer",
                "id": "mouse",
                "parameters": {"pointerType": "mouse"},
                "actions": actions,
            }]})),
        );
    }

    /// Returns the browser's console lines at SEVERE (errors) logged since
    /// the last call.
    ///
    /// # Panics
    ///
    /// As [`cmd`](Browser::cmd).
    pub fn console_errors(&self) -> Vec<Value> {
        let log = self.cmd("POST", "se/log", Some(&json!({"type": "browser"})));
        log.as_array()
            .expect("the log is an array")
            .iter()
            .filter(|e| e["level"] == "SEVERE")
            .cloned()
            .collect()
    }

    /// Returns a PNG of the window.
    ///
    /// # Panics
    ///
    /// As [`cmd`](Browser::cmd).
    pub fn screenshot(&self) -> Vec<u8> {
        let png = self.cmd("GET", "screenshot", None);
        base64(png.as_str().expect("the screenshot is a string"))
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

/// Sends one HTTP request with a JSON body; returns the JSON answer.
fn call(addr: SocketAddr, method: &str, path: &str, body: Option<&Value>) -> Value {
    let mut s = TcpStream::connect(addr).expect("connect to chromedriver");
    let body = body.map(Value::to_string).unwrap_or_default();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .expect("send a request to chromedriver");
    // chromedriver may keep the connection open: read what the head says.
    let mut reader = BufReader::new(s);
    let mut length = 0;
    loop {
        let mut line = String::new();
        reader
            .read_line(&mut line)
            .expect("read chromedriver's answer");
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':')
            && k.eq_ignore_ascii_case("content-length")
        {
            length = v.trim().parse().expect("a Content-Length");
        }
    }
    let mut body = vec![0; length];
    reader
        .read_exact(&mut body)
        .expect("read chromedriver's answer");
    serde_json::from_slice(&body)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&body)))
}

/// Returns a loopback port that was free a moment ago.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free loopback port")
        .port()
}

/// Returns the path of the chromium binary.
fn chromium() -> &'static str {
    ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .expect("chromium is installed (apt-get install chromium chromium-driver)")
}

/// Decodes standard base64 (WebDriver's screenshots).
fn base64(text: &str) -> Vec<u8> {
    let value = |c: u8| -> u32 {
        match c {
            b'A'..=b'Z' => u32::from(c - b'A'),
            b'a'..=b'z' => u32::from(c - b'a') + 26,
            b'0'..=b'9' => u32::from(c - b'0') + 52,
            b'+' => 62,
            b'/' => 63,
            _ => panic!("not base64: {c}"),
        }
    };
    let bytes: Vec<u8> = text
        .bytes()
        .filter(|b| *b != b'=' && !b.is_ascii_whitespace())
        .collect();
    let mut out = Vec::with_capacity(bytes.len() * 3 / 4);
    for chunk in bytes.chunks(4) {
        let mut n = 0u32;
        for (i, c) in chunk.iter().enumerate() {
            n |= value(*c) << (18 - 6 * i);
        }
        let take = chunk.len() - 1;
        for i in 0..take {
            out.push((n >> (16 - 8 * i)) as u8);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::base64;

    #[test]
    fn base64_decodes_with_and_without_padding() {
        assert_eq!(base64("aGVsbG8="), b"hello");
        assert_eq!(base64("aGVsbG8h"), b"hello!");
        assert_eq!(base64("aGk=\n"), b"hi");
        assert_eq!(base64("+/8="), [0xfb, 0xff]);
    }
}
