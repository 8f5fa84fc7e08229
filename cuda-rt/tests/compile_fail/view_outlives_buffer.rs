// A view cannot outlive the buffer it views.
use cuda_rt::{DeviceBuffer, DeviceMemory};

fn main() -> cuda_rt::Result<()> {
    let view = {
        let buffer = DeviceBuffer::<u32>::zeroed(8)?;
        buffer.slice(2..4)?
    };
    view.to_vec().map(drop)
}
