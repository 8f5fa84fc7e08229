//! The merge sort within the shared memory per block of smaller GPUs, on whatever GPU runs the
//! tests: every key type, keys only and with 4-, 8- and 16-byte values, under a limit of 64 KiB
//! per block (sm_75: T4, RTX 20), of 99 KiB (sm_86, sm_89, sm_120: A10, L4, RTX 30 to 50) and,
//! as the control, under the device's own limit; ascending and descending; at lengths around
//! every size where the library changes its plan (the tile size, and the thresholds of
//! `sort::ffi::choices`, defined in `sort/kernels/cuda_rt_sort.h`: the tile width, the device-driven
//! chain, the merge width), on unaligned sub-slices too; against
//! the CPU's stable sort. Each plan is also checked to fit its limit, so that a limit the
//! library ignored cannot pass for one it honoured.
//!
//! `CUDA_RT_SORT_TEST_QUICK=1` leaves out the sorts of 2^25 and more keys;
//! `CUDA_RT_SORT_TEST_DRIVER=host` the sorts forced onto the device-driven chain (for
//! compute-sanitizer, which does not follow device-side launches).

use cuda_rt::{DeviceBuffer, DeviceCopy, DeviceMemoryMut, Stream};
use cuda_rt_kernels::sort::ffi::flags::{
    MERGE_MASK, MERGE_SINGLE, SMEM_LIMIT_MASK, TILE_MASK, TILE_SMALL, TILE_WIDE,
};
use cuda_rt_kernels::sort::ffi::{choices, SortLayout};
use cuda_rt_kernels::sort::raw::{check_shared_memory, layout_with_limit};
use cuda_rt_kernels::sort::{
    Driver, KeyFormat, Order, SortError, SortKey, SortWorkspace, Strategy, TileWidth,
};
use rayon::prelude::*;
use std::cmp::Ordering;
use std::fmt::Debug;
use std::io::Write;

const KIB: usize = 1024;
const ORDERS: [Order; 2] = [Order::Ascending, Order::Descending];
/// Elements before an unaligned sub-slice: its keys then start off every 16-byte boundary.
const OFFSET: usize = 3;
/// Elements after it.
const TAIL: usize = 5;

/// The shared memory per block a test's sorts may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Limit {
    /// sm_75 (T4, RTX 20).
    Kib64,
    /// sm_86, sm_89, sm_120 (A10, A40, L4, L40, RTX 30 to 50).
    Kib99,
    /// The device's own (`cudaDevAttrMaxSharedMemoryPerBlockOptin`).
    Device,
}

impl Limit {
    fn bytes(self) -> Option<usize> {
        match self {
            Limit::Kib64 => Some(64 * KIB),
            Limit::Kib99 => Some(99 * KIB),
            Limit::Device => None,
        }
    }

    /// A workspace whose sorts use `strategy` within this limit.
    fn workspace(self, strategy: Strategy) -> SortWorkspace {
        let workspace = SortWorkspace::with_strategy(strategy);
        match self.bytes() {
            Some(bytes) => workspace.with_shared_memory_limit(bytes),
            None => workspace,
        }
    }
}

/// True when the sorts of 2^25 and more keys are left out.
fn quick() -> bool {
    std::env::var("CUDA_RT_SORT_TEST_QUICK").is_ok_and(|v| v == "1")
}

/// True when no sort may be forced onto the device-driven chain.
fn host_driver_only() -> bool {
    std::env::var("CUDA_RT_SORT_TEST_DRIVER").is_ok_and(|v| v == "host")
}

// ---- Keys, values and the CPU's order -------------------------------------------------------

/// A key type under test: the CPU's order (floats in total order) and exact bits to compare.
trait TestKey: SortKey + DeviceCopy + Debug + Send + Sync {
    fn total_cmp_key(&self, other: &Self) -> Ordering;
    fn bits(&self) -> u64;
    fn from_bits_u64(x: u64) -> Self;
}

macro_rules! int_key {
    ($($t:ty),*) => {$(
        impl TestKey for $t {
            fn total_cmp_key(&self, other: &Self) -> Ordering { self.cmp(other) }
            fn bits(&self) -> u64 { *self as u64 }
            fn from_bits_u64(x: u64) -> Self { x as $t }
        }
    )*};
}
int_key!(u8, u16, u32, u64, i8, i16, i32, i64);

