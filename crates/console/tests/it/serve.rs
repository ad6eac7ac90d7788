//! The dashboard over HTTP: pages, updates, and bad requests.

use std::io::{BufRead as _, BufReader, ErrorKind, Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use chipset::Chipset;
use chipset_console::{Error, ServeOptions, serve};
use chipset_mcp::Token;

use crate::team::{id, team};

/// A dashboard on its own runtime, stopped when dropped.
pub(crate) struct Dashboard {
    pub(crate) addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Dashboard {
    pub(crate) fn start(chipset: Chipset, token: Option<Token>) -> Dashboard {
        Dashboard::rescanning(chipset, token, Duration::from_secs(30))
    }

    /// As [`Dashboard::start`], rescanning every `rescan`.
    pub(crate) fn rescanning(
        chipset: Chipset,
        token: Option<Token>,
        rescan: Duration,
    ) -> Dashboard {
        let (tx, rx) = std::sync::mpsc::channel();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Runtime::new().unwrap();
            let mut options = ServeOptions::new("127.0.0.1:0".parse().unwrap(), token);
            options.rescan = rescan;
            rt.block_on(serve(
                chipset,
                options,
                move |bound| tx.send(bound).unwrap(),
                async {
                    let _ = stopped.await;
                },
            ))
            .unwrap();
        });
        let addr = rx.recv_timeout(Duration::from_secs(30)).unwrap();
        Dashboard {
            addr,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// Sends one raw request; returns the status, the head and the body.
    fn get(&self, target: &str, headers: &[&str]) -> (u16, String, String) {
        self.request("GET", target, headers)
    }

    fn request(&self, method: &str, target: &str, headers: &[&str]) -> (u16, String, String) {
        let mut s = TcpStream::connect(self.addr).unwrap();
        let mut req = format!("{method} {target} HTTP/1.1\r\nConnection: close\r\n");
        if !headers.iter().any(|h| h.starts_with("Host:")) {
            req.push_str(&format!("Host: {}\r\n", self.addr));
        }
        for h in headers {
            req.push_str(h);
            req.push_str("\r\n");
        }
        req.push_str("\r\n");
        s.write_all(req.as_bytes()).unwrap();
        let mut text = String::new();
        s.read_to_string(&mut text).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        let status = head.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap();
        (status, head.to_owned(), body.to_owned())
    }
}

impl Drop for Dashboard {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[test]
fn the_page_shows_every_view_and_a_change_is_pushed() {
    let team = team();
    let d = Dashboard::start(team.chipset.clone(), None);
    let (status, head, body) = d.get("/", &[]);
    assert_eq!(status, 200, "{head}");
    assert!(
        head.contains("content-security-policy: default-src 'none'"),
        "{head}"
    );
    assert!(
        body.contains("polecat-alpha") && body.contains("STALLED"),
        "{body}"
    );
    assert!(body.contains("new EventSource"), "{body}");
    assert!(
        !body.contains("http://") && !body.contains("https://"),
        "nothing from outside"
    );
    for view in ["requests", "bus", "reminders", "leases"] {
        let (status, _, body) = d.get(&format!("/?view={view}"), &[]);
        assert_eq!(status, 200);
        assert!(body.contains("class=\"on\""), "{body}");
    }
    let (_, _, body) = d.get(
        "/?view=requests&row=1772704860000-0b6c0e3a-8d1e-4c7e-9b51-2f0b8e7d1a01",
        &[],
    );
    assert!(body.contains("The error path drops the span."), "{body}");
    let (_, _, body) = d.get("/?view=agents&q=beta", &[]);
    assert!(
        body.contains("polecat-beta") && !body.contains(">polecat-alpha<"),
        "{body}"
    );

    // The update stream: a hook assigned now is pushed within 2 s.
    let mut s = TcpStream::connect(d.addr).unwrap();
    write!(
        s,
        "GET /events?view=agents&v=0 HTTP/1.1\r\nHost: {}\r\n\r\n",
        d.addr
    )
    .unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut reader = BufReader::new(s);
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    assert!(line.contains("200"), "{line}");
    std::thread::sleep(Duration::from_millis(300));
    let start = Instant::now();
    team.chipset
        .hooks()
        .assign(
            &id("polecat-zulu"),
            "bd-9".parse().unwrap(),
            "New work",
            None,
        )
        .unwrap();
    loop {
        line.clear();
        if reader.read_line(&mut line).unwrap() == 0 {
            panic!("the stream ended");
        }
        if line.starts_with("data:") && line.contains("polecat-zulu") {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(2),
            "not pushed within 2 s"
        );
    }
}

#[test]
fn bad_requests_get_a_clear_4xx_and_nothing_leaks() {
    let team = team();
    let d = Dashboard::start(team.chipset.clone(), None);
    let cases: &[(&str, &str, &[&str], u16)] = &[
        ("GET", "/../../etc/passwd", &[], 404),
        ("GET", "/static/..%2F..%2Fetc%2Fpasswd", &[], 404),
        ("GET", "/?view=../../etc/passwd", &[], 400),
        ("GET", "/?view=agents&row=..%2F..%2Fetc%2Fpasswd", &[], 400),
        ("GET", "/events?view=nope", &[], 400),
        ("POST", "/", &[], 405),
        ("GET", "/", &["Host: evil.example:8377"], 403),
    ];
    for (method, target, headers, want) in cases {
        let (status, head, body) = d.request(method, target, headers);
        assert_eq!(status, *want, "{method} {target}: {head}\n{body}");
        assert!(!body.contains("root:"), "{body}");
        assert!(!body.is_empty(), "{method} {target}: says why");
    }
    // A search of 10,000 characters is cut, not refused.
    let (status, _, _) = d.get(&format!("/?q={}", "x".repeat(10_000)), &[]);
    assert_eq!(status, 200);
}

#[test]
fn a_token_is_required_when_set_and_traded_for_a_cookie() {
    let team = team();
    let token = Token::new("s3cret-token").unwrap();
    let d = Dashboard::start(team.chipset.clone(), Some(token));
    let (status, head, body) = d.get("/", &[]);
    assert_eq!(status, 401, "{head}");
    assert!(!body.contains("polecat"), "{body}");
    let (status, _, body) = d.get("/", &["Authorization: Bearer wrong"]);
    assert_eq!(status, 401);
    assert!(!body.contains("s3cret"), "{body}");
    let (status, _, _) = d.get("/?token=wrong", &[]);
    assert_eq!(status, 401);
    let (status, _, body) = d.get("/", &["Authorization: Bearer s3cret-token"]);
    assert_eq!(status, 200);
    assert!(body.contains("polecat-alpha"));
    let (status, head, _) = d.get("/?view=bus&token=s3cret-token", &[]);
    assert_eq!(status, 303, "{head}");
    let head = head.to_lowercase();
    assert!(head.contains("location: /?view=bus\r\n"), "{head}");
    // The cookie holds the token in hex: a token may hold `;`.
    let hex: String = "s3cret-token".bytes().map(|b| format!("{b:02x}")).collect();
    assert!(
        head.contains(&format!("set-cookie: chipset-token={hex}; httponly")),
        "{head}"
    );
    let (status, _, _) = d.get("/", &[&format!("Cookie: chipset-token={hex}")]);
    assert_eq!(status, 200);
    let (status, _, _) = d.get("/", &["Cookie: chipset-token=s3cret-token"]);
    assert_eq!(status, 401, "the token itself is no cookie");
    // `//host/` would send the browser to that host: one slash stays.
    let (status, head, _) = d.get("//evil.example/?token=s3cret-token", &[]);
    assert_eq!(status, 303, "{head}");
    assert!(
        head.to_lowercase()
            .contains("location: /evil.example/?\r\n"),
        "{head}"
    );
}

/// A token with `;` (a cookie's separator) still trades for a cookie
/// that brings it back whole.
#[test]
fn a_token_with_a_separator_survives_the_cookie() {
    let team = team();
    let d = Dashboard::start(team.chipset.clone(), Some(Token::new("ab;cd+ef").unwrap()));
    let (status, head, _) = d.get("/?token=ab%3Bcd%2Bef", &[]);
    assert_eq!(status, 303, "{head}");
    let cookie = head
        .lines()
        .find_map(|l| {
            l.to_lowercase()
                .strip_prefix("set-cookie: ")
                .map(str::to_owned)
        })
        .expect("a cookie");
    let value = cookie.split(';').next().unwrap();
    let (status, _, body) = d.get("/", &[&format!("Cookie: {value}")]);
    assert_eq!(status, 200, "{body}");
}

#[test]
fn another_address_without_a_token_is_refused_before_binding() {
    let team = team();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let options = ServeOptions::new("0.0.0.0:0".parse().unwrap(), None);
    let err = rt
        .block_on(serve(
            team.chipset.clone(),
            options,
            |_| panic!("bound"),
            async {},
        ))
        .unwrap_err();
    assert!(
        matches!(err, Error::OpenWithoutToken { addr } if addr.port() == 0),
        "{err:?}"
    );
    assert!(
        err.to_string()
            .starts_with("refusing to serve the dashboard on `0.0.0.0:0`")
    );
}

/// The search box sits outside what the updates replace, and a page's
/// update stream asks for the very row the page shows: none when it shows
/// none, and a row not in the table stays that row (it never turns into
/// the first row's detail).
#[test]
fn updates_keep_the_search_box_and_the_row_the_page_shows() {
    let team = team();
    let d = Dashboard::start(team.chipset.clone(), None);
    let (_, _, body) = d.get("/", &[]);
    let form = body.find("<form").expect("a search box");
    let live = body.find("id=\"live\"").unwrap();
    assert!(form < live, "the search box is outside #live");
    let stream = |body: &str| {
        let at = body.find("new EventSource(\"").unwrap() + "new EventSource(\"".len();
        body[at..body[at..].find('"').unwrap() + at].to_owned()
    };
    assert!(!stream(&body).contains("row="), "{}", stream(&body));
    let (_, _, body) = d.get("/?view=agents&row=nobody", &[]);
    let url = stream(&body);
    assert!(url.contains("row=nobody"), "{url}");
    assert!(!body.contains("class=\" sel\""), "no other row is marked");

    // The first update (the page's version is not the server's) shows the
    // same row's detail, and carries no search box.
    let mut s = TcpStream::connect(d.addr).unwrap();
    write!(
        s,
        "GET /events?view=agents&row=nobody&v=999 HTTP/1.1\r\nHost: {}\r\n\r\n",
        d.addr
    )
    .unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut reader = BufReader::new(s);
    let mut line = String::new();
    loop {
        line.clear();
        assert!(reader.read_line(&mut line).unwrap() > 0, "the stream ended");
        if line.starts_with("data:") && line.contains("<h3>") {
            break;
        }
    }
    assert!(line.contains("nobody"), "{line}");
    assert!(!line.contains("polecat-alpha</h3>"), "{line}");
    assert!(!line.contains("<form"), "{line}");
}

/// With the root gone every rescan reads the same failure over the last
/// snapshot: the page gets that fragment once, not again at each rescan
/// (an update would take a person's text selection).
#[test]
fn a_fragment_already_sent_is_not_sent_again() {
    let team = team();
    let rescan = Duration::from_millis(200);
    let d = Dashboard::rescanning(team.chipset.clone(), None, rescan);
    let mut s = TcpStream::connect(d.addr).unwrap();
    write!(
        s,
        "GET /events?view=agents&v=999 HTTP/1.1\r\nHost: {}\r\n\r\n",
        d.addr
    )
    .unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut reader = BufReader::new(s);
    let mut line = String::new();
    // The first update: the page's version is not the server's.
    while !line.starts_with("data:") {
        line.clear();
        assert!(reader.read_line(&mut line).unwrap() > 0, "the stream ended");
    }
    // Moved away in one step (the server writes under it as it reads).
    let root = team.chipset.state().root();
    std::fs::rename(root, root.with_extension("gone")).unwrap();
    loop {
        line.clear();
        assert!(reader.read_line(&mut line).unwrap() > 0, "the stream ended");
        if line.starts_with("data:") && line.contains("class=\"problem\">error:") {
            break;
        }
    }
    // Ten rescans later, nothing more came.
    let window = rescan * 10;
    reader.get_ref().set_read_timeout(Some(window)).unwrap();
    let start = Instant::now();
    let mut more = None;
    while more.is_none() && start.elapsed() < window {
        line.clear();
        match reader.read_line(&mut line) {
            Ok(0) => break,
            Ok(_) => more = line.starts_with("event:").then(|| line.clone()),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => break,
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(more, None, "sent again");
}
