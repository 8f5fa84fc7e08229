// A `SliceMut` parameter takes mutable memory: a shared borrow or a read-only view is refused.
use cuda_rt::{kernels, DeviceBuffer, DeviceMemory, LaunchConfig, SliceMut, Stream};

kernels! {
    unsafe fn fill(out: SliceMut<u32>, value: u32);
}

fn main() -> cuda_rt::Result<()> {
    let stream = Stream::new()?;
    let a = DeviceBuffer::<u32>::zeroed(8)?;
    fill()?.launch(&stream, LaunchConfig::for_items(8, 8), (a.slice(0..4)?, 1))?;
    Ok(())
}