impl TestKey for f32 {
    fn total_cmp_key(&self, other: &Self) -> Ordering {
        self.total_cmp(other)
    }
    fn bits(&self) -> u64 {
        self.to_bits().into()
    }
    fn from_bits_u64(x: u64) -> Self {
        f32::from_bits(x as u32)
    }
}

impl TestKey for f64 {
    fn total_cmp_key(&self, other: &Self) -> Ordering {
        self.total_cmp(other)
    }
    fn bits(&self) -> u64 {
        self.to_bits()
    }
    fn from_bits_u64(x: u64) -> Self {
        f64::from_bits(x)
    }
}

/// A value type under test: each value names the input position it came from, so the exact
/// permutation is checked, the order of equal keys included.
trait TestValue: DeviceCopy + Debug + PartialEq + Send + Sync {
    fn of(i: usize) -> Self;
}

impl TestValue for u32 {
    fn of(i: usize) -> Self {
        i as u32
    }
}

impl TestValue for u64 {
    fn of(i: usize) -> Self {
        ((i as u64) << 24) | 0xa5
    }
}

impl TestValue for [u32; 4] {
    fn of(i: usize) -> Self {
        [i as u32, !(i as u32), 0x5eed, (i as u32).rotate_left(16)]
    }
}

/// splitmix64.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// `n` keys from `seed`: uniform bits for even seeds, and for odd ones five distinct keys (long
/// runs of equal keys, whose order the sort of pairs must keep).
fn make_keys<K: TestKey>(n: usize, seed: u64) -> Vec<K> {
    let mut rng = Rng(seed);
    if seed % 2 == 0 {
        (0..n).map(|_| K::from_bits_u64(rng.next())).collect()
    } else {
        let pool: Vec<K> = (0..5).map(|_| K::from_bits_u64(rng.next())).collect();
        (0..n).map(|_| pool[(rng.next() % 5) as usize]).collect()
    }
}

/// The permutation a stable sort of `keys` in `order` applies (the CPU reference).
fn stable_permutation<K: TestKey>(keys: &[K], order: Order) -> Vec<usize> {
    let mut index: Vec<usize> = (0..keys.len()).collect();
    match order {
        Order::Ascending => index.par_sort_by(|&a, &b| keys[a].total_cmp_key(&keys[b])),
        Order::Descending => index.par_sort_by(|&a, &b| keys[b].total_cmp_key(&keys[a])),
    }
    index
}

fn assert_same_keys<K: TestKey>(got: &[K], want: &[K], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    if let Some(i) = (0..got.len()).find(|&i| got[i].bits() != want[i].bits()) {
        let lo = i.saturating_sub(3);
        let hi = (i + 4).min(got.len());
        let differing = (i..got.len())
            .filter(|&j| got[j].bits() != want[j].bits())
            .count();
        panic!(
            "{what}: first difference at {i} of {}: got {:?}, want {:?}; {differing} positions \
             differ",
            got.len(),
            &got[lo..hi],
            &want[lo..hi]
        );
    }
}

fn assert_same_values<V: TestValue>(got: &[V], want: &[V], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: values' length");
    if let Some(i) = (0..got.len()).find(|&i| got[i] != want[i]) {
        panic!("{what}: value {i} is {:?}, want {:?}", got[i], want[i]);
    }
}

// ---- One sort against the CPU ---------------------------------------------------------------

/// Where the sorted elements lie in their device buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Placement {
    /// A buffer of its own.
    Whole,
    /// `OFFSET` elements into a longer buffer, whose other elements must stay as they were.
    Unaligned,
}

/// How one sort of a test runs: the workspace's limit and strategy, the stream, the order,
/// where the elements lie, and the seed of the input.
#[derive(Clone, Copy)]
struct Case<'a> {
    limit: Limit,
    strategy: Strategy,
    stream: &'a Stream,
    order: Order,
    placement: Placement,
    seed: u64,
}

