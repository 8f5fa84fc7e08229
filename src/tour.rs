//! The tour program (`cargo run --release`, binary `cuda-rt-tour`): its command line, its
//! steps, its report and its progress bars. It lives in the library so that tests reach it;
//! `src/main.rs` only parses the command line, checks for a GPU and prints.

pub mod cli;
pub mod no_gpu;
pub mod progress;
pub mod report;
