//! The GPU merge sort against the CPU's stable sort, through cuda-rt-testing's property runner: every
//! key type, both orders, pairs, edge lengths around the tile size, several distributions, every
//! strategy, unaligned slices, and the error path of the device-side chain.
//!
//! Inputs and outputs lie between guard bands that the sort must not write, outputs are
//! poisoned before each sort (and so is the sort's scratch), and a failing case is shrunk to
//! its smallest input. The table-driven tests list their cases (`Check::examples`); the
//! `prop_*` tests generate them.

mod sort_common;

use cuda_rt::{DeviceCopy, DeviceMemory, DeviceMemoryMut, DeviceView, DeviceViewMut, Stream};
use cuda_rt_kernels::sort::ffi::choices;
use cuda_rt_kernels::sort::raw::{sort_tile_len, RawSortBuffers};
use cuda_rt_kernels::sort::{Cuts, Driver, Merge, Order, SortError, Strategy, TileWidth};
use cuda_rt_testing::compare::{Bitwise, StableByKey};
use cuda_rt_testing::inputs::{self, Data, DISTS};
use cuda_rt_testing::{Case, Check, Compare, Failure};
use proptest::prelude::*;
use sort_common::*;
use std::fmt::Debug;

const ORDERS: [Order; 2] = [Order::Ascending, Order::Descending];

fn strategies() -> Vec<Strategy> {
    let mut all = Vec::new();
    for driver in [Driver::Device, Driver::Host] {
        for merge in [
            Merge::TwoWay(Cuts::Fused),
            Merge::TwoWay(Cuts::Kernel),
            Merge::FourWay,
        ] {
            for tile in [TileWidth::Narrow, TileWidth::Wide] {
                all.push(Strategy {
                    driver,
                    merge,
                    tile,
                });
            }
        }
    }
    all
}

/// The runner's settings: 48 generated cases per property (8 for quick runs, under
/// compute-sanitizer).
fn runner() -> Check {
    Check::new().cases(if quick() { 8 } else { 48 })
}

// ---- Sorting guarded device data ------------------------------------------------------------

/// Sorts `keys` on `stream` through the raw layer with `sorter` (scratch poisoned first), in
/// place, or out of place from `input` when given; waits for the sort.
#[allow(clippy::too_many_arguments)]
fn sort_keys_on<K: TestKey>(
    sorter: &mut Sorter,
    stream: &Stream,
    input: Option<&DeviceView<'_, K>>,
    keys: &mut DeviceViewMut<'_, K>,
    order: Order,
    strategy: Strategy,
    test_flags: u32,
) -> Result<(), Failure> {
    let n = keys.len();
    let sorted = keys.with_ptr_mut_on(stream, |out| {
        let mut sort = |keys_in: *const K| {
            let buffers = RawSortBuffers {
                keys_in: keys_in.cast(),
                keys_out: out.cast(),
                test_flags,
                ..RawSortBuffers::keys(out, n)
            };
            // SAFETY: `keys_in` and `out` are n keys of device memory (the same range, or the
            // ranges of two guarded buffers, which do not overlap), ordered on `stream` and kept
            // alive by enqueue/with_ptr_mut_on, used by nothing else; run_on waits for the sort.
            unsafe { sorter.run_on(&buffers, order, strategy, stream.as_raw()) }
        };
        match input {
            Some(input) => input.with_ptr_on(stream, sort),
            None => Ok(sort(out.cast_const())),
        }
    });
    sorted???;
    Ok(())
}

