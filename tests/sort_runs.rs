//! Merging sorted runs (`SortWorkspace::merge_sorted_runs`) against the CPU: one to nine runs,
//! empty runs among them, every key type and distribution, both orders, sizes past the merge's
//! tile and past a round's odd run out; and the refusals, which queue nothing. (Keys that
//! compare equal have equal bits in the sort's total order, so stability is the pairs' concern:
//! the merge is the one `sort_spread`'s stable pairs go through.)

mod sort_common;

use cuda_rt::{DeviceBuffer, ErrorKind, Stream, StreamFlags};
use cuda_rt_kernels::sort::{Order, SortError, SortWorkspace};
use sort_common::{assert_same_keys, cpu_sorted, make, Dist, TestKey};

/// Sorts each run of `lens` on the CPU, merges them on the GPU and compares with the CPU sort
/// of the whole.
fn merge_case<K: TestKey>(lens: &[usize], dist: Dist, order: Order, seed: u64) {
    let total: usize = lens.iter().sum();
    let all: Vec<K> = make(dist, total, seed);
    let mut input = Vec::with_capacity(total);
    let mut at = 0;
    for &len in lens {
        input.extend(cpu_sorted(&all[at..at + len], order));
        at += len;
    }
    let want = cpu_sorted(&input, order);
    let stream = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    let runs = DeviceBuffer::from_slice(&input).unwrap();
    let mut out = DeviceBuffer::<K>::zeroed(total).unwrap();
    SortWorkspace::new()
        .merge_sorted_runs(&stream, &runs, lens, &mut out, order)
        .unwrap();
    // Read with no wait of ours: the tracking orders the read after the merge.
    let got = out.to_vec().unwrap();
    assert_same_keys(
        &got,
        &want,
        &format!(
            "{} runs {lens:?} {dist:?} {order:?}",
            std::any::type_name::<K>()
        ),
    );
}

#[test]
fn runs_merge_into_the_cpu_sort_for_every_key_type() {
    if cuda_rt_testing::gpu().is_none() {
        return;
    }
    let shapes: &[&[usize]] = &[
        &[],
        &[0],
        &[5],
        &[1, 1],
        &[3000, 0, 7],
        &[2048, 2048, 2048],
        &[100_003, 99_991, 1, 0, 77_777],
        &[10, 20, 30, 40, 50, 60, 70, 80, 90],
        &[0, 0, 4097, 0],
    ];
    for (i, lens) in shapes.iter().enumerate() {
        for order in [Order::Ascending, Order::Descending] {
            let seed = i as u64 * 2 + order as u64;
            merge_case::<u32>(lens, Dist::Uniform, order, seed);
            merge_case::<i64>(lens, Dist::FewDistinct, order, seed);
            merge_case::<f32>(lens, Dist::Specials, order, seed);
            merge_case::<f64>(lens, Dist::Sawtooth, order, seed);
            merge_case::<u8>(lens, Dist::Uniform, order, seed);
            merge_case::<i16>(lens, Dist::AllEqual, order, seed);
        }
    }
}

#[test]
fn large_runs_merge_past_the_tiles() {
    if cuda_rt_testing::gpu().is_none() {
        return;
    }
    let lens = [3 << 20, (1 << 21) + 1, 1 << 20, 5];
    merge_case::<u64>(&lens, Dist::Uniform, Order::Ascending, 9);
    merge_case::<i32>(&lens, Dist::Reversed, Order::Descending, 10);
}

#[test]
fn refusals_queue_nothing() {
    if cuda_rt_testing::gpu().is_none() {
        return;
    }
    let stream = Stream::new().unwrap();
    let runs = DeviceBuffer::from_slice(&[1u32, 2, 3, 0, 5]).unwrap();
    let mut out = DeviceBuffer::<u32>::zeroed(5).unwrap();
    let workspace = SortWorkspace::new();
    for (lens, out_len) in [(&[2usize, 2][..], 5), (&[3, 3][..], 5), (&[3, 2][..], 4)] {
        let mut short = DeviceBuffer::<u32>::zeroed(out_len).unwrap();
        let target = if out_len == 5 { &mut out } else { &mut short };
        let e = workspace
            .merge_sorted_runs(&stream, &runs, lens, target, Order::Ascending)
            .unwrap_err();
        assert!(
            matches!(e, SortError::Runtime(ref r) if matches!(r.kind(), ErrorKind::LengthMismatch { .. })),
            "{lens:?} into {out_len}: {e:?}"
        );
    }
    let e = workspace
        .merge_sorted_runs(&stream, &runs, &[usize::MAX, 6], &mut out, Order::Ascending)
        .unwrap_err();
    assert_eq!(e, SortError::SizeOverflow);
    assert_eq!(out.to_vec().unwrap(), vec![0; 5], "nothing was written");
    // Two runs merged for real afterwards: the refusals left nothing behind.
    workspace
        .merge_sorted_runs(&stream, &runs, &[3, 2], &mut out, Order::Ascending)
        .unwrap();
    assert_eq!(out.to_vec().unwrap(), vec![0, 1, 2, 3, 5]);
    assert_eq!(runs.len(), 5);
}
