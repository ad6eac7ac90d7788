//! The `chipset` command line (to be built; see the issue tracker).

fn main() {}
