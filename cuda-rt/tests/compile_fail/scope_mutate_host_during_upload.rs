// The host must not write a buffer that a queued upload reads.
use cuda_rt::{DeviceBuffer, Stream};

fn main() -> cuda_rt::Result<()> {
    let stream = Stream::new()?;
    let mut device = DeviceBuffer::<u32>::new(4)?;
    let mut host = vec![1u32; 4];
    cuda_rt::scope(|s| {
        s.copy_to_device_async(&stream, &host, &mut device)?;
        host[0] = 2;
        Ok(())
    })
}
