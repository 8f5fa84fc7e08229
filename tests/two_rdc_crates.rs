//! Two crates with their own relocatable device code and device-side launches in one binary:
//! this package's merge sort (its device-driven chain of tail launches) and dp-quicksort (a
//! recursive quicksort with fire-and-forget children, cuda-rt-build's example crate), each
//! linked as cuda-rt-build's self-contained object. Both run at the same time on two streams,
//! several rounds, and are checked against the CPU.

use cuda_rt::{Device, DeviceBuffer, Limit, Stream};
use cuda_rt_kernels::sort::{Driver, Order, SortWorkspace, Strategy};

fn random(n: usize, seed: u64) -> Vec<u32> {
    let mut keys = vec![0; n];
    cuda_rt_testing::SplitMix64::new(seed).fill_u32(&mut keys);
    keys
}

#[test]
fn both_crates_sort_at_the_same_time_on_two_streams() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    // The quicksort's children and the merge sort's queued passes share the device runtime's
    // pool of pending launches; give it room for both (the quicksort would sort in place
    // rather than fail, the merge sort would report the pool as full).
    Device::current()
        .unwrap()
        .set_limit(Limit::DevRuntimePendingLaunchCount, 1 << 15)
        .unwrap();
    let merge_stream = Stream::new().unwrap();
    let quick_stream = Stream::new().unwrap();
    let workspace = SortWorkspace::with_strategy(Strategy {
        driver: Driver::Device,
        ..Strategy::default()
    });
    for round in 0..3u64 {
        let merge_input = random((1 << 22) + 3, round);
        let quick_input = random(300_007, 100 + round);
        let mut merge_keys = DeviceBuffer::from_slice(&merge_input).unwrap();
        let mut quick_keys = DeviceBuffer::from_slice(&quick_input).unwrap();
        // Queued first, so that the merge sort (which waits for itself) runs beside it.
        dp_quicksort::quicksort(&quick_stream, &mut quick_keys).unwrap();
        workspace
            .sort_and_synchronize(&merge_stream, &mut merge_keys, Order::Ascending)
            .unwrap_or_else(|e| panic!("round {round}: merge sort: {e}"));
        quick_stream.synchronize().unwrap();
        let mut want = merge_input;
        want.sort_unstable();
        assert!(
            merge_keys.to_vec().unwrap() == want,
            "round {round}: the merge sort's keys are not sorted like the CPU's"
        );
        let mut want = quick_input;
        want.sort_unstable();
        assert!(
            quick_keys.to_vec().unwrap() == want,
            "round {round}: the quicksort's keys are not sorted like the CPU's"
        );
        println!("round {round}: both sorted");
    }
}
