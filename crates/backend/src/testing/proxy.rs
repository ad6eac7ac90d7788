//! A TCP proxy that can cut a connection at commit: it forwards the next
//! request to the server, drops the server's answer, and closes both
//! sides, so the statement commits and the client never learns it. Or
//! it cuts the request that carries a given text (a transaction's
//! `COMMIT`). [`Proxy::for_url`] builds the proxied URL.

#![allow(clippy::disallowed_methods, reason = "a test proxy, on loopback only")]

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

/// A TCP proxy on 127.0.0.1 in front of a server, that cuts a
/// connection when told.
#[derive(Debug)]
pub struct Proxy {
    /// The port it listens on.
    pub port: u16,
    cut_next: Arc<AtomicBool>,
    cut_on: Arc<Mutex<Option<Vec<u8>>>>,
}

impl Proxy {
    /// Listens on 127.0.0.1 at a free port and forwards to `upstream`.
    pub fn start(upstream: SocketAddr) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a free port on 127.0.0.1");
        let port = listener.local_addr().expect("the bound port").port();
        let cut_next = Arc::new(AtomicBool::new(false));
        let cut_on = Arc::new(Mutex::new(None));
        let cut = (Arc::clone(&cut_next), Arc::clone(&cut_on));
        thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { return };
                let Ok(server) = TcpStream::connect(upstream) else {
                    continue;
                };
                pipe(client, server, Arc::clone(&cut.0), Arc::clone(&cut.1));
            }
        });
        Proxy {
            port,
            cut_next,
            cut_on,
        }
    }

    /// Starts a proxy to the server `url` names and returns it with the
    /// URL that connects through it (same user, password and database).
    pub fn for_url(url: &str) -> (Proxy, String) {
        use std::net::ToSocketAddrs;
        let c: postgres::Config = url.parse().unwrap();
        let host = match &c.get_hosts()[0] {
            postgres::config::Host::Tcp(h) => h.clone(),
            postgres::config::Host::Unix(p) => panic!("a TCP host, not {}", p.display()),
        };
        let port = c.get_ports().first().copied().unwrap_or(5432);
        let upstream = (host.as_str(), port)
            .to_socket_addrs()
            .unwrap()
            .next()
            .unwrap();
        let proxy = Proxy::start(upstream);
        let password = String::from_utf8(c.get_password().unwrap().to_vec()).unwrap();
        let via = format!(
            "postgres://{}:{password}@127.0.0.1:{}/{}",
            c.get_user().unwrap(),
            proxy.port,
            c.get_dbname().unwrap()
        );
        (proxy, via)
    }

    /// Cuts the connection that sends the next request carrying `text`
    /// (such as a transaction's `COMMIT`), as [`Proxy::cut_at_next_request`].
    pub fn cut_at_request_with(&self, text: &str) {
        *self.cut_on.lock().unwrap() = Some(text.as_bytes().to_vec());
    }

    /// Cuts the connection that sends the next request, after the server
    /// has it and before the client hears back.
    pub fn cut_at_next_request(&self) {
        self.cut_next.store(true, Ordering::SeqCst);
    }
}

fn pipe(
    client: TcpStream,
    server: TcpStream,
    cut_next: Arc<AtomicBool>,
    cut_on: Arc<Mutex<Option<Vec<u8>>>>,
) {
    let cutting = Arc::new(AtomicBool::new(false));
    let (mut c_read, mut s_write) = (client.try_clone().unwrap(), server.try_clone().unwrap());
    let (mut s_read, mut c_write) = (server, client);
    let cut_c2s = Arc::clone(&cutting);
    thread::spawn(move || {
        let mut buf = vec![0; 64 * 1024];
        loop {
            let n = match c_read.read(&mut buf) {
                Ok(0) | Err(_) => {
                    let _ = s_write.shutdown(Shutdown::Write);
                    return;
                }
                Ok(n) => n,
            };
            let mut cut = cut_next.swap(false, Ordering::SeqCst);
            {
                let mut on = cut_on.lock().unwrap();
                if on
                    .as_ref()
                    .is_some_and(|t| buf[..n].windows(t.len()).any(|w| w == t.as_slice()))
                {
                    *on = None;
                    cut = true;
                }
            }
            if cut {
                cut_c2s.store(true, Ordering::SeqCst);
            }
            if s_write.write_all(&buf[..n]).is_err() {
                return;
            }
            if cut {
                // Give the server time to run and commit the statement,
                // then cut both sides; its answer was never forwarded.
                thread::sleep(Duration::from_millis(300));
                let _ = c_read.shutdown(Shutdown::Both);
                let _ = s_write.shutdown(Shutdown::Both);
                return;
            }
        }
    });
    thread::spawn(move || {
        let mut buf = vec![0; 64 * 1024];
        loop {
            let n = match s_read.read(&mut buf) {
                Ok(0) | Err(_) => {
                    let _ = c_write.shutdown(Shutdown::Write);
                    return;
                }
                Ok(n) => n,
            };
            if cutting.load(Ordering::SeqCst) {
                continue;
            }
            if c_write.write_all(&buf[..n]).is_err() {
                return;
            }
        }
    });
}
