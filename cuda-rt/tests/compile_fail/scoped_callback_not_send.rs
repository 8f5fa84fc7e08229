// A scoped callback runs on a CUDA thread too: it must be Send.
use cuda_rt::Stream;
use std::rc::Rc;

fn main() -> cuda_rt::Result<()> {
    let stream = Stream::new()?;
    let shared = Rc::new(5);
    cuda_rt::scope(|s| s.launch_host_fn(&stream, move || println!("{shared}")))
}
