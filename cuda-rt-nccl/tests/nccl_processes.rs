//! NCCL with one process per GPU, as across hosts: the test starts 2 and 4 copies of itself
//! (as many as there are devices), hands them the id's bytes in an environment variable, and
//! each rank checks an all-reduce, an all-gather, a broadcast and a ring of sends and receives
//! against the CPU. A rank that does not finish in time fails the test (it is killed).

mod common;

use cuda_rt::prelude::*;
use cuda_rt::{Device, StreamFlags};
use cuda_rt_nccl::{group, Communicator, ReduceOp, UniqueId};
use cuda_rt_testing::ranks::{self, Rank};
use std::time::Duration;

const TEST: &str = "ranks_in_processes_reduce_gather_broadcast_and_exchange";
const LIMIT: Duration = Duration::from_secs(120);

#[test]
fn ranks_in_processes_reduce_gather_broadcast_and_exchange() {
    if let Some(rank) = Rank::from_env() {
        return rank_main(&rank);
    }
    let Some((devices, _serial)) = common::devices(TEST, 2) else {
        return;
    };
    for size in [2usize, 4].into_iter().filter(|&s| s <= devices.len()) {
        ranks::run(TEST, size, &UniqueId::new().unwrap().to_bytes(), &[], LIMIT);
    }
}

/// One rank: joins the communicator on device `rank` and checks each operation.
fn rank_main(me: &Rank) {
    let (rank, size) = (me.rank, me.size);
    let id = UniqueId::from_bytes(&me.id).unwrap();
    let device = Device::new(rank).unwrap();
    let comm = Communicator::new(&id, size, rank, device).unwrap();
    assert_eq!(
        (comm.rank(), comm.size(), comm.device()),
        (rank, size, device)
    );
    let _current = device.set_current_scoped().unwrap();
    let stream = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    let len = (16 << 20) + 1;

    // All-reduce (sum) of rank-dependent f64s, exact in f64.
    let mine: Vec<f64> = (0..len)
        .map(|i| (i % 1001) as f64 * (rank + 1) as f64)
        .collect();
    let mut data = DeviceBuffer::from_slice(&mine).unwrap();
    comm.all_reduce_in_place(&mut data, ReduceOp::Sum, &stream)
        .unwrap();
    let factor = (size * (size + 1) / 2) as f64;
    let got = data.to_vec().unwrap();
    let wrong = (0..len)
        .filter(|&i| got[i] != (i % 1001) as f64 * factor)
        .count();
    assert_eq!(wrong, 0, "rank {rank}: all_reduce: {wrong} wrong");

    // All-gather of each rank's id-stamped block.
    let block: Vec<u32> = (0..1000u32).map(|i| i + 1_000_000 * rank as u32).collect();
    let send = DeviceBuffer::from_slice(&block).unwrap();
    let mut all = DeviceBuffer::<u32>::zeroed(1000 * size).unwrap();
    comm.all_gather(&send, &mut all, &stream).unwrap();
    let expected: Vec<u32> = (0..size as u32)
        .flat_map(|r| (0..1000u32).map(move |i| i + 1_000_000 * r))
        .collect();
    assert_eq!(all.to_vec().unwrap(), expected, "rank {rank}: all_gather");

    // Broadcast from the last rank.
    let mut b = DeviceBuffer::from_slice(&[rank as u64; 4096]).unwrap();
    comm.broadcast(&mut b, size - 1, &stream).unwrap();
    assert_eq!(
        b.to_vec().unwrap(),
        vec![(size - 1) as u64; 4096],
        "rank {rank}: broadcast"
    );

    // A ring: send to the next rank and receive from the previous one, together.
    let out = DeviceBuffer::from_slice(&vec![rank as i32; 1 << 20]).unwrap();
    let mut inbox = DeviceBuffer::<i32>::zeroed(1 << 20).unwrap();
    group(|g| {
        g.send(&comm, &out, (rank + 1) % size, &stream)?;
        g.recv(&comm, &mut inbox, (rank + size - 1) % size, &stream)?;
        Ok(())
    })
    .unwrap();
    let from = ((rank + size - 1) % size) as i32;
    assert!(
        inbox.to_vec().unwrap().iter().all(|&x| x == from),
        "rank {rank}: ring"
    );

    comm.async_error().unwrap();
    comm.close().unwrap();
    println!("{}", me.ok());
}
