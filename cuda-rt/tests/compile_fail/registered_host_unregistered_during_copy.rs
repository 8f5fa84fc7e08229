// An owned registration cannot be unregistered (nor its Vec taken back) while a scope's copy
// borrows it.
use cuda_rt::{DeviceBuffer, HostRegisterFlags, RegisteredHost, Stream};

fn main() -> cuda_rt::Result<()> {
    let stream = Stream::new()?;
    let device = DeviceBuffer::<u32>::zeroed(4)?;
    let mut registered = RegisteredHost::new(vec![0u32; 4], HostRegisterFlags::DEFAULT)?;
    cuda_rt::scope(|s| {
        s.copy_to_host_async(&stream, &device, &mut registered)?;
        let data = registered.into_inner()?;
        drop(data);
        Ok(())
    })
}
