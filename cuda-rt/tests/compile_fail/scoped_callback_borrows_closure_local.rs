// A scoped callback may borrow only what outlives the scope.
use cuda_rt::Stream;

fn main() -> cuda_rt::Result<()> {
    let stream = Stream::new()?;
    cuda_rt::scope(|s| {
        let local = vec![1, 2, 3];
        s.launch_host_fn(&stream, || println!("{local:?}"))
    })
}
