//! `chipset serve` in a real browser: Debian's chromium, headless, driven
//! through chromedriver's WebDriver protocol by the testkit's client
//! (`chipset_testkit::browser`). The page shows the agents of the peer
//! fixtures, then a message sent by `chipset mail send` within 2 s without
//! a reload, with no console error; and in the work pool's view an item
//! posted by `chipset work post`, the same way.
//!
//! With `CHIPSET_DASHBOARD_SCREENSHOT=PATH` it also saves a PNG of the page
//! there (`scripts/screenshot.sh` refreshes `docs/images/dashboard.png`).

#![allow(
    clippy::print_stderr,
    reason = "the test reports the latencies it measured"
)]

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::process::Stdio;
use std::time::{Duration, Instant};

use chipset_testkit::browser::{Browser, Kill};
use serde_json::{Value, json};

use crate::Env;

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
    browser.open(&format!("http://{addr}/?view=agents&row=np-executor"));
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
        std::fs::write(path, browser.screenshot()).unwrap();
    }

    // The work pool's view: an item posted from a shell shows live.
    browser.open(&format!("http://{addr}/?view=pool"));
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
