// A pinned buffer moved into an asynchronous copy cannot be touched until it is handed back.
use cuda_rt::{DeviceBuffer, DeviceMemory, DeviceMemoryMut, PinnedBuffer, Stream};

fn main() -> cuda_rt::Result<()> {
    let stream = Stream::new()?;
    let mut device = DeviceBuffer::<u32>::new(4)?;
    let mut pinned = PinnedBuffer::<u32>::new(4)?;
    let pending = device.copy_from_pinned_async(&stream, pinned)?;
    pinned[0] = 1;
    drop(pending);
    Ok(())
}
