// A read-only registration cannot be the destination of a download.
use cuda_rt::{DeviceBuffer, ReadOnly, RegisteredHost, Stream};

fn download(
    stream: &Stream,
    device: &DeviceBuffer<u32>,
    registered: &mut RegisteredHost<u32, ReadOnly>,
) -> cuda_rt::Result<()> {
    cuda_rt::scope(|s| s.copy_to_host_async(stream, device, &mut registered[..]))
}

fn main() {}
