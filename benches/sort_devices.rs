//! The sort across devices against the sort on one GPU, in the same run: 2^30 random `u32`
//! keys (`--quick`: 2^28).
//!
//! Rows: `one GPU` sorts the keys where they are (`SortWorkspace::sort`); `on N GPUs` sorts
//! keys of device 0 on devices 0..N (`sort_on_devices`: pieces copied out, sorted, merged back
//! into device 0); `spread over N GPUs` sorts keys that already lie n/N on each of devices
//! 0..N, leaving them spread (`sort_spread`). Each round restores the input (a copy from a
//! pristine buffer on the same device, waited for), then times from the call to the
//! synchronize of every device used; medians of the timed rounds after warm-up. The speed-up
//! is the one-GPU median over the row's.
//!
//! `through NCCL` sorts the same spread keys with `sort_ranks`, one process per GPU (the bench
//! starts copies of itself): each round every rank restores its part, the ranks meet in an
//! all-reduce, then each times its call to the synchronize of its stream; a round's time is the
//! slowest rank's (an all-reduce of the times). Where NCCL does not load, the row is left out.

use cuda_rt::{Device, DeviceBuffer, DeviceMemoryMut, Stream, StreamFlags};
use cuda_rt_kernels::sort::{Order, SortWorkspace};
use cuda_rt_nccl::{Communicator, ReduceOp, UniqueId};
use cuda_rt_testing::ranks::{self, Rank};
use std::time::{Duration, Instant};

/// What a rank the bench started sorts: the keys in all, whether pools keep memory, the
/// rounds (its rank, the ranks and the id come as `cuda_rt_testing::ranks` gives them).
const SETUP: &str = "CUDA_RT_SORT_DEVICES_BENCH_SETUP";
const SEED: u64 = 0x5eed;

fn random_keys(n: usize, seed: u64) -> Vec<u32> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 32) as u32
        })
        .collect()
}

/// What a permutation keeps of a key sequence: its length, sum, sum of squares and a sum of
/// mixed keys (wrapping). Checking these and the order costs one pass, where a CPU sort of
/// 2^30 keys costs seconds.
#[derive(PartialEq, Debug)]
struct Multiset(usize, u64, u64, u64);

impl Multiset {
    fn of(keys: &[u32]) -> Multiset {
        let mut m = Multiset(keys.len(), 0, 0, 0);
        for &k in keys {
            let k = u64::from(k);
            m.1 = m.1.wrapping_add(k);
            m.2 = m.2.wrapping_add(k.wrapping_mul(k));
            m.3 =
                m.3.wrapping_add((k ^ 0x9e37_79b9).wrapping_mul(0xff51_afd7_ed55_8ccd) >> 7);
        }
        m
    }
}

fn check(got: &[u32], want: &Multiset, what: &str) {
    assert!(got.windows(2).all(|w| w[0] <= w[1]), "{what}: not in order");
    assert_eq!(&Multiset::of(got), want, "{what}: not the input's keys");
}

fn stream_on(device: Device) -> Stream {
    let _current = device.set_current_scoped().unwrap();
    Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap()
}

