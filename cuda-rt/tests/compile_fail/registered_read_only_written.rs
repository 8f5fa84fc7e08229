// A read-only registration (cudaHostRegisterReadOnly) gives no mutable access to its memory.
use cuda_rt::{HostRegisterFlags, ReadOnly, RegisteredHost};

fn write(registered: &mut RegisteredHost<u32, ReadOnly>) {
    registered[0] = 1;
}

fn main() -> cuda_rt::Result<()> {
    let mut registered = RegisteredHost::new_read_only(vec![0u32; 4], HostRegisterFlags::DEFAULT)?;
    write(&mut registered);
    Ok(())
}
