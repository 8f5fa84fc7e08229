//! The GPU merge sort against the CPU's stable sort: every key type, both orders, pairs,
//! edge lengths around the tile size, several distributions, every strategy, and the error path
//! of the device-side chain. Outputs and scratch are poisoned before each sort.

mod sort_common;

use cuda_rt_kernels::sort::raw::{sort_tile_len, RawSortBuffers};
use cuda_rt_kernels::sort::{Cuts, Driver, Order, SortError, Strategy, TileWidth};
use proptest::prelude::*;
use sort_common::*;

const ORDERS: [Order; 2] = [Order::Ascending, Order::Descending];

fn strategies() -> Vec<Strategy> {
    let mut all = Vec::new();
    for driver in [Driver::Device, Driver::Host] {
        for cuts in [Cuts::Fused, Cuts::Kernel] {
            for tile in [TileWidth::Narrow, TileWidth::Wide] {
                all.push(Strategy { driver, cuts, tile });
            }
        }
    }
    all
}

/// Lengths around the tile size of `K` (and of twice and thrice it, so that merge passes with
/// an odd number of runs and a partial last tile occur).
fn edge_lengths<K: TestKey>() -> Vec<usize> {
    let tile = sort_tile_len::<K>(0).unwrap();
    let mut lengths = vec![
        0,
        1,
        2,
        3,
        17,
        1000,
        tile - 1,
        tile,
        tile + 1,
        2 * tile - 1,
        2 * tile + 1,
        3 * tile + 7,
    ];
    if !quick() {
        lengths.extend([5 * tile + 333, 40_009]);
    }
    lengths
}

fn check_type<K: TestKey>(seed: u64) {
    let mut sorter = Sorter::new();
    for n in edge_lengths::<K>() {
        for (d, dist) in DISTS.iter().enumerate() {
            for order in ORDERS {
                let input: Vec<K> = make(*dist, n, seed ^ (n as u64) << 8 ^ d as u64);
                let want = cpu_sorted(&input, order);
                let in_place = (n + d) % 2 == 0;
                let got = sorter.keys(&input, order, Strategy::default(), in_place);
                assert_same_keys(
                    &got,
                    &want,
                    &format!("{} n={n} {dist:?} {order:?}", std::any::type_name::<K>()),
                );
            }
        }
    }
}

#[test]
fn every_key_type_edge_lengths_and_distributions() {
    let Some(_gpu) = gpu_test::gpu() else { return };
    check_type::<u8>(1);
    check_type::<u16>(2);
    check_type::<u32>(3);
    check_type::<u64>(4);
    check_type::<i8>(5);
    check_type::<i16>(6);
    check_type::<i32>(7);
    check_type::<i64>(8);
    check_type::<f32>(9);
    check_type::<f64>(10);
}

#[test]
fn every_strategy_gives_the_same_result() {
    let Some(_gpu) = gpu_test::gpu() else { return };
    let mut sorter = Sorter::new();
    let tile = sort_tile_len::<u32>(0).unwrap();
    for n in [tile + 1, 4 * tile - 5, 9 * tile + 77] {
        for dist in [Dist::Uniform, Dist::FewDistinct, Dist::Sawtooth] {
            let input: Vec<u32> = make(dist, n, n as u64);
            let want = cpu_sorted(&input, Order::Ascending);
            for strategy in strategies() {
                let got = sorter.keys(&input, Order::Ascending, strategy, false);
                assert_same_keys(&got, &want, &format!("n={n} {dist:?} {strategy:?}"));
            }
        }
    }
}