/// [`sort_keys_on`] for keys and values.
#[allow(clippy::too_many_arguments)]
fn sort_pairs_on<K: TestKey, V: DeviceCopy>(
    sorter: &mut Sorter,
    stream: &Stream,
    input: Option<(&DeviceView<'_, K>, &DeviceView<'_, V>)>,
    keys: &mut DeviceViewMut<'_, K>,
    values: &mut DeviceViewMut<'_, V>,
    order: Order,
    strategy: Strategy,
    test_flags: u32,
) -> Result<(), Failure> {
    let n = keys.len();
    let sorted = keys.with_ptr_mut_on(stream, |keys_out| {
        values
            .with_ptr_mut_on(stream, |values_out| {
                let mut sort = |keys_in: *const K, values_in: *const V| {
                    let buffers = RawSortBuffers {
                        keys_in: keys_in.cast(),
                        values_in: values_in.cast(),
                        test_flags,
                        ..RawSortBuffers::pairs(keys_out, values_out, n)
                    };
                    // SAFETY: as in sort_keys_on, for n keys and n values.
                    unsafe { sorter.run_on(&buffers, order, strategy, stream.as_raw()) }
                };
                match input {
                    Some((keys_in, values_in)) => keys_in
                        .with_ptr_on(stream, |k| values_in.with_ptr_on(stream, |v| sort(k, v)))
                        .and_then(|sorted| sorted),
                    None => Ok(sort(keys_out.cast_const(), values_out.cast_const())),
                }
            })
            .and_then(|sorted| sorted)
    });
    sorted???;
    Ok(())
}

/// One sort of `input` checked against the CPU's: in place, or out of place into a poisoned
/// output (the input must stay as it was).
fn keys_case<K: TestKey>(
    case: &mut Case,
    input: &[K],
    order: Order,
    strategy: Strategy,
    in_place: bool,
) -> Result<(), Failure> {
    let want = cpu_sorted(input, order);
    let mut sorter = Sorter::new();
    let what = std::any::type_name::<K>();
    if in_place {
        let mut keys = case.upload("keys", input)?;
        sort_keys_on(
            &mut sorter,
            case.stream(),
            None,
            &mut keys.view_mut(),
            order,
            strategy,
            0,
        )?;
        case.compare(&keys, &want, &Bitwise)
            .map_err(|f| f.context(what))
    } else {
        let source = case.upload("input", input)?;
        let mut keys = case.output::<K>("keys", input.len())?;
        let view = source.view();
        sort_keys_on(
            &mut sorter,
            case.stream(),
            Some(&view),
            &mut keys.view_mut(),
            order,
            strategy,
            0,
        )?;
        case.compare(&keys, &want, &Bitwise)
            .map_err(|f| f.context(what))?;
        case.check_unchanged(&source)
    }
}

/// The comparator of pairs sorted in `order`: sorted by key, stable, a permutation.
fn stable(order: Order) -> StableByKey {
    StableByKey {
        descending: matches!(order, Order::Descending),
    }
}

/// One sort of `keys` with values `make_value(i)` (so that the exact permutation shows, equal
/// keys keeping their input order included), checked against the CPU: in place (at element
/// `offset` of the allocations), or out of place into poisoned outputs.
#[allow(clippy::too_many_arguments)]
fn pairs_case<K: TestKey, V: DeviceCopy + PartialEq + Debug>(
    case: &mut Case,
    sorter: &mut Sorter,
    keys: &[K],
    make_value: impl Fn(usize) -> V,
    order: Order,
    strategy: Strategy,
    in_place: bool,
    (test_flags, offset): (u32, usize),
) -> Result<(), Failure> {
    let n = keys.len();
    let values: Vec<V> = (0..n).map(&make_value).collect();
    let what = format!(
        "pairs {} -> {} bytes, {order:?} {strategy:?}",
        std::any::type_name::<K>(),
        size_of::<V>()
    );
    let (got_keys, got_values) = if in_place {
        let mut dk = case.upload_at("keys", keys, offset)?;
        let mut dv = case.upload_at("values", &values, offset)?;
        let (mut k, mut v) = (dk.view_mut(), dv.view_mut());
        sort_pairs_on(
            sorter,
            case.stream(),
            None,
            &mut k,
            &mut v,
            order,
            strategy,
            test_flags,
        )?;
        (case.download(&dk)?, case.download(&dv)?)
    } else {
        let dk = case.upload("keys in", keys)?;
        let dv = case.upload("values in", &values)?;
        let mut out_keys = case.output::<K>("keys", n)?;
        let mut out_values = case.output::<V>("values", n)?;
        let (mut k, mut v) = (out_keys.view_mut(), out_values.view_mut());
        let input = Some((&dk.view(), &dv.view()));
        sort_pairs_on(
            sorter,
            case.stream(),
            input,
            &mut k,
            &mut v,
            order,
            strategy,
            test_flags,
        )?;
        case.check_unchanged(&dk)?;
        case.check_unchanged(&dv)?;
        (case.download(&out_keys)?, case.download(&out_values)?)
    };
    let got: Vec<(K, V)> = got_keys.into_iter().zip(got_values).collect();
    let reference: Vec<(K, V)> = keys.iter().copied().zip(values).collect();
    stable(order)
        .check(&got, &reference)
        .map_err(|f| f.context(&what))
}

