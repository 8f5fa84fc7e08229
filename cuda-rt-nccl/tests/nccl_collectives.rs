//! NCCL driven by one process: one communicator per device (`Communicator::for_devices`), every
//! collective and a ring of sends and receives checked against the CPU, at sizes from none to
//! 128 MiB a device; operations ordered through cuda-rt's tracking alone (after an upload on
//! another stream, before a read on a third, a source dropped right after); one thread per
//! device; and the errors of bad arguments. On one GPU the communicators have one rank.

mod common;

use cuda_rt::prelude::*;
use cuda_rt::{Device, StreamFlags};
use cuda_rt_nccl::{group, Communicator, Error, ReduceOp};

/// A non-blocking stream of `device`.
fn stream_on(device: Device) -> Stream {
    let _current = device.set_current_scoped().unwrap();
    Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap()
}

fn upload<T: DeviceCopy>(device: Device, data: &[T]) -> DeviceBuffer<T> {
    let _current = device.set_current_scoped().unwrap();
    DeviceBuffer::from_slice(data).unwrap()
}

fn zeroed<T: DeviceCopy>(device: Device, len: usize) -> DeviceBuffer<T> {
    let _current = device.set_current_scoped().unwrap();
    DeviceBuffer::zeroed(len).unwrap()
}

/// Rank `r`'s input: element `i` is `(i * 7 + r * 13) % 1000`.
fn input(rank: usize, len: usize) -> Vec<i64> {
    (0..len)
        .map(|i| ((i * 7 + rank * 13) % 1000) as i64)
        .collect()
}

#[test]
fn all_reduce_of_every_op_matches_the_cpu_at_every_size() {
    let Some((devices, _serial)) = common::devices("all_reduce_of_every_op", 1) else {
        return;
    };
    let comms = Communicator::for_devices(&devices).unwrap();
    let n = devices.len();
    let streams: Vec<Stream> = devices.iter().map(|&d| stream_on(d)).collect();
    for len in [0usize, 1, 1000, 1 << 20, (1 << 24) + 3] {
        for op in [
            ReduceOp::Sum,
            ReduceOp::Max,
            ReduceOp::Min,
            ReduceOp::Prod,
            ReduceOp::Avg,
        ] {
            let inputs: Vec<Vec<i64>> = (0..n).map(|r| input(r, len)).collect();
            let sends: Vec<DeviceBuffer<i64>> = devices
                .iter()
                .zip(&inputs)
                .map(|(&d, x)| upload(d, x))
                .collect();
            let mut recvs: Vec<DeviceBuffer<i64>> =
                devices.iter().map(|&d| zeroed(d, len)).collect();
            group(|g| {
                for (((comm, send), recv), stream) in
                    comms.iter().zip(&sends).zip(&mut recvs).zip(&streams)
                {
                    g.all_reduce(comm, send, recv, op, stream)?;
                }
                Ok(())
            })
            .unwrap();
            let expected: Vec<i64> = (0..len)
                .map(|i| {
                    let column = inputs.iter().map(|x| x[i]);
                    match op {
                        ReduceOp::Sum => column.sum(),
                        ReduceOp::Max => column.max().unwrap(),
                        ReduceOp::Min => column.min().unwrap(),
                        ReduceOp::Prod => column.fold(1i64, i64::wrapping_mul),
                        ReduceOp::Avg => column.sum::<i64>() / n as i64,
                    }
                })
                .collect();
            for (rank, recv) in recvs.iter().enumerate() {
                // A read on another stream than the all-reduce's: ordered by the tracking.
                let got = recv.to_vec().unwrap();
                assert!(
                    got == expected,
                    "{op:?} of {len} i64 over {n} ranks: rank {rank} differs at {:?}",
                    got.iter().zip(&expected).position(|(a, b)| a != b)
                );
            }
        }
    }
}

