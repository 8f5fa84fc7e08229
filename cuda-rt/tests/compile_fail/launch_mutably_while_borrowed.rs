// A typed launch borrows a `SliceMut` argument mutably: not while a view of it is alive.
use cuda_rt::{kernels, DeviceBuffer, DeviceMemory, LaunchConfig, SliceMut, Stream};

kernels! {
    unsafe fn fill(out: SliceMut<u32>, value: u32);
}

fn main() -> cuda_rt::Result<()> {
    let stream = Stream::new()?;
    let mut a = DeviceBuffer::<u32>::zeroed(8)?;
    let view = a.slice(0..4)?;
    fill()?.launch(&stream, LaunchConfig::for_items(8, 8), (&mut a, 1))?;
    drop(view);
    Ok(())
}