impl Case<'_> {
    /// The description of the case in failure messages.
    fn describe<K>(&self, n: usize, value_bytes: usize) -> String {
        format!(
            "{} keys{} n={n} {:?} {:?} {:?} limit {:?}",
            std::any::type_name::<K>(),
            if value_bytes == 0 {
                String::new()
            } else {
                format!(" with {value_bytes}-byte values")
            },
            self.order,
            self.placement,
            self.strategy.driver,
            self.limit,
        )
    }

    /// The plan of the sort fits the limit it was made for, and that limit honours the test's.
    fn check_plan<K: TestKey>(&self, n: usize, value_bytes: usize, what: &str) {
        let plan = layout_with_limit(n, K::FORMAT, value_bytes, self.strategy, self.limit.bytes())
            .unwrap_or_else(|e| panic!("{what}: layout: {e}"));
        check_shared_memory(&plan).unwrap_or_else(|e| panic!("{what}: {e} ({plan:?})"));
        if let Some(cap) = self.limit.bytes() {
            assert!(
                plan.smem_limit != 0 && plan.smem_limit as usize <= cap,
                "{what}: planned for {} bytes per block, over the limit of {cap} ({plan:?})",
                plan.smem_limit
            );
        }
    }

    /// Sorts `n` keys of type `K` with `workspace` (made for this case's limit and strategy)
    /// and checks them against the CPU's stable sort.
    fn keys<K: TestKey>(&self, workspace: &mut SortWorkspace, n: usize) {
        let what = self.describe::<K>(n, 0);
        self.check_plan::<K>(n, 0, &what);
        let input: Vec<K> = make_keys(n, self.seed);
        let (before, after) = self.surroundings::<K>();
        let whole: Vec<K> = [before.as_slice(), input.as_slice(), after.as_slice()].concat();
        let mut buffer = DeviceBuffer::from_slice(&whole).unwrap();
        let begin = before.len();
        {
            let mut keys = buffer.slice_mut(begin..begin + n).unwrap();
            workspace
                .sort_and_synchronize(self.stream, &mut keys, self.order)
                .unwrap_or_else(|e| panic!("{what}: {e}"));
        }
        let got = buffer.to_vec().unwrap();
        let permutation = stable_permutation(&input, self.order);
        let want: Vec<K> = permutation.par_iter().map(|&i| input[i]).collect();
        assert_same_keys(&got[begin..begin + n], &want, &what);
        assert_same_keys(&got[..begin], &before, &format!("{what}: before the slice"));
        assert_same_keys(
            &got[begin + n..],
            &after,
            &format!("{what}: after the slice"),
        );
    }

    /// Sorts `n` pairs of `K` keys and `V` values with `workspace` and checks them against the
    /// CPU's stable sort.
    fn pairs<K: TestKey, V: TestValue>(&self, workspace: &mut SortWorkspace, n: usize) {
        let value_bytes = size_of::<V>();
        let what = self.describe::<K>(n, value_bytes);
        self.check_plan::<K>(n, value_bytes, &what);
        let keys_in: Vec<K> = make_keys(n, self.seed);
        let (before, after) = self.surroundings::<K>();
        let begin = before.len();
        let all_keys: Vec<K> = [before.as_slice(), keys_in.as_slice(), after.as_slice()].concat();
        // The values around the slice name positions past the input's, so none equals a sorted
        // value.
        let all_values: Vec<V> = (0..all_keys.len())
            .map(|i| {
                if (begin..begin + n).contains(&i) {
                    V::of(i - begin)
                } else {
                    V::of(n + i)
                }
            })
            .collect();
        let mut keys = DeviceBuffer::from_slice(&all_keys).unwrap();
        let mut values = DeviceBuffer::from_slice(&all_values).unwrap();
        {
            let mut k = keys.slice_mut(begin..begin + n).unwrap();
            let mut v = values.slice_mut(begin..begin + n).unwrap();
            workspace
                .sort_pairs_and_synchronize(self.stream, &mut k, &mut v, self.order)
                .unwrap_or_else(|e| panic!("{what}: {e}"));
        }
        let got_keys = keys.to_vec().unwrap();
        let got_values = values.to_vec().unwrap();
        let permutation = stable_permutation(&keys_in, self.order);
        let want_keys: Vec<K> = permutation.par_iter().map(|&i| keys_in[i]).collect();
        let want_values: Vec<V> = permutation.par_iter().map(|&i| V::of(i)).collect();
        assert_same_keys(&got_keys[begin..begin + n], &want_keys, &what);
        assert_same_values(&got_values[begin..begin + n], &want_values, &what);
        assert_same_keys(
            &got_keys[..begin],
            &before,
            &format!("{what}: before the slice"),
        );
        assert_same_keys(
            &got_keys[begin + n..],
            &after,
            &format!("{what}: after the slice"),
        );
        assert_same_values(&got_values[..begin], &all_values[..begin], &what);
        assert_same_values(&got_values[begin + n..], &all_values[begin + n..], &what);
    }

    /// The keys before and after the sorted elements in their buffer.
    fn surroundings<K: TestKey>(&self) -> (Vec<K>, Vec<K>) {
        match self.placement {
            Placement::Whole => (Vec::new(), Vec::new()),
            Placement::Unaligned => (
                make_keys(OFFSET, self.seed ^ 0x0ff5),
                make_keys(TAIL, self.seed ^ 0x7a11),
            ),
        }
    }
}

