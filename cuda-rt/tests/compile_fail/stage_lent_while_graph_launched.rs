// A stage is lent only while the executable is borrowed mutably: no launch can write it
// meanwhile.
use cuda_rt::{CaptureMode, PinnedBuffer, Stream};

fn main() -> cuda_rt::Result<()> {
    let mut stream = Stream::new()?;
    let staging = PinnedBuffer::<u32>::new(4)?;
    let mut key = None;
    let graph = stream.capture(CaptureMode::Global, |c| {
        key = Some(c.adopt_pinned(staging));
        Ok(())
    })?;
    let (mut exec, key) = (graph.instantiate()?, key.unwrap());
    let slice = exec.stage_mut(&key)?;
    exec.launch(&stream)?;
    slice[0] = 1;
    Ok(())
}