// ---- Listed cases ---------------------------------------------------------------------------

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

/// Every edge length, distribution and order of `K`, in place and out of place by turns.
fn check_type<K: TestKey>(seed: u64) {
    let mut examples = Vec::new();
    for n in edge_lengths::<K>() {
        for (d, &dist) in DISTS.iter().enumerate() {
            for order in ORDERS {
                let input = Data::<K>::generate(dist, n, seed ^ (n as u64) << 8 ^ d as u64);
                examples.push((input, order, (n + d) % 2 == 0));
            }
        }
    }
    runner()
        .examples(examples, |case, (input, order, in_place)| {
            keys_case(case, input, *order, Strategy::default(), *in_place)
        })
        .assert_passed();
}

#[test]
fn every_key_type_edge_lengths_and_distributions() {
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
    let tile = sort_tile_len::<u32>(0).unwrap();
    let mut examples = Vec::new();
    for n in [tile + 1, 4 * tile - 5, 9 * tile + 77] {
        for dist in [Dist::Uniform, Dist::FewDistinct, Dist::Sawtooth] {
            for strategy in strategies() {
                examples.push((Data::<u32>::generate(dist, n, n as u64), strategy));
            }
        }
    }
    runner()
        .examples(examples, |case, (input, strategy)| {
            keys_case(case, input, Order::Ascending, *strategy, false)
        })
        .assert_passed();
}

/// One case of [`pairs_are_stable_for_every_value_size`].
#[derive(Debug, Clone)]
struct PairsCase {
    order: Order,
    n: usize,
    dist: Dist,
    strategy: Strategy,
    /// Picks in place or out of place for each key and value type.
    turn: usize,
}

#[test]
fn pairs_are_stable_for_every_value_size() {
    let mut examples = Vec::new();
    for order in ORDERS {
        for (turn, n) in [0usize, 1, 2, 4095, 4096, 4097, 11_264, 11_265, 35_000]
            .into_iter()
            .enumerate()
        {
            for dist in [
                Dist::FewDistinct,
                Dist::AllEqual,
                Dist::Uniform,
                Dist::Sawtooth,
            ] {
                let all = strategies();
                let strategy = all[turn % all.len()];
                examples.push(PairsCase {
                    order,
                    n,
                    dist,
                    strategy,
                    turn,
                });
            }
        }
    }
    runner()
        .examples(examples, |case, c| {
            let (mut sorter, n, s, order) = (Sorter::new(), c.n, c.strategy, c.order);
            let (even, odd) = (c.turn % 2 == 0, c.turn % 2 == 1);
            let keys: Vec<u32> = make(c.dist, n, 77 + n as u64);
            pairs_case(
                case,
                &mut sorter,
                &keys,
                |i| i as u32,
                order,
                s,
                even,
                (0, 0),
            )?;
            pairs_case(
                case,
                &mut sorter,
                &keys,
                |i| i as u64 * 3,
                order,
                s,
                odd,
                (0, 0),
            )?;
            let quad = |i: usize| [i as u32, 7, !(i as u32), 9];
            pairs_case(case, &mut sorter, &keys, quad, order, s, false, (0, 0))?;
            let keys: Vec<f64> = make(Dist::Specials, n, 5 + n as u64);
            pairs_case(
                case,
                &mut sorter,
                &keys,
                |i| i as u32,
                order,
                s,
                true,
                (0, 0),
            )?;
            let keys: Vec<i8> = make(c.dist, n, 9 + n as u64);
            pairs_case(
                case,
                &mut sorter,
                &keys,
                |i| [i as u64, 1],
                order,
                s,
                false,
                (0, 0),
            )?;
            let keys: Vec<u16> = make(c.dist, n, 11 + n as u64);
            pairs_case(
                case,
                &mut sorter,
                &keys,
                |i| i as u64,
                order,
                s,
                true,
                (0, 0),
            )
        })
        .assert_passed();
}

