// A stream used in a scope must outlive the scope (it is synchronized at its end).
use cuda_rt::{DeviceBuffer, Stream};

fn main() -> cuda_rt::Result<()> {
    let host = vec![1u32; 4];
    let mut device = DeviceBuffer::<u32>::new(4)?;
    cuda_rt::scope(|s| {
        let stream = Stream::new()?;
        s.copy_to_device_async(&stream, &host, &mut device)
    })
}
