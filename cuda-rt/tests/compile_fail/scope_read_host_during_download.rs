// The host must not read a buffer that a queued download writes.
use cuda_rt::{DeviceBuffer, Stream};

fn main() -> cuda_rt::Result<()> {
    let stream = Stream::new()?;
    let device = DeviceBuffer::<u32>::new(4)?;
    let mut host = vec![0u32; 4];
    cuda_rt::scope(|s| {
        s.copy_to_host_async(&stream, &device, &mut host)?;
        println!("{}", host[0]);
        Ok(())
    })
}
