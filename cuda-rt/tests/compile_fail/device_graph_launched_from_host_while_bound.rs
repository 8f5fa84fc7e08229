// An executable graph bound for device launches is borrowed exclusively by the graph that
// launches it: the host cannot launch it meanwhile (CUDA leaves a launch from the host and one
// from the device at the same time undefined).
use cuda_rt::{DeviceBuffer, Graph, Stream};

fn main() -> cuda_rt::Result<()> {
    let stream = Stream::new()?;
    let mut data = DeviceBuffer::<u32>::zeroed(4)?;
    let mut device_graph = Graph::build(|g| {
        g.set_bytes(&[], &g.bind_mut(&mut data), 0)?;
        Ok(())
    })?
    .instantiate_for_device_launch()?;
    let launcher = Graph::build(|g| {
        let _target = g.bind_device_graph(&mut device_graph);
        Ok(())
    })?
    .instantiate()?;
    cuda_rt::scope(|s| s.launch_graph(&stream, &device_graph))?;
    drop(launcher);
    Ok(())
}
