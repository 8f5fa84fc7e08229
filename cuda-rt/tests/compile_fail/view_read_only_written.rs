// A read-only view has no write operations.
use cuda_rt::{DeviceBuffer, DeviceMemory, DeviceMemoryMut, Stream};

fn main() -> cuda_rt::Result<()> {
    let stream = Stream::new()?;
    let buffer = DeviceBuffer::<u32>::zeroed(8)?;
    let mut view = buffer.slice(0..4)?;
    view.set_bytes_async(&stream, 0)
}
