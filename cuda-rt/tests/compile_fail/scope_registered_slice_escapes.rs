// A slice registered for a scope is lent for the scope only: it cannot leave the closure, so no
// other scope's copy can use it after this scope unregisters it.
use cuda_rt::HostRegisterFlags;

fn main() -> cuda_rt::Result<()> {
    let mut data = vec![0u8; 4096];
    let mut escaped = None;
    cuda_rt::scope(|s| {
        let registered = s.register_host(&mut data, HostRegisterFlags::DEFAULT)?;
        escaped = Some(registered);
        Ok(())
    })?;
    drop(escaped);
    Ok(())
}
