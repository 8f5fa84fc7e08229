// A graph replays its memory: the memory must outlive the graph.
use cuda_rt::{CaptureMode, DeviceBuffer, Stream};

fn main() -> cuda_rt::Result<()> {
    let mut stream = Stream::new()?;
    let graph = {
        let mut buffer = DeviceBuffer::<u32>::new(4)?;
        stream.capture(CaptureMode::Global, |c| c.set_bytes(&c.bind_mut(&mut buffer), 0))?
    };
    let _exec = graph.instantiate()?;
    Ok(())
}
