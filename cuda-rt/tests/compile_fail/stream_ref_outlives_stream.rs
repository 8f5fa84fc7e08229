// A borrowed stream handle cannot outlive the stream.
use cuda_rt::{Stream, StreamRef};

fn main() -> cuda_rt::Result<()> {
    let borrowed = {
        let stream = Stream::new()?;
        StreamRef::from(&stream)
    };
    borrowed.synchronize()
}
