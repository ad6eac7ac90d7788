//! A PostgreSQL cluster of a test's own, started with
//! `scripts/pg-test-cluster.sh`: for the tests that restart a server (the
//! shared one must not restart under the other tests) or need it on
//! another address (the network-namespace test).

const SCRIPT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../scripts/pg-test-cluster.sh"
);

/// A cluster of the test's own, stopped and removed on drop.
pub(crate) struct OwnCluster {
    dir: tempfile::TempDir,
    /// Its URL, with the password.
    pub(crate) url: String,
}

impl OwnCluster {
    /// Starts one listening on `listen` (127.0.0.1 when `None`), or says
    /// why not (no PostgreSQL binaries).
    pub(crate) fn start(listen: Option<&str>) -> Option<OwnCluster> {
        Self::start_with(listen, false)
    }

    /// Starts one on 127.0.0.1 with TLS on (the script's `PG_TEST_TLS`);
    /// its CA is at [`OwnCluster::root_cert`].
    pub(crate) fn start_tls() -> Option<OwnCluster> {
        Self::start_with(None, true)
    }

    /// Returns the CA certificate of a cluster started with TLS.
    pub(crate) fn root_cert(&self) -> std::path::PathBuf {
        self.dir.path().join("pg").join("tls").join("root.crt")
    }

    fn start_with(listen: Option<&str>, tls: bool) -> Option<OwnCluster> {
        let dir = tempfile::tempdir().unwrap();
        let mut cmd = std::process::Command::new("bash");
        cmd.args([SCRIPT, "start"])
            .env("PG_TEST_DIR", dir.path().join("pg"));
        if let Some(listen) = listen {
            cmd.env("PG_TEST_LISTEN", listen);
        }
        if tls {
            cmd.env("PG_TEST_TLS", "1");
        }
        let out = cmd.output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        if !out.status.success() && stderr.contains("not found") {
            #[allow(clippy::print_stderr, reason = "a skipped test must say so")]
            {
                eprintln!(
                    "SKIPPED: no PostgreSQL binaries to start a cluster of its own: {stderr}"
                );
            }
            return None;
        }
        assert!(out.status.success(), "cluster start failed: {stderr}");
        let url = String::from_utf8(out.stdout).unwrap().trim().to_owned();
        Some(OwnCluster { dir, url })
    }

    /// Restarts it (fast shutdown: sessions are cut).
    pub(crate) fn restart(&self) {
        let pg = self.dir.path().join("pg");
        let status = std::process::Command::new("bash")
            .args([SCRIPT, "restart", pg.to_str().unwrap()])
            .status()
            .unwrap();
        assert!(status.success(), "restart failed");
    }
}

impl Drop for OwnCluster {
    fn drop(&mut self) {
        let pg = self.dir.path().join("pg");
        let _ = std::process::Command::new("bash")
            .args([SCRIPT, "stop", pg.to_str().unwrap()])
            .status();
    }
}
