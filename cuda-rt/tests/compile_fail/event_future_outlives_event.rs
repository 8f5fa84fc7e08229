// A future of an event borrows it (each poll queries it): the event cannot be destroyed while
// the future lives.
use cuda_rt::{Event, Stream};

async fn wait() -> cuda_rt::Result<()> {
    let stream = Stream::new()?;
    let done = Event::new()?;
    done.record(&stream)?;
    let occurred = done.completion();
    drop(done);
    occurred.await
}

fn main() {
    let _ = wait;
}
