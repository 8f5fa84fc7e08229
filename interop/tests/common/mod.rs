//! Helpers shared by the interop tests: running a test body in a child process, and the C++
//! library `cpp/mylib` (linked statically, or loaded as a shared library with its own runtime).
#![allow(dead_code)] // each test file uses part of it

pub mod child;
pub mod mylib;
