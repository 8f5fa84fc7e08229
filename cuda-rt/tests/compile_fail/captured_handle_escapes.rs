// Memory bound into one capture cannot be used by another graph.
use cuda_rt::{CaptureMode, DeviceBuffer, Stream};

fn main() -> cuda_rt::Result<()> {
    let mut stream = Stream::new()?;
    let mut buffer = DeviceBuffer::<u32>::new(4)?;
    let mut escaped = None;
    let _graph = stream.capture(CaptureMode::Global, |c| {
        escaped = Some(c.bind_mut(&mut buffer));
        Ok(())
    })?;
    Ok(())
}