/// Pairs with values that record their input index, so the exact permutation is checked,
/// equal keys keeping input order included.
fn check_pairs<K: TestKey, V: Copy + PartialEq + std::fmt::Debug>(
    sorter: &mut Sorter,
    keys: &[K],
    make_value: impl Fn(usize) -> V,
    order: Order,
    strategy: Strategy,
    in_place: bool,
) {
    let values: Vec<V> = (0..keys.len()).map(&make_value).collect();
    let perm = cpu_permutation(keys, order);
    let want_keys: Vec<K> = perm.iter().map(|&i| keys[i]).collect();
    let want_values: Vec<V> = perm.iter().map(|&i| make_value(i)).collect();
    let (got_keys, got_values) = sorter.pairs(keys, &values, order, strategy, in_place);
    let what = format!(
        "pairs {} -> {} bytes, n={} {order:?} {strategy:?}",
        std::any::type_name::<K>(),
        size_of::<V>(),
        keys.len()
    );
    assert_same_keys(&got_keys, &want_keys, &what);
    if let Some(i) = (0..got_values.len()).find(|&i| got_values[i] != want_values[i]) {
        panic!(
            "{what}: value {i} is {:?}, want {:?}",
            got_values[i], want_values[i]
        );
    }
}

#[test]
fn pairs_are_stable_for_every_value_size() {
    let Some(_gpu) = gpu_test::gpu() else { return };
    let mut sorter = Sorter::new();
    for order in ORDERS {
        for (i, n) in [0usize, 1, 2, 4095, 4096, 4097, 11_264, 11_265, 35_000]
            .into_iter()
            .enumerate()
        {
            for dist in [
                Dist::FewDistinct,
                Dist::AllEqual,
                Dist::Uniform,
                Dist::Sawtooth,
            ] {
                let keys: Vec<u32> = make(dist, n, 77 + n as u64);
                let s = strategies()[i % 8];
                check_pairs(&mut sorter, &keys, |i| i as u32, order, s, i % 2 == 0);
                check_pairs(&mut sorter, &keys, |i| i as u64 * 3, order, s, i % 2 == 1);
                check_pairs(
                    &mut sorter,
                    &keys,
                    |i| [i as u32, 7, !(i as u32), 9],
                    order,
                    s,
                    false,
                );
                let keys: Vec<f64> = make(Dist::Specials, n, 5 + n as u64);
                check_pairs(&mut sorter, &keys, |i| i as u32, order, s, true);
                let keys: Vec<i8> = make(dist, n, 9 + n as u64);
                check_pairs(&mut sorter, &keys, |i| [i as u64, 1], order, s, false);
                let keys: Vec<u16> = make(dist, n, 11 + n as u64);
                check_pairs(&mut sorter, &keys, |i| i as u64, order, s, true);
            }
        }
    }
}

#[test]
fn same_input_twice_gives_identical_output() {
    let Some(_gpu) = gpu_test::gpu() else { return };
    let mut sorter = Sorter::new();
    let n = if quick() { 20_000 } else { 300_001 };
    let keys: Vec<f32> = make(Dist::Specials, n, 99);
    let values: Vec<u32> = (0..n as u32).collect();
    let first = sorter.pairs(
        &keys,
        &values,
        Order::Descending,
        Strategy::default(),
        false,
    );
    let second = sorter.pairs(
        &keys,
        &values,
        Order::Descending,
        Strategy::default(),
        false,
    );
    assert!(first
        .0
        .iter()
        .zip(&second.0)
        .all(|(a, b)| a.to_bits() == b.to_bits()));
    assert_eq!(first.1, second.1);
}

