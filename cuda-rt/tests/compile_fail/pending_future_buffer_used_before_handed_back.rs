// The buffer of an awaited copy is moved into it: it cannot be touched until the future
// hands it back.
use cuda_rt::{DeviceBuffer, DeviceMemoryMut, PinnedBuffer, Stream};

async fn upload(stream: &Stream, device: &mut DeviceBuffer<u8>) -> cuda_rt::Result<()> {
    let mut staging = PinnedBuffer::<u8>::new(device.len())?;
    let copy = device.copy_from_pinned_async(stream, staging)?;
    staging[0] = 1;
    let staging = copy.await?;
    assert_eq!(staging.len(), device.len());
    Ok(())
}

fn main() {
    let _ = upload;
}
