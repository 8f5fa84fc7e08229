// A conditional node reads a condition of its own graph: a condition made by a capture is not
// one of a graph built inside it (the brands differ).
use cuda_rt::{CaptureMode, Graph, Stream};

fn main() -> cuda_rt::Result<()> {
    let mut stream = Stream::new()?;
    let _graph = stream.capture(CaptureMode::ThreadLocal, |c| {
        let outer = c.condition(0)?;
        let _inner = Graph::build(|b| b.while_loop(&[], outer, |_| Ok(())).map(drop))?;
        Ok(())
    })?;
    Ok(())
}
