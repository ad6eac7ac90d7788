//! Integration tests for chipset-hook.
