// Two executable graphs cannot both write one buffer (their launches could race).
use cuda_rt::{CaptureMode, DeviceBuffer, Stream};

fn main() -> cuda_rt::Result<()> {
    let mut stream = Stream::new()?;
    let mut buffer = DeviceBuffer::<u32>::new(4)?;
    let first = stream
        .capture(CaptureMode::Global, |c| c.set_bytes(&c.bind_mut(&mut buffer), 1))?
        .instantiate()?;
    let second = stream
        .capture(CaptureMode::Global, |c| c.set_bytes(&c.bind_mut(&mut buffer), 2))?
        .instantiate()?;
    let other = Stream::new()?;
    cuda_rt::scope(|s| {
        s.launch_graph(&stream, &first)?;
        s.launch_graph(&other, &second)
    })
}
