// Host memory a graph copies from cannot be written while the graph exists.
use cuda_rt::{CaptureMode, DeviceBuffer, PinnedBuffer, Stream};

fn main() -> cuda_rt::Result<()> {
    let mut stream = Stream::new()?;
    let mut device = DeviceBuffer::<u32>::new(4)?;
    let mut host = PinnedBuffer::<u32>::new(4)?;
    let exec = stream
        .capture(CaptureMode::Global, |c| c.copy_to_device(&host, &c.bind_mut(&mut device)))?
        .instantiate()?;
    host[0] = 7;
    cuda_rt::scope(|s| s.launch_graph(&stream, &exec))
}
