// Device memory a graph uses cannot be freed while the executable graph exists.
use cuda_rt::{CaptureMode, DeviceBuffer, Stream};

fn main() -> cuda_rt::Result<()> {
    let mut stream = Stream::new()?;
    let mut buffer = DeviceBuffer::<u32>::new(4)?;
    let exec = stream
        .capture(CaptureMode::Global, |c| c.set_bytes(&c.bind_mut(&mut buffer), 0))?
        .instantiate()?;
    drop(buffer);
    cuda_rt::scope(|s| s.launch_graph(&stream, &exec))
}
