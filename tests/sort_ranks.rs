//! The sort over the ranks of an NCCL communicator (`SortWorkspace::sort_ranks`), one process
//! per GPU as across hosts: the test starts 2 and 4 copies of itself (as many as there are
//! devices), and each rank sorts its share of inputs that every rank can rebuild (so each
//! checks its result against the CPU's sort of the whole): every key type NCCL moves, both
//! orders, unequal shares and an empty one, one key everywhere (one rank receives them all),
//! sizes past the sort's thresholds; then a refusal that every rank meets before any
//! collective (so none is left waiting). A rank that does not finish in time fails the test.
//! One GPU: a communicator of one rank.

mod sort_common;

use cuda_rt::{Device, DeviceBuffer, ErrorKind, Stream, StreamFlags};
use cuda_rt_kernels::sort::{Order, SortError, SortWorkspace};
use cuda_rt_nccl::{Communicator, DataType, UniqueId};
use cuda_rt_testing::ranks::{self, Rank};
use sort_common::{assert_same_keys, cpu_sorted, make, Dist, TestKey};
use std::time::Duration;

const TEST: &str = "ranks_in_processes_sort_as_one_array";
const LIMIT: Duration = Duration::from_secs(240);
/// `CUDA_RT_REQUIRE_NCCL=1` (set by the GPU runner where NCCL is installed) turns a missing
/// NCCL from a skip into a failure.
const REQUIRE_NCCL: &str = "CUDA_RT_REQUIRE_NCCL";

/// The devices, when there are at least `min` and NCCL loads; else says why `test` skips.
fn devices(test: &str, min: usize) -> Option<Vec<Device>> {
    let gpu = cuda_rt_testing::gpu()?;
    let count = usize::try_from(gpu.device_count).unwrap_or(0);
    if count < min {
        println!("{test}: skipped: needs {min} devices, this machine has {count}");
        return None;
    }
    if let Err(e) = cuda_rt_nccl::raw::library() {
        assert!(
            std::env::var(REQUIRE_NCCL).map_or(true, |v| v != "1"),
            "{test}: {e}, and {REQUIRE_NCCL}=1 requires NCCL"
        );
        println!("{test}: skipped: {e}");
        return None;
    }
    Some((0..count).map(|d| Device::new(d).unwrap()).collect())
}

#[test]
fn ranks_in_processes_sort_as_one_array() {
    if let Some(rank) = Rank::from_env() {
        return rank_main(&rank);
    }
    let Some(devices) = devices(TEST, 2) else {
        return;
    };
    for size in [2usize, 4].into_iter().filter(|&s| s <= devices.len()) {
        ranks::run(TEST, size, &UniqueId::new().unwrap().to_bytes(), &[], LIMIT);
    }
}

/// Every rank's share of a case: `total` keys cut unevenly, the second rank's share empty
/// where there are more than two ranks.
fn shares(total: usize, ranks: usize) -> Vec<usize> {
    let weights: Vec<usize> = (0..ranks)
        .map(|r| if r == 1 && ranks > 2 { 0 } else { 3 + r })
        .collect();
    let sum: usize = weights.iter().sum();
    let mut lens: Vec<usize> = weights.iter().map(|w| total * w / sum).collect();
    lens[0] += total - lens.iter().sum::<usize>();
    lens
}

/// One case on one rank: the whole input rebuilt from `seed`, this rank's share sorted over the
/// ranks, and its result checked against its place in the CPU's sort of the whole.
fn rank_case<K: TestKey + DataType>(
    comm: &Communicator,
    stream: &Stream,
    total: usize,
    dist: Dist,
    order: Order,
    seed: u64,
) {
    let (rank, ranks) = (comm.rank(), comm.size());
    let what = format!(
        "rank {rank}: {} × {total} {dist:?} {order:?}",
        std::any::type_name::<K>()
    );
    let all: Vec<K> = make(dist, total, seed);
    let lens = shares(total, ranks);
    let begin: usize = lens[..rank].iter().sum();
    let mine = &all[begin..begin + lens[rank]];
    let mut keys = DeviceBuffer::from_slice(mine).unwrap();
    let out = SortWorkspace::new()
        .sort_ranks(comm, stream, &mut keys, order)
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    // Where this rank's result lies in the whole: every rank's result length, gathered.
    let len = DeviceBuffer::from_slice(&[out.len() as u64]).unwrap();
    let mut out_lens = DeviceBuffer::<u64>::zeroed(ranks).unwrap();
    comm.all_gather(&len, &mut out_lens, stream).unwrap();
    let out_lens = out_lens.to_vec().unwrap();
    assert_eq!(
        out_lens.iter().sum::<u64>(),
        total as u64,
        "{what}: the results' lengths {out_lens:?}"
    );
    let at: usize = out_lens[..rank].iter().map(|&l| l as usize).sum();
    let want = cpu_sorted(&all, order);
    assert_same_keys(&out.to_vec().unwrap(), &want[at..at + out.len()], &what);
    assert_same_keys(
        &keys.to_vec().unwrap(),
        &cpu_sorted(mine, order),
        &format!("{what}: the rank's own keys"),
    );
}