#[test]
fn millions_of_keys() {
    let Some(_gpu) = gpu_test::gpu() else { return };
    if quick() {
        return;
    }
    let mut sorter = Sorter::new();
    let input: Vec<u32> = make(Dist::Uniform, 3_000_017, 1);
    let want = cpu_sorted(&input, Order::Ascending);
    for strategy in strategies() {
        let got = sorter.keys(&input, Order::Ascending, strategy, false);
        assert_same_keys(&got, &want, &format!("u32 3M {strategy:?}"));
    }
    let input: Vec<f64> = make(Dist::Specials, (1 << 22) + 1, 2);
    assert_same_keys(
        &sorter.keys(&input, Order::Descending, Strategy::default(), true),
        &cpu_sorted(&input, Order::Descending),
        "f64 4M descending",
    );
    let input: Vec<i16> = make(Dist::FewDistinct, 5_000_000, 3);
    assert_same_keys(
        &sorter.keys(&input, Order::Ascending, Strategy::default(), false),
        &cpu_sorted(&input, Order::Ascending),
        "i16 5M",
    );
    let keys: Vec<u64> = make(Dist::FewDistinct, 2_000_003, 4);
    check_pairs(
        &mut sorter,
        &keys,
        |i| [i as u64, !(i as u64)],
        Order::Ascending,
        Strategy::default(),
        false,
    );
    let keys: Vec<u32> = make(Dist::Uniform, 1 << 21, 5);
    check_pairs(
        &mut sorter,
        &keys,
        |i| i as u32,
        Order::Descending,
        Strategy::default(),
        true,
    );
}

#[test]
fn a_failed_device_side_launch_is_reported() {
    let Some(_gpu) = gpu_test::gpu() else { return };
    if host_driver_only() {
        eprintln!("skipped a_failed_device_side_launch_is_reported: CUDA_RT_SORT_TEST_DRIVER=host");
        return;
    }
    let mut sorter = Sorter::new();
    let tile = sort_tile_len::<u32>(0).unwrap();
    let n = 5 * tile;
    let input: Vec<u32> = make(Dist::Uniform, n, 8);
    let d = DeviceVec::from_slice(&input);
    use cuda_rt_kernels::sort::ffi::flags::{FAIL_STAGE_SHIFT, LAUNCH_CHAINED, LAUNCH_QUEUED};
    // Queued: the first grid's launch of that stage fails; chained: the previous stage's does.
    for (stage, cuts, launch) in [
        (1u32, Cuts::Fused, LAUNCH_QUEUED),
        (2, Cuts::Fused, LAUNCH_QUEUED),
        (1, Cuts::Kernel, LAUNCH_QUEUED),
        (4, Cuts::Kernel, LAUNCH_QUEUED),
        (1, Cuts::Fused, LAUNCH_CHAINED),
        (3, Cuts::Fused, LAUNCH_CHAINED),
        (4, Cuts::Kernel, LAUNCH_CHAINED),
    ] {
        let buffers = RawSortBuffers {
            test_flags: ((stage + 1) << FAIL_STAGE_SHIFT) | launch,
            ..RawSortBuffers::keys(d.ptr(), n)
        };
        let strategy = Strategy {
            driver: Driver::Device,
            cuts,
            ..Strategy::default()
        };
        match sorter.run(&buffers, Order::Ascending, strategy) {
            Err(SortError::DeviceLaunch { stage: s, status }) => {
                assert_eq!(s, stage);
                // A block of 0 threads: the device runtime reports an invalid configuration.
                assert_ne!(status, cuda_rt_sys::cudaSuccess);
                eprintln!(
                    "stage {stage} {cuts:?} launch {launch:#x}: {}",
                    gpu_test::error_name(status)
                );
            }
            other => {
                panic!("stage {stage} {cuts:?} launch {launch:#x}: expected a device launch error, got {other:?}")
            }
        }
    }
    // The context is still usable, and a good sort afterwards succeeds.
    let got = sorter.keys(&input, Order::Ascending, Strategy::default(), true);
    assert_same_keys(
        &got,
        &cpu_sorted(&input, Order::Ascending),
        "after failures",
    );
}

