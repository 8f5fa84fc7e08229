// The scope handle cannot leave the closure.
fn main() {
    let mut escaped = None;
    let _ = cuda_rt::scope(|s| {
        escaped = Some(s);
        Ok(())
    });
}