/// One rank: joins the communicator on device `rank` and runs every case.
fn rank_main(me: &Rank) {
    let (rank, size) = (me.rank, me.size);
    let id = UniqueId::from_bytes(&me.id).unwrap();
    let device = Device::new(rank).unwrap();
    let comm = Communicator::new(&id, size, rank, device).unwrap();
    let _current = device.set_current_scoped().unwrap();
    let stream = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    let quick = sort_common::quick();
    for (i, order) in [Order::Ascending, Order::Descending]
        .into_iter()
        .enumerate()
    {
        let seed = 100 * i as u64;
        rank_case::<u32>(&comm, &stream, 1_000_003, Dist::Uniform, order, seed);
        rank_case::<i32>(&comm, &stream, 300_001, Dist::FewDistinct, order, seed + 1);
        rank_case::<u64>(&comm, &stream, 77_777, Dist::Sawtooth, order, seed + 2);
        rank_case::<i64>(&comm, &stream, 5, Dist::Uniform, order, seed + 3);
        rank_case::<f32>(&comm, &stream, 200_000, Dist::Specials, order, seed + 4);
        rank_case::<f64>(&comm, &stream, 123_457, Dist::Reversed, order, seed + 5);
        rank_case::<u8>(&comm, &stream, 65_536, Dist::Uniform, order, seed + 6);
        rank_case::<i8>(&comm, &stream, 10_000, Dist::Sorted, order, seed + 7);
        // One key everywhere: every key falls after the splitter, onto the last rank.
        rank_case::<u32>(&comm, &stream, 250_000, Dist::AllEqual, order, seed + 8);
        rank_case::<u32>(&comm, &stream, 0, Dist::Uniform, order, seed + 9);
    }
    if !quick {
        // Past the four-way threshold on every rank (2^24 keys each).
        let big = (1usize << 24) * size + 12_345;
        rank_case::<u32>(&comm, &stream, big, Dist::Uniform, Order::Ascending, 7);
        rank_case::<u64>(&comm, &stream, big / 2, Dist::Uniform, Order::Descending, 8);
    }

    // A stream of another device on every rank: refused before any collective, so no rank is
    // left waiting in one; the communicator still works afterwards.
    let other = Device::new((rank + 1) % size).unwrap();
    let foreign = other
        .with_current(|| Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap())
        .unwrap();
    let mut keys = DeviceBuffer::from_slice(&[3u32, 1, 2]).unwrap();
    let e = SortWorkspace::new()
        .sort_ranks(&comm, &foreign, &mut keys, Order::Ascending)
        .unwrap_err();
    assert!(
        matches!(e, SortError::Runtime(ref r) if matches!(r.kind(), ErrorKind::WrongDevice { .. })),
        "rank {rank}: {e:?}"
    );
    assert_eq!(
        keys.to_vec().unwrap(),
        vec![3, 1, 2],
        "rank {rank}: refused"
    );
    rank_case::<u32>(&comm, &stream, 4096, Dist::Uniform, Order::Ascending, 9);

    comm.async_error().unwrap();
    comm.close().unwrap();
    println!("{}", me.ok());
}

/// One GPU: a communicator of one rank sorts its keys alone.
#[test]
fn one_rank_sorts_its_keys() {
    let Some(devices) = devices("one_rank_sorts_its_keys", 1) else {
        return;
    };
    let id = UniqueId::new().unwrap();
    let comm = Communicator::new(&id, 1, 0, devices[0]).unwrap();
    let _current = devices[0].set_current_scoped().unwrap();
    let stream = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    rank_case::<u32>(&comm, &stream, 300_001, Dist::Uniform, Order::Ascending, 1);
    rank_case::<f64>(&comm, &stream, 1000, Dist::Specials, Order::Descending, 2);
    comm.close().unwrap();
}
