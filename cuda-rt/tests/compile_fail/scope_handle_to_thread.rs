// The scope handle stays on the thread that waits for its work.
fn main() {
    let _ = cuda_rt::scope(|s| {
        std::thread::scope(|t| {
            t.spawn(move || {
                let handle = s;
                drop(handle);
            });
        });
        Ok(())
    });
}
