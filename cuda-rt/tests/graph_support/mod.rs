//! What the suites of GPU-side graph control (conditional nodes, device-side launches) share:
//! one test at a time, streams for thread-local captures, the one-thread launch, and a launch
//! of an executable that waits for it.

use cuda_rt::prelude::*;
use cuda_rt::GraphExec;
use std::sync::Mutex;

/// Tests run one at a time: a failing graph defers errors that another test's synchronize
/// could take.
static SERIAL: Mutex<()> = Mutex::new(());

pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// A non-blocking stream, for thread-local captures.
pub fn stream() -> Stream {
    Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap()
}

/// One block of one thread, for the kernels that set conditions or launch graphs.
pub fn one() -> LaunchConfig {
    LaunchConfig::for_items(1, 1)
}

/// `exec` launched on `stream` in a scope, which returns when the launch has finished.
pub fn launch(stream: &Stream, exec: &GraphExec<'_>) {
    cuda_rt::scope(|s| s.launch_graph(stream, exec)).unwrap();
}