#[test]
fn same_input_twice_gives_identical_output() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
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

/// One sort of [`millions_of_keys`].
#[derive(Debug, Clone, Copy)]
enum Big {
    U32(Strategy),
    F64Descending,
    I16,
    PairsU64,
    PairsU32Descending,
}

/// Four-way passes against the CPU where the groups of four runs take every shape: 1 to 33
/// sorted tiles (an odd number of doublings puts a two-way pass first), a last group of one,
/// two or three runs, a short last run, a last merge tile of one key; keys that tie across
/// all four runs (few distinct, all equal) with their input positions as values, so that
/// stability across runs A, B, C and D shows; every key width.
#[test]
fn four_way_groups_of_every_shape() {
    let narrow = Strategy {
        merge: Merge::FourWay,
        tile: TileWidth::Narrow,
        driver: if host_driver_only() {
            Driver::Host
        } else {
            Driver::Device
        },
    };
    let host = Strategy {
        driver: Driver::Host,
        ..narrow
    };
    let l = cuda_rt_kernels::sort::raw::layout(
        1,
        <u32 as cuda_rt_kernels::sort::SortKey>::FORMAT,
        0,
        narrow,
    )
    .unwrap();
    let (tile, merge) = (l.sort_tile as usize, l.merge_tile as usize);
    let tiles: &[usize] = if quick() {
        &[2, 5, 16]
    } else {
        &[1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 15, 16, 17, 33]
    };
    let mut examples = Vec::new();
    for (i, &t) in tiles.iter().enumerate() {
        for extra in [0, 1, merge - 1, tile / 3] {
            let n = t * tile + extra;
            let dist = [
                Dist::FewDistinct,
                Dist::AllEqual,
                Dist::Uniform,
                Dist::Sawtooth,
            ][i % 4];
            let strategy = if (i + extra) % 2 == 0 { narrow } else { host };
            examples.push((n, dist, strategy));
        }
    }
    runner()
        .examples(examples, |case, &(n, dist, strategy)| {
            let mut sorter = Sorter::new();
            let input: Vec<u32> = make(dist, n, n as u64);
            let order = Order::Ascending;
            keys_case(case, &input, order, strategy, n % 2 == 0)?;
            pairs_case(
                case,
                &mut sorter,
                &input,
                |i| i as u32,
                order,
                strategy,
                true,
                (0, 0),
            )?;
            let wide: Vec<u64> = make(dist, n, 3 + n as u64);
            keys_case(case, &wide, Order::Descending, strategy, false)?;
            let value = |i: usize| [i as u64, !(i as u64)];
            pairs_case(
                case,
                &mut sorter,
                &wide,
                value,
                order,
                strategy,
                false,
                (0, 0),
            )?;
            let bytes: Vec<u8> = make(dist, n, 5 + n as u64);
            keys_case(case, &bytes, order, strategy, true)?;
            pairs_case(
                case,
                &mut sorter,
                &bytes,
                |i| i as u64,
                order,
                strategy,
                true,
                (0, 0),
            )
        })
        .assert_passed();
}