// ---- Every key type, every value size, around the tile size ---------------------------------

/// Keys only (`value_bytes` 0) or pairs with values of `value_bytes`.
fn run_kind<K: TestKey>(
    case: Case<'_>,
    workspace: &mut SortWorkspace,
    value_bytes: usize,
    n: usize,
) {
    match value_bytes {
        0 => case.keys::<K>(workspace, n),
        4 => case.pairs::<K, u32>(workspace, n),
        8 => case.pairs::<K, u64>(workspace, n),
        16 => case.pairs::<K, [u32; 4]>(workspace, n),
        _ => unreachable!("values are 4, 8 or 16 bytes"),
    }
}

/// Every value size of `K` within `limit`: 0 and 1 keys, one tile and one key either side
/// (the tile of the plan for that limit), several tiles, and 2^20 + 3 keys, in both orders,
/// each size in its own buffer in one order and in an unaligned sub-slice in the other; and the
/// multi-tile sizes once more on the device-driven chain, which the library itself takes only
/// from 2^25 keys on.
fn check_key_type<K: TestKey>(limit: Limit, seed: u64) {
    let stream = Stream::new().unwrap();
    let mut auto = limit.workspace(Strategy::default());
    let device_driven = Strategy {
        driver: Driver::Device,
        ..Strategy::default()
    };
    let mut chained = limit.workspace(device_driven);
    for value_bytes in [0, 4, 8, 16] {
        let tile = layout_with_limit(
            1,
            K::FORMAT,
            value_bytes,
            Strategy::default(),
            limit.bytes(),
        )
        .unwrap()
        .sort_tile as usize;
        let sizes = [0, 1, tile - 1, tile, tile + 1, 3 * tile + 7, (1 << 20) + 3];
        for (i, n) in sizes.into_iter().enumerate() {
            for (o, order) in ORDERS.into_iter().enumerate() {
                let case = Case {
                    limit,
                    strategy: Strategy::default(),
                    stream: &stream,
                    order,
                    placement: if (i + o) % 2 == 0 {
                        Placement::Whole
                    } else {
                        Placement::Unaligned
                    },
                    // Even seeds: uniform keys; odd ones: few distinct keys.
                    seed: (seed << 32)
                        ^ ((value_bytes as u64) << 24)
                        ^ ((i as u64) << 4)
                        ^ ((o as u64) << 2)
                        ^ ((i / 2 + o) % 2) as u64,
                };
                run_kind::<K>(case, &mut auto, value_bytes, n);
            }
        }
        if host_driver_only() {
            continue;
        }
        for (i, n) in [3 * tile + 7, (1 << 20) + 3].into_iter().enumerate() {
            let case = Case {
                limit,
                strategy: device_driven,
                stream: &stream,
                order: ORDERS[i % 2],
                placement: Placement::Unaligned,
                seed: (seed << 32) ^ ((value_bytes as u64) << 24) ^ 0xd0 ^ i as u64,
            };
            run_kind::<K>(case, &mut chained, value_bytes, n);
        }
    }
}

macro_rules! every_limit {
    ($($name:ident: $key:ty, $seed:expr;)*) => {$(
        mod $name {
            use super::*;

            #[test]
            fn within_64_kib() {
                let Some(_gpu) = cuda_rt_testing::gpu() else { return };
                check_key_type::<$key>(Limit::Kib64, $seed);
            }

            #[test]
            fn within_99_kib() {
                let Some(_gpu) = cuda_rt_testing::gpu() else { return };
                check_key_type::<$key>(Limit::Kib99, $seed);
            }

            #[test]
            fn within_the_device_limit() {
                let Some(_gpu) = cuda_rt_testing::gpu() else { return };
                check_key_type::<$key>(Limit::Device, $seed);
            }
        }
    )*};
}

