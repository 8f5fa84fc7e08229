// A host node's closure is called on every replay: what it borrows must outlive the graph.
use cuda_rt::{CaptureMode, Stream};
use std::sync::atomic::{AtomicUsize, Ordering};

fn main() -> cuda_rt::Result<()> {
    let mut stream = Stream::new()?;
    let graph;
    {
        let calls = AtomicUsize::new(0);
        let calls = &calls;
        graph = stream.capture(CaptureMode::Global, |c| {
            c.host_fn(move || {
                calls.fetch_add(1, Ordering::Relaxed);
            })
        })?;
    }
    let _exec = graph.instantiate()?;
    Ok(())
}
