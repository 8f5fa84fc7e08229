// Work queued in a scope may only borrow what outlives the scope, not the closure's locals.
use cuda_rt::{DeviceBuffer, Stream};

fn main() -> cuda_rt::Result<()> {
    let stream = Stream::new()?;
    let mut device = DeviceBuffer::<u32>::new(4)?;
    cuda_rt::scope(|s| {
        let host = vec![1u32; 4];
        s.copy_to_device_async(&stream, &host, &mut device)
    })
}
