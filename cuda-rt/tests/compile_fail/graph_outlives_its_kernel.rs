// A captured launch borrows the kernel's handle for the graph's lifetime: a kernel of a loaded
// library cannot be dropped (and the library unloaded) while a graph may still launch it.
use cuda_rt::{CaptureMode, DeviceBuffer, LaunchConfig, Library, SliceMut, Stream};

fn main() -> cuda_rt::Result<()> {
    let mut stream = Stream::new()?;
    let mut out = DeviceBuffer::<u32>::zeroed(8)?;
    let library = Library::load_ptx("...")?;
    // SAFETY: (the declaration's claim; never reached: this does not compile).
    let fill = unsafe { library.kernel::<(SliceMut<u32>, u32)>("fill_u32") }?;
    let graph = stream.capture(CaptureMode::Global, |c| {
        let o = c.bind_mut(&mut out);
        c.launch(&fill, LaunchConfig::for_items(8, 8), (&o, 1))
    })?;
    drop(fill);
    let _exec = graph.instantiate()?;
    Ok(())
}
