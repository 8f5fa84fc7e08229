//! All-reduce through the safe communicator against raw NCCL, in one process driving every
//! device of the machine (one communicator per device, one group per round), in the same run.
//!
//! Rows: `raw` calls the loaded `ncclAllReduce` directly between `ncclGroupStart` and
//! `ncclGroupEnd`; `cuda-rt-nccl` queues the same through [`group`] with the tracking;
//! `raw (control)` is `raw` again, timed as the safe row is, to show what the pairing alone
//! adds. Each round times one all-reduce of every device's buffer (in place, `f32`, sum) from
//! the first call to the last stream's synchronize; the three forms take turns in a rotating
//! order; medians of the timed rounds after warm-up. Bus bandwidth is NCCL's:
//! bytes / time × 2 (n − 1) / n.
//!
//! `cargo bench -p cuda-rt-nccl --bench all_reduce` (needs NCCL: `CUDA_RT_NCCL_LIBRARY` or
//! `libnccl.so.2` on the loader path); `-- --quick` for fewer rounds.

use cuda_rt::prelude::*;
use cuda_rt::{Device, StreamFlags};
use cuda_rt_nccl::{group, raw, Communicator, ReduceOp};
use std::time::Instant;

/// One timed form of the round.
type Round = (&'static str, fn(&mut [Rank]));

struct Rank {
    comm: Communicator,
    stream: Stream,
    data: DeviceBuffer<f32>,
}

fn raw_round(ranks: &mut [Rank]) {
    let api = &raw::library().unwrap().api;
    // SAFETY: every buffer is live and on its communicator's device, its stream too; all
    // earlier work on the buffers was waited for (each round ends with a synchronize).
    unsafe {
        assert_eq!(api.ncclGroupStart(), 0);
        for r in ranks.iter_mut() {
            let p = r.data.as_mut_raw_ptr().cast();
            let status = api.ncclAllReduce(
                p,
                p,
                r.data.len(),
                raw::data_type::F32,
                raw::red_op::SUM,
                r.comm.as_raw(),
                r.stream.as_raw(),
            );
            assert_eq!(status, 0);
        }
        assert_eq!(api.ncclGroupEnd(), 0);
    }
    for r in ranks.iter() {
        r.stream.synchronize().unwrap();
    }
}

fn safe_round(ranks: &mut [Rank]) {
    group(|g| {
        for r in ranks.iter_mut() {
            g.all_reduce_in_place(&r.comm, &mut r.data, ReduceOp::Sum, &r.stream)?;
        }
        Ok(())
    })
    .unwrap();
    for r in ranks.iter() {
        r.stream.synchronize().unwrap();
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let count = match Device::count() {
        Ok(c) if c > 0 => c,
        other => {
            println!("all_reduce: skipped: no CUDA device ({other:?})");
            return;
        }
    };
    let library = match raw::library() {
        Ok(l) => l,
        Err(e) => {
            println!("all_reduce: skipped: {e}");
            return;
        }
    };
    let devices: Vec<Device> = (0..count).map(|d| Device::new(d).unwrap()).collect();
    let name = devices[0].name().unwrap();
    println!(
        "all_reduce: {count} × {name}, NCCL {} ({})",
        raw::version_string(library.version),
        library.path
    );
    let comms = Communicator::for_devices(&devices).unwrap();
    let (warm, timed) = if quick { (2, 5) } else { (5, 21) };
    println!("\n| elements (f32) | bytes a device | row | median | algorithm bandwidth | bus bandwidth | safe / raw time |");
    println!("|---|---|---|---|---|---|---|");
    let mut comms = comms.into_iter();
    let mut ranks: Vec<Rank> = devices
        .iter()
        .map(|&d| {
            let _current = d.set_current_scoped().unwrap();
            Rank {
                comm: comms.next().unwrap(),
                stream: Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap(),
                data: DeviceBuffer::zeroed(1 << 28).unwrap(),
            }
        })
        .collect();
    for len in [256usize, 1 << 20, 1 << 28] {
        let mut shrunk: Vec<Rank> = Vec::new();
        for r in ranks.drain(..) {
            let data = if r.data.len() == len {
                r.data
            } else {
                let _current = r.comm.device().set_current_scoped().unwrap();
                DeviceBuffer::zeroed(len).unwrap()
            };
            shrunk.push(Rank { data, ..r });
        }
        let mut ranks_now = shrunk;
        let rows: [Round; 3] = [
            ("raw", raw_round),
            ("cuda-rt-nccl", safe_round),
            ("raw (control)", raw_round),
        ];
        let mut times: Vec<Vec<f64>> = vec![Vec::new(); rows.len()];
        for round in 0..warm + timed {
            for k in 0..rows.len() {
                let row = (round + k) % rows.len();
                let start = Instant::now();
                (rows[row].1)(&mut ranks_now);
                if round >= warm {
                    times[row].push(start.elapsed().as_secs_f64());
                }
            }
        }
        let bytes = (len * 4) as f64;
        let raw_median = median(times[0].clone());
        for (row, t) in rows.iter().zip(times) {
            let m = median(t);
            let alg = bytes / m / 1e9;
            let bus = alg * 2.0 * (count as f64 - 1.0) / count as f64;
            println!(
                "| {len} | {} | {} | {:.1} µs | {alg:.1} GB/s | {bus:.1} GB/s | {:.3} |",
                len * 4,
                row.0,
                m * 1e6,
                m / raw_median
            );
        }
        ranks = ranks_now;
    }
}
