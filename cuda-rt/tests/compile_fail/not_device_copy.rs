// Only plain data crosses to the device: no bool (invalid bit patterns), no references.
use cuda_rt::DeviceBuffer;

fn main() {
    let _ = DeviceBuffer::<bool>::new(4);
    let _ = DeviceBuffer::<&'static u32>::new(4);
}