every_limit! {
    u8_keys: u8, 1;
    u16_keys: u16, 2;
    u32_keys: u32, 3;
    u64_keys: u64, 4;
    i8_keys: i8, 5;
    i16_keys: i16, 6;
    i32_keys: i32, 7;
    i64_keys: i64, 8;
    f32_keys: f32, 9;
    f64_keys: f64, 10;
}

// ---- Past the sizes where the plan changes --------------------------------------------------

/// Sizes past the library's size thresholds within `limit`, each key size with each value size
/// past 2^22 (wide tiles where they fit), some of them past 2^25 (the device-driven chain), and
/// 2-byte keys past 2^26 (wide merge blocks where they fit).
fn check_past_thresholds(limit: Limit) {
    let stream = Stream::new().unwrap();
    let mut workspace = limit.workspace(Strategy::default());
    let s = &stream;
    let case = move |order, placement, seed| Case {
        limit,
        strategy: Strategy::default(),
        stream: s,
        order,
        placement,
        seed,
    };
    let w = &mut workspace;
    let n = choices::NARROW_TILE_MAX_KEYS + 5;
    for value_bytes in [0, 4, 8, 16] {
        let order = ORDERS[value_bytes / 4 % 2];
        let seed = (22 << 8) | value_bytes as u64;
        run_kind::<i8>(case(order, Placement::Whole, seed), w, value_bytes, n);
        run_kind::<u16>(case(order, Placement::Unaligned, seed), w, value_bytes, n);
        run_kind::<f32>(case(order, Placement::Whole, seed + 1), w, value_bytes, n);
        run_kind::<i64>(
            case(order, Placement::Unaligned, seed + 1),
            w,
            value_bytes,
            n,
        );
    }
    if quick() {
        let _ = writeln!(
            std::io::stderr(),
            "left out the sorts of 2^25 keys and more within {limit:?}: \
             CUDA_RT_SORT_TEST_QUICK=1"
        );
        return;
    }
    let n = choices::DEVICE_DRIVER_MIN_KEYS + 3;
    case(Order::Ascending, Placement::Unaligned, 25).keys::<f32>(w, n);
    case(Order::Descending, Placement::Whole, 26).pairs::<u8, u32>(w, n);
    case(Order::Ascending, Placement::Whole, 27).pairs::<u16, u64>(w, n);
    case(Order::Descending, Placement::Unaligned, 28).pairs::<f64, [u32; 4]>(w, n);
    case(Order::Ascending, Placement::Whole, 29).keys::<u16>(w, choices::NARROW_MERGE_MAX_KEYS + 1);
}

#[test]
fn past_the_size_thresholds_within_64_kib() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    check_past_thresholds(Limit::Kib64);
}

#[test]
fn past_the_size_thresholds_within_99_kib() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    check_past_thresholds(Limit::Kib99);
}

#[test]
fn past_the_size_thresholds_within_the_device_limit() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    check_past_thresholds(Limit::Device);
}

// ---- Plans and errors -----------------------------------------------------------------------

/// The plans of every key size and value size at sizes around the thresholds, within `limit`.
fn plans(limit: Option<usize>) -> Vec<(KeyFormat, usize, usize, SortLayout)> {
    let sizes = [
        1usize,
        100_000,
        choices::NARROW_TILE_MAX_KEYS + 1,
        choices::DEVICE_DRIVER_MIN_KEYS + 1,
        (1 << 27) + 1,
    ];
    let mut all = Vec::new();
    for key in [u8::FORMAT, u16::FORMAT, u32::FORMAT, u64::FORMAT] {
        for value_bytes in [0, 4, 8, 16] {
            for n in sizes {
                let plan =
                    layout_with_limit(n, key, value_bytes, Strategy::default(), limit).unwrap();
                all.push((key, value_bytes, n, plan));
            }
        }
    }
    all
}