fn upload(device: Device, data: &[u32]) -> DeviceBuffer<u32> {
    let _current = device.set_current_scoped().unwrap();
    DeviceBuffer::from_slice(data).unwrap()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn synchronize(devices: &[Device]) {
    for d in devices {
        d.synchronize().unwrap();
    }
}

/// Times `run` after `restore`, both given `state`, `warm` + `timed` rounds: the medians in ms
/// of the whole (from the call to every device's synchronize) and of the call alone (the host
/// time spent queuing).
fn time<S: ?Sized>(
    devices: &[Device],
    (warm, timed): (usize, usize),
    state: &mut S,
    restore: impl Fn(&mut S),
    run: impl Fn(&mut S),
) -> (f64, f64) {
    let mut times = Vec::new();
    let mut calls = Vec::new();
    for round in 0..warm + timed {
        restore(state);
        synchronize(devices);
        let start = Instant::now();
        run(state);
        let call = start.elapsed().as_secs_f64() * 1e3;
        synchronize(devices);
        if round >= warm {
            times.push(start.elapsed().as_secs_f64() * 1e3);
            calls.push(call);
        }
    }
    (median(times), median(calls))
}

/// Runs `sort_ranks` over `size` processes (this program again, as ranks), `n` keys spread
/// evenly; the medians (whole, call) of the slowest rank per round, or `None` with the reason
/// where NCCL does not load.
fn nccl_row(
    size: usize,
    n: usize,
    keep: bool,
    (warm, timed): (usize, usize),
) -> Option<(f64, f64)> {
    if let Err(e) = cuda_rt_nccl::raw::library() {
        eprintln!("sort_devices: the NCCL rows are left out: {e}");
        return None;
    }
    let printed = ranks::run(
        "sort_ranks",
        size,
        &UniqueId::new().unwrap().to_bytes(),
        &[(SETUP, format!("{n} {} {warm} {timed}", u8::from(keep)))],
        Duration::from_secs(600),
    );
    let line = printed[0]
        .lines()
        .find_map(|l| l.strip_prefix("sort_ranks: "))?;
    let mut v = line.split_whitespace().map(|x| x.parse::<f64>().unwrap());
    Some((v.next()?, v.next()?))
}

/// One rank of [`nccl_row`]: sorts its part of the keys round after round and, on rank 0,
/// prints the medians of the slowest rank's times.
fn rank_main(me: &Rank) {
    let (rank, size) = (me.rank, me.size);
    let setup: Vec<usize> = std::env::var(SETUP)
        .unwrap()
        .split_whitespace()
        .map(|x| x.parse().unwrap())
        .collect();
    let [n, keep, warm, timed] = setup[..] else {
        panic!("{SETUP}: {setup:?}")
    };
    let device = Device::new(rank).unwrap();
    let comm =
        Communicator::new(&UniqueId::from_bytes(&me.id).unwrap(), size, rank, device).unwrap();
    let _current = device.set_current_scoped().unwrap();
    if keep == 1 {
        cuda_rt::MemPool::device_default(device)
            .unwrap()
            .set_release_threshold(u64::MAX)
            .unwrap();
    }
    let stream = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    let input = random_keys(n, SEED);
    let piece = n / size;
    let part = &input[rank * piece..(rank + 1) * piece];
    let pristine = DeviceBuffer::from_slice(part).unwrap();
    let mut keys = DeviceBuffer::from_slice(part).unwrap();
    let workspace = SortWorkspace::new();
    let mut meet = DeviceBuffer::from_slice(&[0.0f64]).unwrap();
    let (mut times, mut calls) = (Vec::new(), Vec::new());
    let mut out = None;
    for round in 0..warm + timed {
        keys.copy_from_device_async(&stream, &pristine).unwrap();
        comm.all_reduce_in_place(&mut meet, ReduceOp::Sum, &stream)
            .unwrap();
        stream.synchronize().unwrap();
        let start = Instant::now();
        let sorted = workspace
            .sort_ranks(&comm, &stream, &mut keys, Order::Ascending)
            .unwrap();
        let call = start.elapsed().as_secs_f64() * 1e3;
        stream.synchronize().unwrap();
        let whole = start.elapsed().as_secs_f64() * 1e3;
        let mut slowest = DeviceBuffer::from_slice(&[whole, call]).unwrap();
        comm.all_reduce_in_place(&mut slowest, ReduceOp::Max, &stream)
            .unwrap();
        let slowest = slowest.to_vec().unwrap();
        if round >= warm {
            times.push(slowest[0]);
            calls.push(slowest[1]);
        }
        out = Some(sorted);
    }
    // The last result: in order on each rank, in order across ranks, the input's keys in all.
    let got = out.map(|o| o.to_vec().unwrap()).unwrap_or_default();
    let mine = Multiset::of(&got);
    let mut sums = DeviceBuffer::from_slice(&[mine.0 as u64, mine.1, mine.2, mine.3]).unwrap();
    comm.all_reduce_in_place(&mut sums, ReduceOp::Sum, &stream)
        .unwrap();
    let sums = sums.to_vec().unwrap();
    let ends = [
        got.first().copied().unwrap_or(u32::MAX),
        got.last().copied().unwrap_or(0),
        u32::from(got.is_empty()),
    ];
    let mine_ends = DeviceBuffer::from_slice(&ends).unwrap();
    let mut all_ends = DeviceBuffer::<u32>::zeroed(3 * size).unwrap();
    comm.all_gather(&mine_ends, &mut all_ends, &stream).unwrap();
    let all_ends = all_ends.to_vec().unwrap();
    comm.close().unwrap();
    assert!(
        got.windows(2).all(|w| w[0] <= w[1]),
        "rank {rank}: not in order"
    );
    if rank == 0 {
        let want = Multiset::of(&input[..piece * size]);
        assert_eq!(
            Multiset(sums[0] as usize, sums[1], sums[2], sums[3]),
            want,
            "sort_ranks: not the input's keys"
        );
        let mut last = 0;
        for r in 0..size {
            let e = &all_ends[3 * r..3 * r + 3];
            if e[2] == 0 {
                assert!(
                    last <= e[0],
                    "sort_ranks: rank {r} starts below the rank before"
                );
                last = e[1];
            }
        }
        println!("sort_ranks: {:.3} {:.3}", median(times), median(calls));
    }
    println!("{}", me.ok());
}

fn main() {
    if let Some(rank) = Rank::from_env() {
        return rank_main(&rank);
    }
    let quick = std::env::args().any(|a| a == "--quick");
    let count = match Device::count() {
        Ok(c) if c > 0 => c,
        other => {
            println!("sort_devices: skipped: no CUDA device ({other:?})");
            return;
        }
    };
    let devices: Vec<Device> = (0..count).map(|d| Device::new(d).unwrap()).collect();
    let n: usize = if quick { 1 << 28 } else { 1 << 30 };
    let rounds = if quick { (1, 3) } else { (2, 5) };
    println!(
        "sort_devices: {count} × {}, {n} random u32 keys",
        devices[0].name().unwrap()
    );
    let input = random_keys(n, SEED);
    let workspace = SortWorkspace::new();
    let d0 = devices[0];
    let pristine = upload(d0, &input);
    let mut keys = upload(d0, &input);
    let s0 = stream_on(d0);
    let mut rows: Vec<(String, (f64, f64))> = Vec::new();
    let want = Multiset::of(&input);
    for keep in [false, true] {
        let pools = if keep {
            // Each device's default pool keeps what it reserved between sorts (as an
            // application that sorts again and again would set it): no memory is mapped again.
            for &d in &devices {
                cuda_rt::MemPool::device_default(d)
                    .unwrap()
                    .set_release_threshold(u64::MAX)
                    .unwrap();
            }
            " (pools keep memory)"
        } else {
            ""
        };
        let single = time(
            &devices[..1],
            rounds,
            &mut keys,
            |k| k.copy_from_device_async(&s0, &pristine).unwrap(),
            |k| workspace.sort(&s0, k, Order::Ascending).unwrap(),
        );
        rows.push((format!("one GPU: `sort`{pools}"), single));
        check(&keys.to_vec().unwrap(), &want, "one GPU");

        for used in [2usize, 4, 8].into_iter().filter(|&u| u <= count) {
            let set = &devices[..used];
            let t = time(
                set,
                rounds,
                &mut keys,
                |k| k.copy_from_device_async(&s0, &pristine).unwrap(),
                |k| {
                    workspace
                        .sort_on_devices(&s0, k, set, Order::Ascending)
                        .unwrap()
                },
            );
            check(&keys.to_vec().unwrap(), &want, "sort_on_devices");
            rows.push((
                format!(
                    "on {used} GPUs: `sort_on_devices`, keys of device 0 back to device 0{pools}"
                ),
                t,
            ));

            let piece = n / used;
            let pristine_parts: Vec<DeviceBuffer<u32>> = set
                .iter()
                .enumerate()
                .map(|(i, &d)| upload(d, &input[i * piece..(i + 1) * piece]))
                .collect();
            let mut parts: Vec<DeviceBuffer<u32>> = set
                .iter()
                .enumerate()
                .map(|(i, &d)| upload(d, &input[i * piece..(i + 1) * piece]))
                .collect();
            let streams: Vec<Stream> = set.iter().map(|&d| stream_on(d)).collect();
            let restore = |parts: &mut [DeviceBuffer<u32>]| {
                for ((p, q), s) in parts.iter_mut().zip(&pristine_parts).zip(&streams) {
                    p.copy_from_device_async(s, q).unwrap();
                }
            };
            // The first step alone: every part sorted on its own device, at once.
            let t = time(set, rounds, &mut parts[..], restore, |parts| {
                for ((p, s), &d) in parts.iter_mut().zip(&streams).zip(set) {
                    d.with_current(|| workspace.sort(s, p, Order::Ascending).unwrap())
                        .unwrap();
                }
            });
            rows.push((
                format!("spread over {used} GPUs: the parts' sorts alone (no merge){pools}"),
                t,
            ));
            let t = time(set, rounds, &mut parts[..], restore, |parts| {
                workspace
                    .sort_spread(parts, &streams, Order::Ascending)
                    .unwrap()
            });
            let got: Vec<u32> = parts.iter().flat_map(|p| p.to_vec().unwrap()).collect();
            check(&got, &Multiset::of(&input[..piece * used]), "sort_spread");
            rows.push((format!("spread over {used} GPUs: `sort_spread`, n/{used} on each, result spread{pools}"), t));
            if let Some(t) = nccl_row(used, n, keep, rounds) {
                rows.push((
                    format!("spread over {used} GPUs through NCCL: `sort_ranks`, one process per GPU, result spread{pools}"),
                    t,
                ));
            }
        }
    }
    println!("\n| {n} u32 keys | median | host time in the call | speed-up over one GPU |");
    println!("|---|---|---|---|");
    let mut single = rows[0].1 .0;
    for (name, (t, call)) in rows {
        if name.starts_with("one GPU") {
            single = t;
        }
        println!("| {name} | {t:.2} ms | {call:.2} ms | {:.2}× |", single / t);
    }
}
