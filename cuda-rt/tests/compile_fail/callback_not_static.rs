// Outside a scope a host callback may run after the caller returns: it must be 'static.
use cuda_rt::Stream;

fn main() -> cuda_rt::Result<()> {
    let stream = Stream::new()?;
    let local = vec![1, 2, 3];
    stream.launch_host_fn(|| println!("{local:?}"))?;
    stream.synchronize()
}
