// The guard of a scoped current device belongs to the thread whose current device it set: it
// cannot be moved to another thread (whose current device it would restore).
use cuda_rt::Device;

fn main() -> cuda_rt::Result<()> {
    let guard = Device::from_ordinal(0).set_current_scoped()?;
    std::thread::spawn(move || drop(guard)).join().unwrap();
    Ok(())
}
