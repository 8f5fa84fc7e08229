// A condition belongs to the graph being built: it cannot leave the builder's closure (to be
// read by another graph's conditional node, say).
use cuda_rt::Graph;

fn main() -> cuda_rt::Result<()> {
    let mut escaped = None;
    let _graph = Graph::build(|b| {
        escaped = Some(b.condition(0)?);
        Ok(())
    })?;
    let _other = Graph::build(|b| b.if_then(&[], escaped.unwrap(), |_| Ok(())).map(drop))?;
    Ok(())
}