#[test]
fn millions_of_keys() {
    if quick() {
        eprintln!("skipped millions_of_keys: CUDA_RT_SORT_TEST_QUICK=1");
        return;
    }
    let mut examples: Vec<Big> = strategies().into_iter().map(Big::U32).collect();
    examples.extend([
        Big::F64Descending,
        Big::I16,
        Big::PairsU64,
        Big::PairsU32Descending,
    ]);
    runner()
        .examples(examples, |case, big| {
            let mut sorter = Sorter::new();
            let default = Strategy::default();
            match *big {
                Big::U32(strategy) => {
                    let input: Vec<u32> = make(Dist::Uniform, 3_000_017, 1);
                    keys_case(case, &input, Order::Ascending, strategy, false)
                }
                Big::F64Descending => {
                    let input: Vec<f64> = make(Dist::Specials, (1 << 22) + 1, 2);
                    keys_case(case, &input, Order::Descending, default, true)
                }
                Big::I16 => {
                    let input: Vec<i16> = make(Dist::FewDistinct, 5_000_000, 3);
                    keys_case(case, &input, Order::Ascending, default, false)
                }
                Big::PairsU64 => {
                    let keys: Vec<u64> = make(Dist::FewDistinct, 2_000_003, 4);
                    let value = |i: usize| [i as u64, !(i as u64)];
                    let order = Order::Ascending;
                    pairs_case(
                        case,
                        &mut sorter,
                        &keys,
                        value,
                        order,
                        default,
                        false,
                        (0, 0),
                    )
                }
                Big::PairsU32Descending => {
                    let keys: Vec<u32> = make(Dist::Uniform, 1 << 21, 5);
                    let order = Order::Descending;
                    pairs_case(
                        case,
                        &mut sorter,
                        &keys,
                        |i| i as u32,
                        order,
                        default,
                        true,
                        (0, 0),
                    )
                }
            }
        })
        .assert_passed();
}