#[test]
fn missing_scratch_is_reported_and_nothing_is_written() {
    let Some(_gpu) = gpu_test::gpu() else { return };
    use cuda_rt_kernels::sort::ffi;
    use ffi::flags::{DRIVER_DEVICE, DRIVER_HOST};
    let tile = sort_tile_len::<u32>(0).unwrap();
    let n = 3 * tile;
    let input: Vec<u32> = make(Dist::Uniform, n, 9);
    // The device-driven chain and the host-driven one of the RDC build, and the build without
    // `-rdc` (which host-queued sorts use).
    let entries: [(ffi::SortEntry, u32, &str); 3] = [
        (ffi::cuda_rt_kernels_sort, DRIVER_DEVICE, "device-driven"),
        (ffi::cuda_rt_kernels_sort, DRIVER_HOST, "host-driven"),
        (ffi::cuda_rt_kernels_sort_nordc, 0, "without -rdc"),
    ];
    for (entry, flags, what) in entries {
        let d = DeviceVec::from_slice(&input);
        let status = DeviceVec::<u32>::new(1);
        let stream = TestStream::new();
        let args = ffi::SortArgs {
            keys_in: std::ptr::null(),
            values_in: std::ptr::null(),
            keys: d.ptr().cast(),
            keys_scratch: std::ptr::null_mut(),
            values: std::ptr::null_mut(),
            values_scratch: std::ptr::null_mut(),
            cuts: std::ptr::null_mut(),
            status: status.ptr(),
            n: n as u64,
            key_bytes: 4,
            value_bytes: 0,
            key_mode: 0,
            flags,
        };
        // SAFETY: the key buffer and the status word are live device allocations; the stream
        // is synchronized before they are read or freed.
        unsafe {
            check(entry(&args, stream.0), what);
            check(
                cuda_rt_sys::cudaStreamSynchronize(stream.0),
                "cudaStreamSynchronize",
            );
        }
        let word = status.to_vec()[0];
        assert_eq!(
            SortError::from_status_word(word),
            Err(SortError::ScratchMissing),
            "{what}"
        );
        assert_eq!(d.to_vec(), input, "{what}: nothing may be written");
    }
}

// ---- Property tests --------------------------------------------------------------------------

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: if quick() { 8 } else { 48 },
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

fn dist() -> impl proptest::strategy::Strategy<Value = Dist> {
    proptest::sample::select(DISTS.to_vec())
}

fn order() -> impl proptest::strategy::Strategy<Value = Order> {
    proptest::sample::select(ORDERS.to_vec())
}

fn sort_strategy() -> impl proptest::strategy::Strategy<Value = Strategy> {
    proptest::sample::select(strategies())
}

