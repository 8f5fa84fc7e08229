// Host callbacks run on a CUDA thread: the closure must be Send.
use cuda_rt::Stream;
use std::rc::Rc;

fn main() -> cuda_rt::Result<()> {
    let stream = Stream::new()?;
    let shared = Rc::new(5);
    stream.launch_host_fn(move || println!("{shared}"))?;
    stream.synchronize()
}
