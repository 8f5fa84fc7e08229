// A scope may only register memory that outlives it: a local of the closure would be freed
// while still registered.
use cuda_rt::HostRegisterFlags;

fn main() -> cuda_rt::Result<()> {
    cuda_rt::scope(|s| {
        let mut local = vec![0u32; 1 << 20];
        s.register_host(&mut local, HostRegisterFlags::DEFAULT)?;
        Ok(())
    })
}