/// Runs a property over generated cases with proptest's runner (which shrinks a failing case).
fn check_property<S: proptest::strategy::Strategy>(cases: S, property: impl Fn(S::Value))
where
    S::Value: std::fmt::Debug,
{
    let mut runner = proptest::test_runner::TestRunner::new(config());
    let result = runner.run(&cases, |case| {
        property(case);
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}

fn prop_keys<K: TestKey>(
    (n, dist, seed, order, strategy, in_place): (usize, Dist, u64, Order, Strategy, bool),
) {
    let input: Vec<K> = make(dist, n, seed);
    let got = Sorter::new().keys(&input, order, strategy, in_place);
    assert_same_keys(
        &got,
        &cpu_sorted(&input, order),
        &format!("n={n} {dist:?} {order:?} {strategy:?}"),
    );
}

fn cases(
    max_len: usize,
) -> impl proptest::strategy::Strategy<Value = (usize, Dist, u64, Order, Strategy, bool)> {
    (
        0..max_len,
        dist(),
        any::<u64>(),
        order(),
        sort_strategy(),
        any::<bool>(),
    )
}

#[test]
fn prop_u32() {
    let Some(_gpu) = gpu_test::gpu() else { return };
    check_property(cases(60_000), prop_keys::<u32>);
}

#[test]
fn prop_i64() {
    let Some(_gpu) = gpu_test::gpu() else { return };
    check_property(cases(40_000), prop_keys::<i64>);
}

#[test]
fn prop_f32() {
    let Some(_gpu) = gpu_test::gpu() else { return };
    check_property(cases(60_000), prop_keys::<f32>);
}

#[test]
fn prop_f64() {
    let Some(_gpu) = gpu_test::gpu() else { return };
    check_property(cases(40_000), prop_keys::<f64>);
}

#[test]
fn prop_u8_i16_u16() {
    let Some(_gpu) = gpu_test::gpu() else { return };
    check_property(cases(70_000), |case| {
        prop_keys::<u8>(case);
        prop_keys::<i16>((case.0, case.1, case.2 ^ 1, case.3, case.4, !case.5));
        prop_keys::<u16>(case);
    });
}

#[test]
fn prop_pairs() {
    let Some(_gpu) = gpu_test::gpu() else { return };
    check_property(cases(40_000), |(n, dist, seed, order, s, in_place)| {
        let mut sorter = Sorter::new();
        let keys: Vec<i32> = make(dist, n, seed);
        check_pairs(&mut sorter, &keys, |i| i as u32, order, s, in_place);
        let keys: Vec<f32> = make(dist, n, seed);
        check_pairs(&mut sorter, &keys, |i| [i as u64, 3], order, s, !in_place);
        let keys: Vec<u64> = make(dist, n, seed);
        check_pairs(&mut sorter, &keys, |i| i as u64, order, s, in_place);
    });
}

/// The paths the default strategy does not take: merge grids of one tile per group (flag
/// GRID_PER_TILE), each stage launching the next from the device (LAUNCH_CHAINED) rather than
/// the first grid queueing them all, and buffers that start off the 16-byte alignment of an
/// allocation (bulk copies then move each run's aligned middle only, and merged tiles leave
/// through the threads' stores). Keys and pairs, against the CPU; the element before the
/// offset buffer is never written.
#[test]
fn per_tile_grids_and_unaligned_buffers_sort_like_the_cpu() {
    let Some(_gpu) = gpu_test::gpu() else { return };
    use cuda_rt_kernels::sort::ffi::flags::{GRID_PER_TILE, LAUNCH_CHAINED};
    let mut sorter = Sorter::new();
    let tile = sort_tile_len::<u32>(0).unwrap();
    let lengths: &[usize] = if quick() {
        &[3 * tile + 7]
    } else {
        &[3 * tile + 7, 9 * tile + 1, (1 << 20) + 13]
    };
    for &n in lengths {
        for (grid, offset) in [
            (GRID_PER_TILE, 0usize),
            (0, 1),
            (GRID_PER_TILE, 3),
            (LAUNCH_CHAINED, 0),
            (LAUNCH_CHAINED | GRID_PER_TILE, 1),
        ] {
            let input: Vec<u32> = make(Dist::Uniform, n, n as u64 ^ offset as u64);
            let mut padded = vec![0xDEAD_BEEFu32; offset];
            padded.extend_from_slice(&input);
            let d = DeviceVec::from_slice(&padded);
            // SAFETY: `offset` elements into an allocation of offset + n elements.
            let keys = unsafe { d.ptr().add(offset) };
            let buffers = RawSortBuffers {
                test_flags: grid,
                ..RawSortBuffers::keys(keys, n)
            };
            let strategy = Strategy {
                driver: if host_driver_only() {
                    Driver::Host
                } else {
                    Driver::Device
                },
                ..Strategy::default()
            };
            sorter
                .run(&buffers, Order::Ascending, strategy)
                .unwrap_or_else(|e| panic!("n = {n}, grid {grid:#x}, offset {offset}: {e}"));
            let got = d.to_vec();
            assert!(got[..offset].iter().all(|&k| k == 0xDEAD_BEEF));
            assert_same_keys(
                &got[offset..],
                &cpu_sorted(&input, Order::Ascending),
                &format!("n = {n}, grid {grid:#x}, offset {offset}"),
            );

            // Pairs: values are the input positions, so stability shows.
            let values: Vec<u32> = (0..n as u32).collect();
            let mut vpadded = vec![0xDEAD_BEEFu32; offset];
            vpadded.extend_from_slice(&values);
            let dk = DeviceVec::from_slice(&padded);
            let dv = DeviceVec::from_slice(&vpadded);
            // SAFETY: as above, for both allocations.
            let (kp, vp) = unsafe { (dk.ptr().add(offset), dv.ptr().add(offset)) };
            let buffers = RawSortBuffers {
                test_flags: grid,
                ..RawSortBuffers::pairs(kp, vp, n)
            };
            sorter
                .run(&buffers, Order::Ascending, strategy)
                .unwrap_or_else(|e| panic!("pairs n = {n}, grid {grid:#x}, offset {offset}: {e}"));
            let (gk, gv) = (dk.to_vec(), dv.to_vec());
            let want: Vec<u32> = cpu_permutation(&input, Order::Ascending)
                .into_iter()
                .map(|i| i as u32)
                .collect();
            assert!(
                gv[offset..] == want[..],
                "pairs n = {n}, grid {grid:#x}, offset {offset}"
            );
            assert!(gk[..offset].iter().all(|&k| k == 0xDEAD_BEEF));
        }
    }
}

/// Elements of guard band on each side of a sorted slice: 64 bytes, so that element offset `o`
/// of the slice is byte offset `o * size_of::<K>()` within 16 bytes of the allocation.
fn guard_len<K>() -> usize {
    64 / size_of::<K>()
}

/// The byte every guard element holds (and the slice's surroundings must keep).
const GUARD_BYTE: u8 = 0xA5;

/// Sorts `pristine` (a device copy of `input`) in place at element `offset` of a guarded
/// allocation, on the sorter's stream, for every strategy of `strategies`, and compares the
/// slice with `want` and both guard bands with their poison. The slice is copied in on the
/// device (`cudaMemcpyAsync`), so large sizes cost one upload.
fn check_guarded_slice<K: TestKey>(
    sorter: &mut Sorter,
    pristine: &DeviceVec<K>,
    want: &[K],
    offset: usize,
    strategies: &[Strategy],
    label: &str,
) {
    use cuda_rt_sys::*;
    let n = want.len();
    let guard = guard_len::<K>();
    let total = guard + offset + n + guard;
    let whole = DeviceVec::<K>::new(total);
    let bytes = size_of::<K>();
    // SAFETY: `offset + guard` elements into an allocation of `total`.
    let slice = unsafe { whole.ptr().add(guard + offset) };
    let mut got = Vec::<K>::with_capacity(total);
    for strategy in strategies {
        let what = format!(
            "{label}: {} n = {n}, offset {offset} ({} bytes into 16), {:?} {:?}",
            std::any::type_name::<K>(),
            offset * bytes % 16,
            strategy.driver,
            strategy.tile
        );
        // SAFETY: both copies and the memset lie inside their allocations, ordered on the
        // sorter's stream before the sort.
        unsafe {
            check(
                cudaMemsetAsync(
                    whole.ptr().cast(),
                    GUARD_BYTE.into(),
                    total * bytes,
                    sorter.stream.0,
                ),
                "cudaMemsetAsync",
            );
            check(
                cudaMemcpyAsync(
                    slice.cast(),
                    pristine.ptr().cast(),
                    size_of_val(want),
                    cudaMemcpyDeviceToDevice,
                    sorter.stream.0,
                ),
                "cudaMemcpyAsync",
            );
        }
        sorter
            .run(&RawSortBuffers::keys(slice, n), Order::Ascending, *strategy)
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        got.clear();
        // SAFETY: the copy writes `total` elements into the Vec's capacity before set_len;
        // the sort has completed (run waits for it).
        unsafe {
            check(
                cudaMemcpy(
                    got.as_mut_ptr().cast(),
                    whole.ptr().cast(),
                    total * bytes,
                    cudaMemcpyDeviceToHost,
                ),
                "cudaMemcpy D2H",
            );
            got.set_len(total);
        }
        let (before, rest) = got.split_at(guard + offset);
        let (sorted, after) = rest.split_at(n);
        let poison = |k: &K| {
            let b = k.bits();
            (0..bytes).all(|i| (b >> (8 * i)) as u8 == GUARD_BYTE)
        };
        assert!(
            before.iter().all(poison),
            "{what}: the guard before the slice was written"
        );
        assert!(
            after.iter().all(poison),
            "{what}: the guard after the slice was written"
        );
        assert_same_keys(sorted, want, &what);
    }
}

/// Sizes that cross every internal threshold of the sort of `K` keys: one tile of either
/// width, one merge tile, and the multi-pass sizes where persistent merge groups loop over
/// several tiles each (from about 2 merge tiles per SM on).
fn threshold_sizes<K: TestKey>() -> Vec<usize> {
    use cuda_rt_kernels::sort::raw::layout;
    let narrow = Strategy {
        tile: TileWidth::Narrow,
        ..Strategy::default()
    };
    let wide = Strategy {
        tile: TileWidth::Wide,
        ..Strategy::default()
    };
    let l = layout(1, K::FORMAT, 0, narrow).unwrap();
    let wide_tile = layout(1, K::FORMAT, 0, wide).unwrap().sort_tile as usize;
    let (tile, merge) = (l.sort_tile as usize, l.merge_tile as usize);
    let mut sizes = vec![
        merge - 1,
        merge + 1,
        tile - 1,
        tile + 1,
        wide_tile + 1,
        3 * merge + 1,
        9 * tile + 5,
    ];
    if !quick() {
        sizes.extend([(1 << 21) + 3, (1 << 23) + 5, (1 << 24) + 7, (1 << 25) + 1]);
    }
    sizes
}

/// Keys of every width sorted in place in slices that start at every element offset 0..8 of
/// an allocation (0: the 16-byte aligned control), with guard bands before and after that
/// must stay untouched, at sizes past every threshold, host-queued and device-driven, narrow
/// and wide tiles. Keys-only merge tiles move through bulk copies that keep each run's offset
/// within 16 bytes in shared memory; the slice's offset decides those offsets.
fn unaligned_slices<K: TestKey>(seed: u64) {
    use rayon::prelude::*;
    let mut strategies = Vec::new();
    let drivers: &[Driver] = if host_driver_only() {
        &[Driver::Host]
    } else {
        &[Driver::Host, Driver::Device]
    };
    for &driver in drivers {
        for tile in [TileWidth::Narrow, TileWidth::Wide] {
            strategies.push(Strategy {
                driver,
                tile,
                ..Strategy::default()
            });
        }
    }
    let mut sorter = Sorter::new();
    for n in threshold_sizes::<K>() {
        let input: Vec<K> = make(Dist::Uniform, n, seed ^ n as u64);
        // Keys only: equal keys are equal bits, so an unstable reference sort is exact.
        let mut want = input.clone();
        want.par_sort_unstable_by(K::total_cmp_key);
        let pristine = DeviceVec::from_slice(&input);
        // Quick runs (sanitizers): the control and three odd offsets.
        let offsets: &[usize] = if quick() {
            &[0, 1, 3, 7]
        } else {
            &[0, 1, 2, 3, 4, 5, 6, 7]
        };
        for &offset in offsets {
            check_guarded_slice(
                &mut sorter,
                &pristine,
                &want,
                offset,
                &strategies,
                "unaligned",
            );
        }
    }
}

#[test]
fn unaligned_slices_of_1_byte_keys() {
    let Some(_gpu) = gpu_test::gpu() else { return };
    unaligned_slices::<u8>(11);
}

#[test]
fn unaligned_slices_of_2_byte_keys() {
    let Some(_gpu) = gpu_test::gpu() else { return };
    unaligned_slices::<i16>(12);
}

#[test]
fn unaligned_slices_of_4_byte_keys() {
    let Some(_gpu) = gpu_test::gpu() else { return };
    unaligned_slices::<u32>(13);
    if !quick() {
        unaligned_slices::<f32>(14);
    }
}

#[test]
fn unaligned_slices_of_8_byte_keys() {
    let Some(_gpu) = gpu_test::gpu() else { return };
    unaligned_slices::<u64>(15);
}

/// Random lengths (up to a few merge passes) at random element offsets of a guarded
/// allocation, every key width, both drivers.
#[test]
fn prop_unaligned_slices() {
    let Some(_gpu) = gpu_test::gpu() else { return };
    fn one<K: TestKey>(n: usize, offset: usize, strategy: Strategy, seed: u64) {
        let input: Vec<K> = make(Dist::Uniform, n, seed);
        let want = cpu_sorted(&input, Order::Ascending);
        let pristine = DeviceVec::from_slice(&input);
        check_guarded_slice(
            &mut Sorter::new(),
            &pristine,
            &want,
            offset,
            &[strategy],
            "prop",
        );
    }
    let cases = (
        0usize..4,
        0usize..300_000,
        0usize..8,
        any::<bool>(),
        any::<u64>(),
    );
    check_property(cases, |(width, n, offset, device, seed)| {
        let strategy = Strategy {
            driver: if device && !host_driver_only() {
                Driver::Device
            } else {
                Driver::Host
            },
            ..Strategy::default()
        };
        match width {
            0 => one::<u8>(n, offset, strategy, seed),
            1 => one::<u16>(n, offset, strategy, seed),
            2 => one::<i32>(n, offset, strategy, seed),
            _ => one::<f64>(n, offset, strategy, seed),
        }
    });
}

/// A host-queued sort whose launch of a later stage fails has queued the stages before it:
/// `enqueue` returns the launch error only once they have finished, so the caller may reuse or
/// free the keys at once (the stream is idle when the error arrives).
#[test]
fn a_failed_host_launch_returns_after_the_stages_queued_before_it() {
    let Some(_gpu) = gpu_test::gpu() else { return };
    use cuda_rt_kernels::sort::ffi::flags::FAIL_STAGE_SHIFT;
    use cuda_rt_kernels::sort::raw::layout;
    use cuda_rt_kernels::sort::SortKey;
    let n = if quick() { 1 << 18 } else { 1 << 24 };
    let strategy = Strategy {
        driver: Driver::Host,
        ..Strategy::default()
    };
    let passes = layout(n, u32::FORMAT, 0, strategy).unwrap().passes;
    let input: Vec<u32> = make(Dist::Uniform, n, 21);
    let d = DeviceVec::from_slice(&input);
    let mut sorter = Sorter::new();
    for stage in [1, passes] {
        let buffers = RawSortBuffers {
            test_flags: (stage + 1) << FAIL_STAGE_SHIFT,
            ..RawSortBuffers::keys(d.ptr(), n)
        };
        // SAFETY: `d` holds n keys used by nothing else; the stream is live.
        let result = unsafe {
            sorter
                .workspace
                .enqueue(&buffers, Order::Ascending, strategy, sorter.stream.0)
        };
        // SAFETY: a live stream.
        let idle = unsafe { cuda_rt_sys::cudaStreamQuery(sorter.stream.0) };
        match result {
            Err(SortError::Cuda { status, .. }) => {
                assert_ne!(status, cuda_rt_sys::cudaSuccess)
            }
            other => panic!("stage {stage} of {passes}: expected the launch error, got {other:?}"),
        }
        assert_eq!(
            idle,
            cuda_rt_sys::cudaSuccess,
            "stage {stage} of {passes}: the error returned while the stages queued before it \
             still ran ({})",
            gpu_test::error_name(idle)
        );
        // The chain never reached its last stage, and the status word says so.
        // SAFETY: as above.
        let outcome = unsafe { sorter.workspace.finish(sorter.stream.0) };
        assert!(
            matches!(outcome, Err(SortError::Incomplete { .. })),
            "stage {stage} of {passes}: {outcome:?}"
        );
    }
    // The context is still usable, and a good sort afterwards succeeds.
    let got = sorter.keys(&input, Order::Ascending, strategy, true);
    assert_same_keys(
        &got,
        &cpu_sorted(&input, Order::Ascending),
        "after failures",
    );
}
