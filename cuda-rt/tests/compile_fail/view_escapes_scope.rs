// A view of device memory made inside a scope's closure cannot escape it.
use cuda_rt::{DeviceBuffer, DeviceMemoryMut, Stream};

fn main() -> cuda_rt::Result<()> {
    let stream = Stream::new()?;
    let host = vec![1u32; 4];
    let mut escaped = None;
    cuda_rt::scope(|s| {
        let mut device = DeviceBuffer::<u32>::new(8)?;
        let mut view = device.slice_mut(0..4)?;
        s.copy_to_device_async(&stream, &host, &mut view)?;
        escaped = Some(view);
        Ok(())
    })?;
    drop(escaped);
    Ok(())
}