#[test]
fn a_failed_device_side_launch_is_reported() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
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
            merge: Merge::TwoWay(cuts),
            ..Strategy::default()
        };
        match sorter.run(&buffers, Order::Ascending, strategy) {
            Err(SortError::DeviceLaunch { stage: s, status }) => {
                assert_eq!(s, stage);
                // A block of 0 threads: the device runtime reports an invalid configuration.
                assert_ne!(status, cuda_rt_sys::cudaSuccess);
                eprintln!(
                    "stage {stage} {cuts:?} launch {launch:#x}: {}",
                    cuda_rt_testing::error_name(status)
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
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
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

// ---- Generated cases ------------------------------------------------------------------------

fn order() -> impl proptest::strategy::Strategy<Value = Order> {
    proptest::sample::select(ORDERS.to_vec())
}

fn sort_strategy() -> impl proptest::strategy::Strategy<Value = Strategy> {
    proptest::sample::select(strategies())
}

/// Keys of `K`: lengths up to `max_len` (likely around one, two and three tiles), every
/// distribution.
fn keys<K: TestKey>(max_len: usize) -> inputs::DataStrategy<K> {
    let tile = sort_tile_len::<K>(0).unwrap();
    inputs::data::<K>(inputs::lengths(max_len, &[tile, 2 * tile, 3 * tile]))
}

/// Keys of `K` sorted in a random order by a random strategy, in place or not, as the CPU
/// sorts them.
fn prop_keys<K: TestKey>(max_len: usize) {
    runner()
        .property(
            (keys::<K>(max_len), order(), sort_strategy(), any::<bool>()),
            |case, (input, order, strategy, in_place)| {
                keys_case(case, input, *order, *strategy, *in_place)
            },
        )
        .assert_passed();
}

#[test]
fn prop_u32() {
    prop_keys::<u32>(60_000);
}

#[test]
fn prop_i64() {
    prop_keys::<i64>(40_000);
}

#[test]
fn prop_f32() {
    prop_keys::<f32>(60_000);
}

#[test]
fn prop_f64() {
    prop_keys::<f64>(40_000);
}

#[test]
fn prop_u8_i16_u16() {
    let inputs = (
        keys::<u8>(70_000),
        keys::<i16>(70_000),
        keys::<u16>(70_000),
        order(),
        sort_strategy(),
        any::<bool>(),
    );
    runner()
        .property(inputs, |case, (a, b, c, order, strategy, in_place)| {
            keys_case(case, a, *order, *strategy, *in_place)?;
            keys_case(case, b, *order, *strategy, !*in_place)?;
            keys_case(case, c, *order, *strategy, *in_place)
        })
        .assert_passed();
}

#[test]
fn prop_pairs() {
    let inputs = (
        keys::<i32>(40_000),
        keys::<f32>(40_000),
        keys::<u64>(40_000),
        order(),
        sort_strategy(),
        any::<bool>(),
    );
    runner()
        .property(inputs, |case, (a, b, c, order, s, in_place)| {
            let (mut sorter, order, s, in_place) = (Sorter::new(), *order, *s, *in_place);
            pairs_case(
                case,
                &mut sorter,
                a,
                |i| i as u32,
                order,
                s,
                in_place,
                (0, 0),
            )?;
            let value = |i: usize| [i as u64, 3];
            pairs_case(case, &mut sorter, b, value, order, s, !in_place, (0, 0))?;
            pairs_case(
                case,
                &mut sorter,
                c,
                |i| i as u64,
                order,
                s,
                in_place,
                (0, 0),
            )
        })
        .assert_passed();
}

/// The paths the default strategy does not take: merge grids of one tile per group (flag
/// GRID_PER_TILE), each stage launching the next from the device (LAUNCH_CHAINED) rather than
/// the first grid queueing them all, and buffers that start off the 16-byte alignment of an
/// allocation (bulk copies then move each run's aligned middle only, and merged tiles leave
/// through the threads' stores). Keys and pairs, in place, against the CPU; the guard bands
/// around the offset buffers are never written.
#[test]
fn per_tile_grids_and_unaligned_buffers_sort_like_the_cpu() {
    use cuda_rt_kernels::sort::ffi::flags::{GRID_PER_TILE, LAUNCH_CHAINED};
    let tile = sort_tile_len::<u32>(0).unwrap();
    let lengths: &[usize] = if quick() {
        &[3 * tile + 7]
    } else {
        &[3 * tile + 7, 9 * tile + 1, (1 << 20) + 13]
    };
    let mut examples = Vec::new();
    for &n in lengths {
        for (grid, offset) in [
            (GRID_PER_TILE, 0usize),
            (0, 1),
            (GRID_PER_TILE, 3),
            (LAUNCH_CHAINED, 0),
            (LAUNCH_CHAINED | GRID_PER_TILE, 1),
        ] {
            for merge in [Merge::Auto, Merge::FourWay] {
                examples.push((n, grid, offset, merge));
            }
        }
    }
    runner()
        .examples(examples, |case, &(n, grid, offset, merge)| {
            let input: Vec<u32> = make(Dist::Uniform, n, n as u64 ^ offset as u64);
            let strategy = Strategy {
                driver: if host_driver_only() {
                    Driver::Host
                } else {
                    Driver::Device
                },
                merge,
                ..Strategy::default()
            };
            let mut sorter = Sorter::new();
            let mut keys = case.upload_at("keys", &input, offset)?;
            let view = &mut keys.view_mut();
            sort_keys_on(
                &mut sorter,
                case.stream(),
                None,
                view,
                Order::Ascending,
                strategy,
                grid,
            )?;
            case.compare(&keys, &cpu_sorted(&input, Order::Ascending), &Bitwise)?;
            // Pairs: values are the input positions, so stability shows.
            let order = Order::Ascending;
            let flags = (grid, offset);
            pairs_case(
                case,
                &mut sorter,
                &input,
                |i| i as u32,
                order,
                strategy,
                true,
                flags,
            )
        })
        .assert_passed();
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
        sizes.extend([
            (1 << 21) + 3,
            (1 << 23) + 5,
            choices::FOUR_WAY_MIN_KEYS + 7,
            choices::DEVICE_DRIVER_MIN_KEYS + 1,
        ]);
    }
    sizes
}

/// Sorts `pristine` (a device copy of `input`) in place at element `offset` of a guarded,
/// poisoned allocation, on the case's stream, for every strategy of `strategies`, and compares
/// the slice with `want` and both guard bands with their canary. The slice is copied in on the
/// device, so large sizes cost one upload.
fn guarded_slices<K: TestKey>(
    case: &Case,
    pristine: &DeviceView<'_, K>,
    want: &[K],
    offset: usize,
    strategies: &[Strategy],
) -> Result<(), Failure> {
    let n = want.len();
    let mut sorter = Sorter::new();
    let mut slice = case.output_at::<K>("slice", n, offset)?;
    for strategy in strategies {
        let what = format!(
            "{} n = {n}, offset {offset} ({} bytes into 16), {:?} {:?}",
            std::any::type_name::<K>(),
            offset * size_of::<K>() % 16,
            strategy.driver,
            strategy.tile
        );
        let mut view = slice.view_mut();
        view.copy_from_device_async(case.stream(), pristine)?;
        let (order, stream) = (Order::Ascending, case.stream());
        sort_keys_on(&mut sorter, stream, None, &mut view, order, *strategy, 0)
            .map_err(|f| f.context(&what))?;
        case.compare(&slice, want, &Bitwise)
            .map_err(|f| f.context(&what))?;
    }
    Ok(())
}

/// Keys of every width sorted in place in slices that start at every element offset 0..8 past
/// the 256-byte alignment of an allocation (0: the aligned control), with guard bands before
/// and after that must stay untouched, at sizes past every threshold, host-queued and
/// device-driven, narrow and wide tiles. Keys-only merge tiles move through bulk copies that
/// keep each run's offset within 16 bytes in shared memory; the slice's offset decides those
/// offsets.
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
        // The other way of merging than the library's choice at these sizes.
        strategies.push(Strategy {
            driver,
            merge: Merge::FourWay,
            tile: TileWidth::Narrow,
        });
        strategies.push(Strategy {
            driver,
            merge: Merge::TwoWay(Cuts::Fused),
            tile: TileWidth::Wide,
        });
    }
    // Quick runs (sanitizers): the control and three odd offsets.
    let offsets: &[usize] = if quick() {
        &[0, 1, 3, 7]
    } else {
        &[0, 1, 2, 3, 4, 5, 6, 7]
    };
    runner()
        .examples(threshold_sizes::<K>(), |case, &n| {
            let input: Vec<K> = make(Dist::Uniform, n, seed ^ n as u64);
            // Keys only: equal keys are equal bits, so an unstable reference sort is exact.
            let mut want = input.clone();
            want.par_sort_unstable_by(K::total_order);
            let pristine = case.upload("pristine", &input)?;
            for &offset in offsets {
                guarded_slices(case, &pristine.view(), &want, offset, &strategies)?;
            }
            case.check_unchanged(&pristine)
        })
        .assert_passed();
}

