// A graph that borrows memory is launched only inside a scope, which waits for it.
use cuda_rt::{CaptureMode, DeviceBuffer, Stream};

fn main() -> cuda_rt::Result<()> {
    let mut stream = Stream::new()?;
    let mut buffer = DeviceBuffer::<u32>::new(4)?;
    let exec = stream
        .capture(CaptureMode::Global, |c| c.set_bytes(&c.bind_mut(&mut buffer), 0))?
        .instantiate()?;
    exec.launch(&stream)?;
    std::mem::forget(exec);
    drop(buffer);
    Ok(())
}
