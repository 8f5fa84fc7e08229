// Memory registered for a scope stays borrowed until the scope has unregistered it: its Vec
// can be neither reallocated nor dropped meanwhile.
use cuda_rt::HostRegisterFlags;

fn main() -> cuda_rt::Result<()> {
    let mut data = vec![0u32; 1 << 20];
    cuda_rt::scope(|s| {
        let registered = s.register_host(&mut data, HostRegisterFlags::DEFAULT)?;
        registered[0] = 1;
        data.push(2);
        Ok(())
    })
}
