//! chipset mail channel (to be built; see the issue tracker).

#![forbid(unsafe_code)]
