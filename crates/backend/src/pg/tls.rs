//! TLS to the server, as libpq's `sslmode` says: `require` encrypts
//! without checking the certificate; `verify-ca` checks it against
//! `sslrootcert`; `verify-full` also checks that it names the host.
//! `prefer` (the default) and `allow` use TLS when the server offers it.
//!
//! The client is `postgres-native-tls`, the adapter from the
//! rust-postgres repository itself, over the system's TLS library
//! (OpenSSL on Linux, as libpq uses): the same certificate handling and
//! trust store as `psql`, and no TLS stack of chipset's own to keep.

use std::path::Path;

use native_tls::{Certificate, TlsConnector};
use postgres_native_tls::MakeTlsConnector;

use super::config::Tls;
use crate::error::{Error, Result};

/// The largest root certificate file read.
const MAX_CERT: u64 = 1 << 20;

/// Returns the connector for `tls`.
pub(crate) fn connector(tls: &Tls, home: Option<&Path>) -> Result<MakeTlsConnector> {
    let mut builder = TlsConnector::builder();
    match tls.mode.as_str() {
        "verify-ca" | "verify-full" => {
            let root = tls.root_cert.clone().or_else(|| {
                let default = home?.join(".postgresql").join("root.crt");
                chipset_store::StateDir::stat_outside(&default)
                    .ok()
                    .flatten()
                    .map(|_| default)
            });
            if let Some(path) = root.filter(|p| p.as_os_str() != "system") {
                for cert in certificates(&path)? {
                    builder.add_root_certificate(cert);
                }
                builder.disable_built_in_roots(true);
            }
            if tls.mode == "verify-ca" {
                builder.danger_accept_invalid_hostnames(true);
            }
        }
        // Encrypted, not authenticated: libpq's `require` (and what
        // `prefer` gets) without a root certificate.
        _ => {
            builder.danger_accept_invalid_certs(true);
            builder.danger_accept_invalid_hostnames(true);
        }
    }
    let connector = builder.build().map_err(|e| Error::Config {
        why: format!("cannot set up TLS: {e}"),
    })?;
    Ok(MakeTlsConnector::new(connector))
}

/// Reads every PEM certificate in `path`.
fn certificates(path: &Path) -> Result<Vec<Certificate>> {
    let unreadable = |why: String| Error::Config {
        why: format!("cannot use sslrootcert `{}`: {why}", path.display()),
    };
    let bytes = chipset_store::StateDir::read_outside(path, MAX_CERT)
        .map_err(|e| unreadable(e.to_string()))?;
    let text = String::from_utf8_lossy(&bytes);
    let mut certs = Vec::new();
    let end = "-----END CERTIFICATE-----";
    let mut rest = text.as_ref();
    while let Some(start) = rest.find("-----BEGIN CERTIFICATE-----") {
        let Some(stop) = rest[start..].find(end) else {
            break;
        };
        let pem = &rest[start..start + stop + end.len()];
        certs.push(Certificate::from_pem(pem.as_bytes()).map_err(|e| unreadable(e.to_string()))?);
        rest = &rest[start + stop + end.len()..];
    }
    if certs.is_empty() {
        return Err(unreadable("no PEM certificate in it".to_owned()));
    }
    Ok(certs)
}
