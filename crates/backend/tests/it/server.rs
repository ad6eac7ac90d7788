//! Hostile conditions on PostgreSQL: an unreachable server, a wrong
//! password, a newer schema, settings this build cannot use. Each is a
//! clear, typed error that changes nothing.

use std::time::{Duration, Instant};

use chipset_backend::{Backend, Created, Error, PgBackend, PgOptions, SCHEMA_VERSION};

use crate::support::{drop_schema, fresh_schema, key, pg_url};

/// Rebuilds `url` with another password (and so does not print it).
pub(crate) fn with_password(url: &str, password: &str) -> String {
    let c: postgres::Config = url.parse().unwrap();
    let (host, port) = host_port(&c);
    format!(
        "postgres://{}:{password}@{host}:{port}/{}",
        c.get_user().unwrap(),
        c.get_dbname().unwrap_or("postgres")
    )
}

/// Returns the first TCP host and port of `c`.
pub(crate) fn host_port(c: &postgres::Config) -> (String, u16) {
    let host = match &c.get_hosts()[0] {
        postgres::config::Host::Tcp(h) => h.clone(),
        postgres::config::Host::Unix(p) => panic!("a TCP host, not {}", p.display()),
    };
    (host, c.get_ports().first().copied().unwrap_or(5432))
}

#[test]
fn an_unreachable_server_is_a_typed_error() {
    // Port 1 on loopback: nothing listens, the connection is refused.
    let start = Instant::now();
    let err =
        PgBackend::open("postgres://chipset:x@127.0.0.1:1/chipset?connect_timeout=3").unwrap_err();
    assert!(matches!(err, Error::Unreachable { .. }), "{err}");
    assert!(err.to_string().contains("127.0.0.1:1"), "{err}");
    assert!(start.elapsed() < Duration::from_secs(10));
}

#[test]
fn settings_this_build_cannot_use_are_refused_before_connecting() {
    let err = PgBackend::open("postgres://u@127.0.0.1:1/d?sslmode=sometimes").unwrap_err();
    assert!(matches!(err, Error::Config { .. }), "{err}");
    let err =
        PgBackend::open("postgres://u@127.0.0.1:1/d?sslmode=verify-full&sslrootcert=/nonexistent")
            .unwrap_err();
    assert!(
        matches!(err, Error::Config { .. }) && err.to_string().contains("sslrootcert"),
        "{err}"
    );
    let err = PgBackend::open_with(
        "postgres://u@127.0.0.1:1/d",
        PgOptions::with_schema("Bad; DROP"),
    )
    .unwrap_err();
    assert!(
        matches!(err, Error::InvalidName { kind: "schema", .. }),
        "{err}"
    );
}

#[test]
fn a_wrong_password_is_a_typed_error() {
    let Some(url) = pg_url("a_wrong_password_is_a_typed_error") else {
        return;
    };
    let wrong = with_password(&url, "not-the-password");
    let err = PgBackend::open(&wrong).unwrap_err();
    assert!(matches!(err, Error::AuthFailed { .. }), "{err}");
    assert!(!err.to_string().contains("not-the-password"), "{err}");
}

#[test]
fn a_newer_schema_is_refused_and_left_alone() {
    let Some(url) = pg_url("a_newer_schema_is_refused_and_left_alone") else {
        return;
    };
    let schema = fresh_schema("newer");
    let b = PgBackend::open_with(&url, PgOptions::with_schema(&schema)).unwrap();
    let k = key("hooks", "alice.json");
    assert!(matches!(b.create(&k, b"kept\n").unwrap(), Created::New(_)));
    let mut raw = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    // The schema's name is ours: lower-case letters, digits and `_`.
    let table = format!("{schema}.chipset_schema_version");
    raw.execute(
        &format!("INSERT INTO {table} (version) VALUES ($1)"),
        &[&(SCHEMA_VERSION + 1)],
    )
    .unwrap();
    let err = PgBackend::open_with(&url, PgOptions::with_schema(&schema)).unwrap_err();
    assert!(
        matches!(err, Error::SchemaTooNew { found, supported } if found == SCHEMA_VERSION + 1 && supported == SCHEMA_VERSION),
        "{err}"
    );
    assert!(err.to_string().contains("upgrade chipset"), "{err}");
    let max: i32 = raw
        .query_one(&format!("SELECT max(version) FROM {table}"), &[])
        .unwrap()
        .get(0);
    assert_eq!(max, SCHEMA_VERSION + 1);
    assert_eq!(b.read(&k).unwrap().unwrap().value, b"kept\n");
    drop_schema(&url, &schema);
}

#[test]
fn concurrent_opens_migrate_once() {
    let Some(url) = pg_url("concurrent_opens_migrate_once") else {
        return;
    };
    let schema = fresh_schema("migrate");
    let handles: Vec<_> = (0..6)
        .map(|_| {
            let (url, schema) = (url.clone(), schema.clone());
            std::thread::spawn(move || {
                PgBackend::open_with(&url, PgOptions::with_schema(schema)).map(drop)
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap().unwrap();
    }
    let mut raw = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let rows = raw
        .query(
            &format!("SELECT version FROM {schema}.chipset_schema_version ORDER BY version"),
            &[],
        )
        .unwrap();
    let versions: Vec<i32> = rows.iter().map(|r| r.get(0)).collect();
    assert_eq!(versions, (1..=SCHEMA_VERSION).collect::<Vec<_>>());
    drop_schema(&url, &schema);
}

#[test]
fn the_password_never_shows_in_debug_output() {
    let Some(url) = pg_url("the_password_never_shows_in_debug_output") else {
        return;
    };
    let c: postgres::Config = url.parse().unwrap();
    let password = String::from_utf8(c.get_password().unwrap().to_vec()).unwrap();
    let schema = fresh_schema("debug");
    let b = PgBackend::open_with(&url, PgOptions::with_schema(&schema)).unwrap();
    assert!(!format!("{b:?}").contains(&password));
    drop_schema(&url, &schema);
}