#[test]
fn every_plan_fits_its_limit_and_small_gpus_get_small_blocks() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    for limit in [Limit::Kib64, Limit::Kib99] {
        let cap = limit.bytes().unwrap();
        for (key, value_bytes, n, plan) in plans(Some(cap)) {
            let what = format!(
                "{}-byte keys, {value_bytes}-byte values, n={n}, {limit:?}",
                key.bytes
            );
            assert!(
                plan.smem_bytes as usize <= cap && plan.smem_limit as usize <= cap,
                "{what}: {plan:?}"
            );
            check_shared_memory(&plan).unwrap();
            // Within 64 KiB the merges of two groups fit only for keys of up to 2 bytes, and
            // the narrow tile sort of 4-byte keys does not fit.
            if limit == Limit::Kib64 && plan.passes > 0 && (key.bytes > 2 || value_bytes > 0) {
                assert_eq!(plan.flags & MERGE_MASK, MERGE_SINGLE, "{what}: {plan:?}");
            }
            if limit == Limit::Kib64 && key.bytes == 4 && value_bytes == 0 {
                assert_eq!(plan.flags & TILE_MASK, TILE_SMALL, "{what}: {plan:?}");
            }
        }
    }
    // The device's own limit: a cap at it changes nothing, and an H100 (227 KiB) or an A100
    // (163 KiB) keeps its narrow and wide blocks everywhere.
    for (key, value_bytes, n, plan) in plans(None) {
        let what = format!(
            "{}-byte keys, {value_bytes}-byte values, n={n}, the device's limit",
            key.bytes
        );
        check_shared_memory(&plan).unwrap();
        assert!(plan.smem_limit > 0, "{what}: {plan:?}");
        let capped = layout_with_limit(
            n,
            key,
            value_bytes,
            Strategy::default(),
            Some(plan.smem_limit as usize),
        )
        .unwrap();
        assert_eq!(
            SortLayout {
                flags: capped.flags & !SMEM_LIMIT_MASK,
                ..capped
            },
            plan,
            "{what}"
        );
        if plan.smem_limit as usize >= 163 * KIB {
            assert_ne!(plan.flags & TILE_MASK, TILE_SMALL, "{what}: {plan:?}");
            assert_ne!(plan.flags & MERGE_MASK, MERGE_SINGLE, "{what}: {plan:?}");
        }
    }
}

#[test]
fn a_limit_below_the_smallest_blocks_is_refused_and_nothing_is_written() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let stream = Stream::new().unwrap();
    let limit = 16 * KIB;
    let workspace = SortWorkspace::new().with_shared_memory_limit(limit);
    assert_eq!(workspace.shared_memory_limit(), Some(limit));
    let input: Vec<u32> = make_keys(100_000, 40);
    let mut keys = DeviceBuffer::from_slice(&input).unwrap();
    match workspace.sort(&stream, &mut keys, Order::Ascending) {
        Err(SortError::SharedMemoryLimit { needed, limit: got }) => {
            assert_eq!(got, limit);
            assert!(needed > limit, "{needed}");
        }
        other => panic!("u32 keys within 16 KiB: expected SharedMemoryLimit, got {other:?}"),
    }
    assert_eq!(keys.to_vec().unwrap(), input, "nothing may be written");
    let values: Vec<[u32; 4]> = (0..input.len()).map(<[u32; 4]>::of).collect();
    let mut device_values = DeviceBuffer::from_slice(&values).unwrap();
    let refused = workspace.sort_pairs(&stream, &mut keys, &mut device_values, Order::Descending);
    assert!(
        matches!(refused, Err(SortError::SharedMemoryLimit { .. })),
        "pairs within 16 KiB: {refused:?}"
    );
    assert_eq!(keys.to_vec().unwrap(), input, "nothing may be written");
    assert_eq!(
        device_values.to_vec().unwrap(),
        values,
        "nothing may be written"
    );

    // A tile width forced past the limit is refused too, and the same workspace sorts once the
    // limit allows it.
    let wide = Strategy {
        tile: TileWidth::Wide,
        ..Strategy::default()
    };
    let forced = SortWorkspace::with_strategy(wide).with_shared_memory_limit(64 * KIB);
    let refused = forced.sort(&stream, &mut keys, Order::Ascending);
    assert!(
        matches!(refused, Err(SortError::SharedMemoryLimit { .. })),
        "wide u32 tiles within 64 KiB: {refused:?}"
    );
    assert_eq!(keys.to_vec().unwrap(), input, "nothing may be written");
    let fitting = SortWorkspace::new().with_shared_memory_limit(64 * KIB);
    fitting
        .sort_and_synchronize(&stream, &mut keys, Order::Ascending)
        .unwrap();
    let mut want = input.clone();
    want.sort_unstable();
    assert_eq!(keys.to_vec().unwrap(), want);
    let plan = layout_with_limit(input.len(), u32::FORMAT, 0, wide, Some(64 * KIB)).unwrap();
    assert_eq!(
        plan.flags & TILE_MASK,
        TILE_WIDE,
        "the caller's choice is kept: {plan:?}"
    );
}
