//! The pool on a server only: none yet.