#[test]
fn broadcast_reduce_all_gather_and_reduce_scatter_match_the_cpu() {
    let Some((devices, _serial)) = common::devices("broadcast_reduce_gather_scatter", 1) else {
        return;
    };
    let comms = Communicator::for_devices(&devices).unwrap();
    let n = devices.len();
    let streams: Vec<Stream> = devices.iter().map(|&d| stream_on(d)).collect();
    let len = (1 << 22) + 5;
    let inputs: Vec<Vec<f32>> = (0..n)
        .map(|r| {
            (0..len)
                .map(|i| (i % 977) as f32 + r as f32 * 0.5)
                .collect()
        })
        .collect();

    // Broadcast from the last rank, in place.
    let root = n - 1;
    let mut data: Vec<DeviceBuffer<f32>> = devices
        .iter()
        .zip(&inputs)
        .map(|(&d, x)| upload(d, x))
        .collect();
    group(|g| {
        for ((comm, d), stream) in comms.iter().zip(&mut data).zip(&streams) {
            g.broadcast(comm, d, root, stream)?;
        }
        Ok(())
    })
    .unwrap();
    for (rank, d) in data.iter().enumerate() {
        assert!(
            d.to_vec().unwrap() == inputs[root],
            "broadcast: rank {rank} differs"
        );
    }

    // Reduce (max) into rank 0; the other ranks' receive buffers stay as they were.
    let sends: Vec<DeviceBuffer<f32>> = devices
        .iter()
        .zip(&inputs)
        .map(|(&d, x)| upload(d, x))
        .collect();
    let mut recvs: Vec<DeviceBuffer<f32>> = devices.iter().map(|&d| zeroed(d, len)).collect();
    group(|g| {
        for (((comm, s), r), stream) in comms.iter().zip(&sends).zip(&mut recvs).zip(&streams) {
            g.reduce(comm, s, r, ReduceOp::Max, 0, stream)?;
        }
        Ok(())
    })
    .unwrap();
    let max: Vec<f32> = (0..len)
        .map(|i| inputs.iter().map(|x| x[i]).fold(f32::MIN, f32::max))
        .collect();
    assert!(
        recvs[0].to_vec().unwrap() == max,
        "reduce: the root differs"
    );
    for (rank, r) in recvs.iter().enumerate().skip(1) {
        assert!(
            r.to_vec().unwrap().iter().all(|&x| x == 0.0),
            "reduce: rank {rank} was written"
        );
    }

    // All-gather: rank r's block at r * len.
    let mut gathered: Vec<DeviceBuffer<f32>> =
        devices.iter().map(|&d| zeroed(d, len * n)).collect();
    group(|g| {
        for (((comm, s), r), stream) in comms.iter().zip(&sends).zip(&mut gathered).zip(&streams) {
            g.all_gather(comm, s, r, stream)?;
        }
        Ok(())
    })
    .unwrap();
    let all: Vec<f32> = inputs.concat();
    for (rank, r) in gathered.iter().enumerate() {
        assert!(
            r.to_vec().unwrap() == all,
            "all_gather: rank {rank} differs"
        );
    }

    // Reduce-scatter of the gathered buffers: block r of n × the sum of the inputs.
    let mut scattered: Vec<DeviceBuffer<f32>> = devices.iter().map(|&d| zeroed(d, len)).collect();
    group(|g| {
        for (((comm, s), r), stream) in comms
            .iter()
            .zip(&gathered)
            .zip(&mut scattered)
            .zip(&streams)
        {
            g.reduce_scatter(comm, s, r, ReduceOp::Sum, stream)?;
        }
        Ok(())
    })
    .unwrap();
    for (rank, r) in scattered.iter().enumerate() {
        let expected: Vec<f32> = inputs[rank].iter().map(|&x| x * n as f32).collect();
        assert!(
            r.to_vec().unwrap() == expected,
            "reduce_scatter: rank {rank} differs"
        );
    }
}

#[test]
fn a_ring_of_sends_and_receives_moves_every_block_one_rank_on() {
    let Some((devices, _serial)) = common::devices("a_ring_of_sends_and_receives", 1) else {
        return;
    };
    let comms = Communicator::for_devices(&devices).unwrap();
    let n = devices.len();
    let streams: Vec<Stream> = devices.iter().map(|&d| stream_on(d)).collect();
    let len = 3 << 20;
    let inputs: Vec<Vec<u32>> = (0..n)
        .map(|r| (0..len as u32).map(|i| i ^ (r as u32) << 28).collect())
        .collect();
    let sends: Vec<DeviceBuffer<u32>> = devices
        .iter()
        .zip(&inputs)
        .map(|(&d, x)| upload(d, x))
        .collect();
    let mut recvs: Vec<DeviceBuffer<u32>> = devices.iter().map(|&d| zeroed(d, len)).collect();
    group(|g| {
        for (((rank, comm), s), stream) in comms.iter().enumerate().zip(&sends).zip(&streams) {
            g.send(comm, s, (rank + 1) % n, stream)?;
        }
        for (((rank, comm), r), stream) in comms.iter().enumerate().zip(&mut recvs).zip(&streams) {
            g.recv(comm, r, (rank + n - 1) % n, stream)?;
        }
        Ok(())
    })
    .unwrap();
    for (rank, r) in recvs.iter().enumerate() {
        assert!(
            r.to_vec().unwrap() == inputs[(rank + n - 1) % n],
            "ring: rank {rank} differs"
        );
    }
}

