//! Model-based property test (below).
