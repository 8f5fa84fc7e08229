// Two mutable views of overlapping bytes cannot exist at once.
use cuda_rt::{DeviceBuffer, DeviceMemoryMut, Stream};

fn main() -> cuda_rt::Result<()> {
    let stream = Stream::new()?;
    let mut buffer = DeviceBuffer::<u32>::zeroed(8)?;
    let mut low = buffer.slice_mut(0..6)?;
    let mut high = buffer.slice_mut(4..8)?;
    low.set_bytes_async(&stream, 1)?;
    high.set_bytes_async(&stream, 2)
}
