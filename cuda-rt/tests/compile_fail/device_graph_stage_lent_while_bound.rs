// The pinned stages of an executable graph bound for device launches cannot be lent while a
// launching graph holds it: a kernel may launch it, and its copy nodes read and write them.
use cuda_rt::{DeviceBuffer, Graph, PinnedBuffer};

fn main() -> cuda_rt::Result<()> {
    let mut data = DeviceBuffer::<u32>::zeroed(4)?;
    let mut stage = None;
    let mut device_graph = Graph::build(|g| {
        let (data, input) = (g.bind_mut(&mut data), g.adopt_pinned(PinnedBuffer::new(4)?));
        g.copy_stage_to_device(&[], &input, &data)?;
        stage = Some(input);
        Ok(())
    })?
    .instantiate_for_device_launch()?;
    let launcher = Graph::build(|g| {
        let _target = g.bind_device_graph(&mut device_graph);
        Ok(())
    })?
    .instantiate()?;
    device_graph.stage_mut(stage.as_ref().unwrap())?[0] = 1;
    drop(launcher);
    Ok(())
}