#[test]
fn unaligned_slices_of_1_byte_keys() {
    unaligned_slices::<u8>(11);
}

#[test]
fn unaligned_slices_of_2_byte_keys() {
    unaligned_slices::<i16>(12);
}

#[test]
fn unaligned_slices_of_4_byte_keys() {
    unaligned_slices::<u32>(13);
    if !quick() {
        unaligned_slices::<f32>(14);
    }
}

#[test]
fn unaligned_slices_of_8_byte_keys() {
    unaligned_slices::<u64>(15);
}

/// Random lengths (up to a few merge passes) at random element offsets of a guarded
/// allocation, every key width, both drivers.
#[test]
fn prop_unaligned_slices() {
    fn one<K: TestKey>(
        case: &mut Case,
        n: usize,
        offset: usize,
        strategy: Strategy,
        seed: u64,
    ) -> Result<(), Failure> {
        let input: Vec<K> = make(Dist::Uniform, n, seed);
        let want = cpu_sorted(&input, Order::Ascending);
        let pristine = case.upload("pristine", &input)?;
        guarded_slices(case, &pristine.view(), &want, offset, &[strategy])
    }
    let cases = (
        0usize..4,
        0usize..300_000,
        0usize..8,
        any::<bool>(),
        any::<u64>(),
    );
    runner()
        .property(cases, |case, &(width, n, offset, device, seed)| {
            let strategy = Strategy {
                driver: if device && !host_driver_only() {
                    Driver::Device
                } else {
                    Driver::Host
                },
                ..Strategy::default()
            };
            match width {
                0 => one::<u8>(case, n, offset, strategy, seed),
                1 => one::<u16>(case, n, offset, strategy, seed),
                2 => one::<i32>(case, n, offset, strategy, seed),
                _ => one::<f64>(case, n, offset, strategy, seed),
            }
        })
        .assert_passed();
}

/// A host-queued sort whose launch of a later stage fails has queued the stages before it:
/// `with_ptr_on` returns the launch error only once they have finished, so the caller may reuse or
/// free the keys at once (the stream is idle when the error arrives).
#[test]
fn a_failed_host_launch_returns_after_the_stages_queued_before_it() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
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
                .with_ptr_on(&buffers, Order::Ascending, strategy, sorter.stream.0)
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
            cuda_rt_testing::error_name(idle)
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
