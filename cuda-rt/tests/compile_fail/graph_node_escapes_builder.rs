// A node names a node of the graph being built: it cannot leave the builder's closure (to be
// given to another graph's builder, say).
use cuda_rt::Graph;

fn main() -> cuda_rt::Result<()> {
    let mut escaped = None;
    let _graph = Graph::build(|b| {
        escaped = Some(b.empty(&[])?);
        Ok(())
    })?;
    let _other = Graph::build(|b| b.empty(&[escaped.unwrap()]).map(drop))?;
    Ok(())
}
