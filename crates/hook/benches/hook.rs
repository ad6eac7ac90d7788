//! Hook benchmarks (filled in below).

fn main() {}
