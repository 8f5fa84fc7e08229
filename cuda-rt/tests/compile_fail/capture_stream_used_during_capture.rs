// While a stream captures, nothing else can queue work on it.
use cuda_rt::{CaptureMode, Event, Stream};

fn main() -> cuda_rt::Result<()> {
    let mut stream = Stream::new()?;
    let event = Event::new()?;
    let _graph = stream.capture(CaptureMode::Global, |_c| event.record(&stream))?;
    Ok(())
}
