//! TLS against a real server (a cluster of the test's own with a
//! throwaway CA, `PG_TEST_TLS=1`): `require`, `verify-ca` and
//! `verify-full` connect, and `verify-full` refuses a host name the
//! certificate does not carry. Runs when `CHIPSET_TEST_PG` is set (so
//! PostgreSQL is installed).

use chipset_backend::{Backend, Error, PgBackend};

use crate::cluster::OwnCluster;
use crate::support::pg_url;

/// Returns whether the server says this session is encrypted.
fn encrypted(url: &str) -> bool {
    let backend = PgBackend::open(url).unwrap();
    // A read proves the session works; the server's own view says TLS.
    backend.now().unwrap();
    let mut c = postgres::Client::connect(
        &url.replace("sslmode=require", "sslmode=disable"),
        postgres::NoTls,
    )
    .unwrap();
    let row = c
        .query_one(
            "SELECT count(*) FROM pg_stat_ssl s JOIN pg_stat_activity a ON a.pid = s.pid \
             WHERE s.ssl AND a.application_name = 'chipset'",
            &[],
        )
        .unwrap();
    drop(backend);
    row.get::<_, i64>(0) > 0
}

#[test]
fn tls_modes_connect_and_verify_full_refuses_a_wrong_host_name() {
    if pg_url("tls_modes_connect_and_verify_full_refuses_a_wrong_host_name").is_none() {
        return;
    }
    let Some(cluster) = OwnCluster::start_tls() else {
        return;
    };
    let ca = cluster.root_cert();
    let ca = ca.to_str().unwrap();
    let url = &cluster.url;
    let sep = if url.contains('?') { '&' } else { '?' };
    assert!(encrypted(&format!("{url}{sep}sslmode=require")));
    PgBackend::open(&format!("{url}{sep}sslmode=verify-ca&sslrootcert={ca}"))
        .unwrap()
        .now()
        .unwrap();
    PgBackend::open(&format!("{url}{sep}sslmode=verify-full&sslrootcert={ca}"))
        .unwrap()
        .now()
        .unwrap();
    // The certificate names localhost and 127.0.0.1: the same server
    // reached under another name (libpq's `hostaddr` gives the address),
    // verify-full refuses while verify-ca, which checks no name, connects.
    let other = url.replace("@127.0.0.1:", "@wrong-name.invalid:");
    let other = format!("{other}{sep}hostaddr=127.0.0.1&sslrootcert={ca}");
    PgBackend::open(&format!("{other}&sslmode=verify-ca"))
        .unwrap()
        .now()
        .unwrap();
    let err = PgBackend::open(&format!("{other}&sslmode=verify-full")).unwrap_err();
    assert!(
        matches!(err, Error::Unreachable { .. } | Error::Server { .. }),
        "{err:?}"
    );
    // Without the CA, the throwaway certificate is not trusted.
    let err =
        PgBackend::open(&format!("{url}{sep}sslmode=verify-full&sslrootcert=system")).unwrap_err();
    assert!(
        matches!(err, Error::Unreachable { .. } | Error::Server { .. }),
        "{err:?}"
    );
}
