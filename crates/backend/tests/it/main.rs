//! chipset-backend's integration tests: one conformance suite run against
//! the directory and PostgreSQL from the same bodies, and the PostgreSQL
//! fault tests. PostgreSQL runs happen when `CHIPSET_TEST_PG` names a
//! server (a URL); without it those tests say so and pass.

mod claim;
mod cluster;
mod conformance;
mod faults;
mod netns;
mod server;
mod support;
mod tls;
mod transact;

/// The entry of every child process the tests start (see
/// `chipset_testkit::spawn`): acts out its role, or checks that it is not
/// a child.
#[test]
fn child_entry() {
    match chipset_testkit::child_role() {
        Some(role) => support::act(&role),
        None => assert!(std::env::var(chipset_testkit::ROLE_ENV).is_err()),
    }
}
