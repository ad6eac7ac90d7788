//! `chipset serve` in a real browser: Debian's chromium, headless, driven
//! through chromedriver's WebDriver protocol (plain JSON over HTTP, spoken
//! here over a `TcpStream`: one test needs no HTTP client crate). The page
//! shows the agents of the peer fixtures, then a message sent by `chipset
//! mail send` within 2 s without a reload, with no console error; and in
//! the work pool's view an item posted by `chipset work post`, the same way.
//!
//! With `CHIPSET_DASHBOARD_SCREENSHOT=PATH` it also saves a PNG of the page
//! there (`scripts/screenshot.sh` refreshes `docs/images/dashboard.png`).

#![allow(
    clippy::print_stderr,
    reason = "the test reports the latencies it measured"
)]

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::Env;

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

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A WebDriver session on a chromedriver of its own.
struct Browser {
    driver: SocketAddr,
    session: String,
    _process: Kill,
    _profile: tempfile::TempDir,
}

impl Browser {
    fn start() -> Browser {
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
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "chromedriver did not start"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let profile = tempfile::tempdir().unwrap();
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

    fn cmd(&self, method: &str, what: &str, body: Option<&Value>) -> Value {
        let path = format!("/session/{}/{what}", self.session);
        let answer = call(self.driver, method, &path, body);
        if answer["value"]["error"].is_string() {
            panic!("{method} {what}: {answer}");
        }
        answer["value"].clone()
    }

    fn script(&self, script: &str) -> Value {
        self.cmd(
            "POST",
            "execute/sync",
            Some(&json!({"script": script, "args": []})),
        )
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

fn chromium() -> &'static str {
    ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .expect("chromium is installed (apt-get install chromium chromium-driver)")
}

/// Starts `chipset serve` on a free loopback port; returns its address.
fn serve(env: &Env) -> (Kill, SocketAddr) {
    let mut child = env
        .command(&["serve", "--addr", "127.0.0.1:0", "--rescan", "30s"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let child = Kill(child);
    let mut line = String::new();
    BufReader::new(stderr).read_line(&mut line).unwrap();
    let addr = line
        .trim()
        .strip_prefix("chipset: dashboard at http://")
        .and_then(|a| a.strip_suffix('/'))
        .unwrap_or_else(|| panic!("no address: {line:?}"))
        .parse()
        .unwrap();
    (child, addr)
}

#[test]
fn the_dashboard_shows_a_fixture_state_and_a_new_message_live() {
    let env = Env::new();
    let peers = chipset_testkit::peer_fixtures();
    chipset_testkit::copy_dir(
        &peers.join("nubos-pilot/messages"),
        &env.root().join("mail"),
    );
    std::fs::create_dir_all(env.root().join("hooks")).unwrap();
    std::fs::copy(
        peers.join("tibsfox/hooks/active.json"),
        env.root().join("hooks/polecat-alpha.json"),
    )
    .unwrap();
    let (_server, addr) = serve(&env);
    let browser = Browser::start();

    let started = Instant::now();
    browser.cmd(
        "POST",
        "url",
        Some(&json!({"url": format!("http://{addr}/?view=agents&row=np-executor")})),
    );
    eprintln!("the page loaded in {:?}", started.elapsed());
    let text = browser.script("return document.body.innerText;");
    let text = text.as_str().unwrap();
    for agent in ["np-critic", "np-executor", "polecat-alpha"] {
        assert!(text.contains(agent), "{agent} is not shown:\n{text}");
    }
    assert!(text.contains("STALLED"), "{text}");
    browser.script("window.chipsetMarker = 42; return null;");

    let run = env.run(&[
        "mail",
        "send",
        "--from",
        "np-critic",
        "--to",
        "np-executor",
        "--kind",
        "notify",
        "--task",
        "M005-S007-T0002",
        "--subject",
        "seen-in-the-browser",
        "--body",
        "live",
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    let sent = Instant::now();
    loop {
        let text = browser.script("return document.getElementById('live').innerText;");
        if text.as_str().unwrap().contains("seen-in-the-browser") {
            break;
        }
        assert!(
            sent.elapsed() < Duration::from_secs(2),
            "the message is not shown within 2 s:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    eprintln!("the message showed after {:?}", sent.elapsed());
    let marker = browser.script("return window.chipsetMarker;");
    assert_eq!(marker, json!(42), "the page was not reloaded");
    let errors = browser.console_errors();
    assert!(errors.is_empty(), "console errors: {errors:?}");

    if let Some(path) = std::env::var_os("CHIPSET_DASHBOARD_SCREENSHOT") {
        let png = browser.cmd("GET", "screenshot", None);
        std::fs::write(path, base64(png.as_str().unwrap())).unwrap();
    }

    // The work pool's view: an item posted from a shell shows live.
    browser.cmd(
        "POST",
        "url",
        Some(&json!({"url": format!("http://{addr}/?view=pool")})),
    );
    browser.script("window.chipsetMarker = 43; return null;");
    // Half a search typed, with the focus in the box, as the update lands.
    browser.script(
        "var q = document.querySelector('input[name=q]'); q.focus(); q.value = 'Seen in'; \
         return null;",
    );
    let run = env.run(&[
        "work",
        "post",
        "--agent",
        "np-critic",
        "--id",
        "w-browser",
        "--priority",
        "1",
        "Seen in the pool",
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    let posted = Instant::now();
    loop {
        let text = browser.script("return document.getElementById('live').innerText;");
        let text = text.as_str().unwrap();
        if text.contains("Seen in the pool") {
            assert!(
                text.contains("w-browser") && text.contains("ready"),
                "{text}"
            );
            break;
        }
        assert!(
            posted.elapsed() < Duration::from_secs(2),
            "the posted item is not shown within 2 s:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    eprintln!("the posted item showed after {:?}", posted.elapsed());
    let marker = browser.script("return window.chipsetMarker;");
    assert_eq!(marker, json!(43), "the page was not reloaded");
    let typed = browser.script(
        "var q = document.querySelector('input[name=q]'); \
         return [q.value, document.activeElement === q];",
    );
    assert_eq!(
        typed,
        json!(["Seen in", true]),
        "the update wiped the search box"
    );
    let errors = browser.console_errors();
    assert!(errors.is_empty(), "console errors: {errors:?}");
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

/// SIGTERM stops `serve` while a page's event stream is open: the stream
/// ends and the process exits 0, where it waited for every page to close.
#[test]
fn serve_stops_on_sigterm_with_a_page_open() {
    let env = Env::new();
    let (mut server, addr) = serve(&env);
    let mut page = TcpStream::connect(addr).unwrap();
    write!(page, "GET /events?v=0 HTTP/1.1\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut page = BufReader::new(page);
    let mut status = String::new();
    page.read_line(&mut status).unwrap();
    assert!(status.starts_with("HTTP/1.1 200"), "{status}");
    let pid = i32::try_from(server.0.id()).unwrap();
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(pid).unwrap(),
        rustix::process::Signal::TERM,
    )
    .unwrap();
    // Read to the stream's end, on a thread (keep-alive comments would
    // hold a read timeout off forever): it ends with the server.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut rest = Vec::new();
        let _ = tx.send(page.read_to_end(&mut rest).map(|_| ()));
    });
    rx.recv_timeout(Duration::from_secs(30))
        .expect("the event stream did not end")
        .unwrap();
    let started = Instant::now();
    let code = loop {
        if let Some(status) = server.0.try_wait().unwrap() {
            break status.code();
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "serve did not exit"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(code, Some(0));
}

/// With `--json`, `serve` prints where it listens (the port `:0` got) as
/// one JSON line, and a JSON document when a signal stops it; an address
/// other hosts reach without a token is refused as the dashboard's.
#[test]
fn serve_in_json_says_where_it_listens() {
    let env = Env::new();
    let mut child = env
        .command(&["--json", "serve", "--addr", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    let listening: Value = serde_json::from_str(&line).unwrap();
    let addr: SocketAddr = listening["addr"].as_str().unwrap().parse().unwrap();
    assert_ne!(addr.port(), 0);
    assert_eq!(listening["url"], format!("http://{addr}/"));
    let server = Kill(child);
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(i32::try_from(server.0.id()).unwrap()).unwrap(),
        rustix::process::Signal::TERM,
    )
    .unwrap();
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    let stopped: Value = serde_json::from_str(rest.trim()).unwrap();
    assert_eq!(stopped, json!({"stopped": true, "addr": addr.to_string()}));
    let refused = env.run(&["serve", "--addr", "0.0.0.0:0"]);
    assert_eq!(refused.code, 2, "{refused:?}");
    assert!(
        refused
            .stderr
            .contains("refusing to serve the dashboard on `0.0.0.0:0`"),
        "{}",
        refused.stderr
    );
}
