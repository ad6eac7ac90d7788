//! The dashboard over HTTP: pages, updates, and bad requests.