#[test]
fn an_all_reduce_is_ordered_after_uploads_on_other_streams_and_before_later_readers() {
    let Some((devices, _serial)) = common::devices("an_all_reduce_is_ordered", 1) else {
        return;
    };
    let comms = Communicator::for_devices(&devices).unwrap();
    let n = devices.len();
    let len = 64 << 20; // bytes; each memset takes tens of microseconds
    for round in 0..3 {
        let mut data: Vec<DeviceBuffer<u8>> = devices.iter().map(|&d| zeroed(d, len)).collect();
        let writers: Vec<Stream> = devices.iter().map(|&d| stream_on(d)).collect();
        let reducers: Vec<Stream> = devices.iter().map(|&d| stream_on(d)).collect();
        // A queue of writes on each writer stream; the last one leaves every byte 1.
        for (d, w) in data.iter_mut().zip(&writers) {
            for value in [7u8, 9, 11, 13, 1] {
                d.set_bytes_async(w, value).unwrap();
            }
        }
        group(|g| {
            for ((comm, d), s) in comms.iter().zip(&mut data).zip(&reducers) {
                g.all_reduce_in_place(comm, d, ReduceOp::Sum, s)?;
            }
            Ok(())
        })
        .unwrap();
        for (rank, d) in data.iter().enumerate() {
            let got = d.to_vec().unwrap();
            let wrong = got.iter().filter(|&&b| b as usize != n).count();
            assert_eq!(
                wrong, 0,
                "round {round}: rank {rank}: {wrong} of {len} bytes are not {n}"
            );
        }
    }
}

#[test]
fn a_source_dropped_right_after_an_all_reduce_is_freed_behind_it() {
    let Some((devices, _serial)) = common::devices("a_source_dropped_right_after", 1) else {
        return;
    };
    let comms = Communicator::for_devices(&devices).unwrap();
    let n = devices.len();
    let len = 32 << 20;
    let streams: Vec<Stream> = devices.iter().map(|&d| stream_on(d)).collect();
    let others: Vec<Stream> = devices.iter().map(|&d| stream_on(d)).collect();
    for round in 0..3 {
        let sends: Vec<DeviceBuffer<u32>> = devices
            .iter()
            .zip(&streams)
            .map(|(&d, s)| {
                let _current = d.set_current_scoped().unwrap();
                let mut b = DeviceBuffer::<u32>::new_async(len, s).unwrap();
                b.set_bytes_async(s, 1).unwrap();
                b
            })
            .collect();
        let mut recvs: Vec<DeviceBuffer<u32>> = devices.iter().map(|&d| zeroed(d, len)).collect();
        group(|g| {
            for (((comm, s), r), stream) in comms.iter().zip(&sends).zip(&mut recvs).zip(&streams) {
                g.all_reduce(comm, s, r, ReduceOp::Sum, stream)?;
            }
            Ok(())
        })
        .unwrap();
        drop(sends);
        // New allocations, likely of the memory just given back, overwritten at once on other
        // streams: had the sources been freed before the all-reduce read them, it would sum
        // these bytes.
        let clobbers: Vec<DeviceBuffer<u32>> = devices
            .iter()
            .zip(&others)
            .map(|(&d, s)| {
                let _current = d.set_current_scoped().unwrap();
                let mut b = DeviceBuffer::<u32>::new_async(len, s).unwrap();
                b.set_bytes_async(s, 0xff).unwrap();
                b
            })
            .collect();
        let expected = 0x0101_0101u32.wrapping_mul(n as u32);
        for (rank, r) in recvs.iter().enumerate() {
            let wrong = r
                .to_vec()
                .unwrap()
                .iter()
                .filter(|&&x| x != expected)
                .count();
            assert_eq!(
                wrong, 0,
                "round {round}: rank {rank}: {wrong} of {len} sums wrong"
            );
        }
        drop(clobbers);
    }
}

#[test]
fn one_thread_per_device_queues_without_a_group() {
    let Some((devices, _serial)) = common::devices("one_thread_per_device", 1) else {
        return;
    };
    let comms = Communicator::for_devices(&devices).unwrap();
    let n = devices.len();
    let len = 1 << 22;
    let sums: Vec<Vec<f64>> = std::thread::scope(|scope| {
        let handles: Vec<_> = comms
            .into_iter()
            .map(|comm| {
                scope.spawn(move || {
                    let device = comm.device();
                    let stream = stream_on(device);
                    let mut data = upload(device, &vec![comm.rank() as f64 + 1.0; len]);
                    comm.all_reduce_in_place(&mut data, ReduceOp::Sum, &stream)
                        .unwrap();
                    let out = data.to_vec().unwrap();
                    comm.close().unwrap();
                    out
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let expected = (n * (n + 1) / 2) as f64;
    for (rank, s) in sums.iter().enumerate() {
        assert!(
            s.iter().all(|&x| x == expected),
            "rank {rank}: not all {expected}"
        );
    }
}

#[test]
fn bad_arguments_are_refused_before_nccl_and_nothing_of_the_group_is_queued() {
    let Some((devices, _serial)) = common::devices("bad_arguments_are_refused", 1) else {
        return;
    };
    let comms = Communicator::for_devices(&devices).unwrap();
    let n = devices.len();
    let d0 = devices[0];
    let stream = stream_on(d0);
    let send = upload(d0, &[1u32; 100]);
    let mut short: DeviceBuffer<u32> = zeroed(d0, 99);
    let mut gathered: DeviceBuffer<u32> = zeroed(d0, 100 * n + 1);
    let comm = &comms[0];
    match comm.all_reduce(&send, &mut short, ReduceOp::Sum, &stream) {
        Err(Error::LengthMismatch {
            expected: 100,
            actual: 99,
            ..
        }) => {}
        other => panic!("all_reduce into a shorter buffer: {other:?}"),
    }
    match comm.all_gather(&send, &mut gathered, &stream) {
        Err(Error::LengthMismatch { actual, .. }) if actual == 100 * n + 1 => {}
        other => panic!("all_gather into a wrong length: {other:?}"),
    }
    let mut data = upload(d0, &[5u32; 100]);
    match comm.broadcast(&mut data, n, &stream) {
        Err(Error::RankOutOfRange { rank, size, .. }) if rank == n && size == n => {}
        other => panic!("broadcast from rank {n}: {other:?}"),
    }
    match comm.send(&send, usize::MAX, &stream) {
        Err(Error::RankOutOfRange { .. }) => {}
        other => panic!("send to usize::MAX: {other:?}"),
    }
    // A group whose build fails after adding an operation queues nothing: the data is intact
    // and no rank waits for a collective (which a queued one-rank-only all-reduce would make
    // them do, with more than one rank).
    let result: Result<(), Error> = group(|g| {
        g.all_reduce_in_place(comm, &mut data, ReduceOp::Sum, &stream)?;
        g.broadcast(comm, &mut short, n + 7, &stream)?;
        Ok(())
    });
    assert!(
        matches!(result, Err(Error::RankOutOfRange { .. })),
        "{result:?}"
    );
    assert_eq!(data.to_vec().unwrap(), vec![5u32; 100]);
    assert!(cuda_rt_nccl::UniqueId::from_bytes(&[0u8; 127]).is_err());
    let message = format!("{}", comm.send(&send, n, &stream).unwrap_err());
    assert!(message.contains(&format!("rank {n}")), "{message}");

    if n >= 2 {
        // A stream and memory of device 1 given to rank 0's communicator.
        let d1 = devices[1];
        let other_stream = stream_on(d1);
        let other_data = upload(d1, &[1u32; 100]);
        match comm.all_reduce(
            &send,
            &mut upload(d0, &[0u32; 100]),
            ReduceOp::Sum,
            &other_stream,
        ) {
            Err(Error::WrongDevice {
                what: "stream",
                communicator: 0,
                found: 1,
                ..
            }) => {}
            other => panic!("a stream of device 1: {other:?}"),
        }
        match comm.send(&other_data, 1, &stream) {
            Err(
                e @ Error::WrongDevice {
                    communicator: 0,
                    found: 1,
                    ..
                },
            ) => {
                let text = e.to_string();
                assert!(
                    text.contains("device 1") && text.contains("device 0"),
                    "{text}"
                );
            }
            other => panic!("memory of device 1: {other:?}"),
        }
    }
    for c in comms {
        c.close().unwrap();
    }
}
