//! The results of the tour: what each step measured, as text for people and as JSON for
//! programs (`--json`). Every figure in the JSON comes with what it was computed from (bytes and
//! seconds beside GB/s), so a reader can check it.

use serde_json::{json, Value};
use std::fmt::Write as _;
use std::time::Duration;

/// Bytes moved in a time: a bandwidth. GB/s are decimal (10^9 bytes per second), as PCIe and
/// `nvidia-smi` count them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bandwidth {
    /// Bytes moved.
    pub bytes: u64,
    /// Time it took.
    pub time: Duration,
}

impl Bandwidth {
    /// Bytes per second divided by 10^9 (0 for a zero time).
    pub fn gb_per_s(&self) -> f64 {
        let seconds = self.time.as_secs_f64();
        if seconds > 0.0 {
            self.bytes as f64 / seconds / 1e9
        } else {
            0.0
        }
    }

    /// `{"bytes": .., "seconds": .., "gb_per_s": ..}`.
    pub fn to_json(self) -> Value {
        json!({ "bytes": self.bytes, "seconds": self.time.as_secs_f64(), "gb_per_s": self.gb_per_s() })
    }
}

/// Step 1: the device and the software around it.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceReport {
    /// Device ordinal.
    pub index: i32,
    /// Marketing name, e.g. `NVIDIA H100 80GB HBM3`.
    pub name: String,
    /// Compute capability (major, minor).
    pub compute_capability: (i32, i32),
    /// Streaming multiprocessors.
    pub multiprocessors: i32,
    /// Global memory in bytes.
    pub memory_bytes: u64,
    /// Copy engines that can run a copy while a kernel runs (`asyncEngineCount`): 2 or more
    /// means copies in both directions overlap each other and kernels.
    pub copy_engines: i32,
    /// Whether kernels of different streams may run at once.
    pub concurrent_kernels: bool,
    /// CUDA version the driver supports (major, minor).
    pub driver_version: (i32, i32),
    /// CUDA runtime version linked in (major, minor).
    pub runtime_version: (i32, i32),
    /// How cudart is linked: `static` or `dynamic`.
    pub cudart_link: String,
    /// PCI location, `domain:bus:device`.
    pub pci_bus_id: String,
}

/// Which kind of host memory a transfer used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostMemory {
    /// Ordinary (pageable) memory: the driver stages it through its own pinned buffers.
    Pageable,
    /// Page-locked memory from `cudaMallocHost`: the copy engine reads it directly.
    Pinned,
    /// Ordinary memory page-locked in place with `cudaHostRegister`.
    Registered,
}

impl HostMemory {
    /// `pageable`, `pinned`, `registered`.
    pub fn name(self) -> &'static str {
        match self {
            HostMemory::Pageable => "pageable",
            HostMemory::Pinned => "pinned",
            HostMemory::Registered => "registered",
        }
    }
}

/// H2D and D2H bandwidth with one kind of host memory.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TransferRow {
    /// The host memory used.
    pub memory: HostMemory,
    /// Host to device, median of the repetitions.
    pub host_to_device: Bandwidth,
    /// Device to host, median of the repetitions.
    pub device_to_host: Bandwidth,
}

/// Step 2: transfer bandwidths.
#[derive(Debug, Clone, PartialEq)]
pub struct TransferReport {
    /// Bytes per copy.
    pub bytes: u64,
    /// Repetitions, of which the median is reported.
    pub repeat: u32,
    /// One row per kind of host memory.
    pub rows: Vec<TransferRow>,
    /// Pinned H2D and D2H of `bytes` each at the same time on two streams: the total bytes of
    /// both over the time until both finished.
    pub bidirectional: Bandwidth,
}

/// Step 3: one stream against the overlapped pipeline.
#[derive(Debug, Clone, PartialEq)]
pub struct OverlapReport {
    /// Bytes of input (the output is as large).
    pub bytes: u64,
    /// Chunks the job was cut into.
    pub chunks: usize,
    /// Streams of the pipelined run.
    pub streams: usize,
    /// What the kernel step computes.
    pub kernel: String,
    /// Timed runs of each kind, of which the median is reported.
    pub repeat: u32,
    /// Median time with one stream (nothing overlaps but what one stream allows: nothing).
    pub serial: Duration,
    /// Median time of the pipeline over `streams` streams.
    pub pipelined: Duration,
    /// The time of the pictured pipelined run, which has events around every operation (they
    /// cost a little).
    pub pipelined_with_stage_events: Duration,
    /// Median time of the same pipeline on pageable host memory, through its page-locked staging
    /// buffers (the host's copies in and out of them are part of it).
    pub staged: Duration,
    /// The time set by the bidirectional PCIe bandwidth: all input and output bytes over the
    /// bandwidth of pinned copies in both directions at once, measured just before.
    pub bound: Duration,
    /// The bidirectional bandwidth the bound comes from.
    pub bidirectional: Bandwidth,
    /// The pipeline's fill in its pictured run: from its start until the first chunk's kernel
    /// finished. Until then nothing can be copied out, so a chunked pipeline takes at least
    /// about `bound + fill`.
    pub fill: Duration,
    /// Whether both runs' outputs equal the CPU's.
    pub verified: bool,
    /// What the host thread did while the pipeline ran (the median pipelined run).
    pub host: HostWhileWaiting,
    /// Time from the start of the pipelined run until its stream callback ran.
    pub callback_after: Duration,
}

impl OverlapReport {
    /// `serial / pipelined`.
    pub fn speedup(&self) -> f64 {
        self.serial.as_secs_f64() / self.pipelined.as_secs_f64().max(1e-12)
    }

    /// How far above the bound the pipeline is: `pipelined / bound - 1` (0.02 = 2% slower).
    pub fn over_bound(&self) -> f64 {
        self.pipelined.as_secs_f64() / self.bound.as_secs_f64().max(1e-12) - 1.0
    }
}

/// The host thread's own work while it waited for the GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostWhileWaiting {
    /// Units of CPU work done (each a checksum over a fixed slice of the input).
    pub work_units: u64,
    /// Times the host asked whether the last event had occurred (`cudaEventQuery`).
    pub polls: u64,
    /// Time spent inside the work units.
    pub working: Duration,
    /// Time from the end of enqueueing until the host saw the work complete.
    pub waited: Duration,
}

impl HostWhileWaiting {
    /// `working / waited`: the share of the wait the CPU spent on its own work.
    pub fn busy_fraction(&self) -> f64 {
        self.working.as_secs_f64() / self.waited.as_secs_f64().max(1e-12)
    }
}

/// Step 4: the sort, or why it did not run.
#[derive(Debug, Clone, PartialEq)]
pub enum SortReport {
    /// It ran.
    Sorted {
        /// Keys sorted.
        keys: u64,
        /// Median GPU time (events around the sort, data already on the device).
        time: Duration,
        /// Whether the result equals the CPU's sort of the same keys.
        verified: bool,
    },
}

impl SortReport {
    /// Billions of keys per second, when sorted.
    pub fn gkeys_per_s(&self) -> Option<f64> {
        match self {
            SortReport::Sorted { keys, time, .. } => {
                Some(*keys as f64 / time.as_secs_f64().max(1e-12) / 1e9)
            }
        }
    }
}

/// Everything the tour measured; a step that did not run is `None`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TourReport {
    /// Step 1.
    pub device: Option<DeviceReport>,
    /// Step 2.
    pub transfers: Option<TransferReport>,
    /// Step 3.
    pub overlap: Option<OverlapReport>,
    /// Step 4.
    pub sort: Option<SortReport>,
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

fn gib(bytes: u64) -> String {
    let gib = bytes as f64 / (1u64 << 30) as f64;
    if gib >= 1.0 {
        format!("{gib:.1} GiB")
    } else {
        format!("{} MiB", bytes >> 20)
    }
}

fn version((major, minor): (i32, i32)) -> String {
    format!("{major}.{minor}")
}

impl DeviceReport {
    /// The text of step 1.
    pub fn text(&self) -> String {
        let (major, minor) = self.compute_capability;
        format!(
            "1. Device {index}: {name}\n\
             \x20  compute capability {major}.{minor}, {sms} SMs, {memory} of memory, PCI {pci}\n\
             \x20  copy engines: {engines} ({engines_meaning}); concurrent kernels: {concurrent}\n\
             \x20  CUDA driver {driver}, runtime {runtime} (cudart linked {link})\n",
            index = self.index,
            name = self.name,
            sms = self.multiprocessors,
            memory = gib(self.memory_bytes),
            pci = self.pci_bus_id,
            engines = self.copy_engines,
            engines_meaning = match self.copy_engines {
                0 => "copies do not overlap kernels",
                1 => "one copy direction at a time overlaps kernels",
                _ => "both copy directions overlap each other and kernels",
            },
            concurrent = if self.concurrent_kernels { "yes" } else { "no" },
            driver = version(self.driver_version),
            runtime = version(self.runtime_version),
            link = self.cudart_link,
        )
    }

    /// Step 1 as JSON.
    pub fn to_json(&self) -> Value {
        json!({
            "index": self.index,
            "name": self.name,
            "compute_capability": version(self.compute_capability),
            "multiprocessors": self.multiprocessors,
            "memory_bytes": self.memory_bytes,
            "copy_engines": self.copy_engines,
            "concurrent_kernels": self.concurrent_kernels,
            "driver_version": version(self.driver_version),
            "runtime_version": version(self.runtime_version),
            "cudart_link": self.cudart_link,
            "pci_bus_id": self.pci_bus_id,
        })
    }
}

impl TransferReport {
    /// The text of step 2.
    pub fn text(&self) -> String {
        let mut text = format!(
            "2. Transfers: {} per copy, median of {}\n\
             \x20  host memory       H2D          D2H\n",
            gib(self.bytes),
            self.repeat
        );
        for row in &self.rows {
            let _ = writeln!(
                text,
                "   {:<12} {:>7.1} GB/s {:>7.1} GB/s",
                row.memory.name(),
                row.host_to_device.gb_per_s(),
                row.device_to_host.gb_per_s()
            );
        }
        let _ = writeln!(
            text,
            "   both directions at once (pinned): {:.1} GB/s in total",
            self.bidirectional.gb_per_s()
        );
        text
    }

    /// Step 2 as JSON.
    pub fn to_json(&self) -> Value {
        json!({
            "bytes": self.bytes,
            "repeat": self.repeat,
            "rows": self.rows.iter().map(|row| json!({
                "memory": row.memory.name(),
                "host_to_device": row.host_to_device.to_json(),
                "device_to_host": row.device_to_host.to_json(),
            })).collect::<Vec<_>>(),
            "bidirectional": self.bidirectional.to_json(),
        })
    }
}

impl OverlapReport {
    /// The text of step 3.
    pub fn text(&self) -> String {
        let within = self.over_bound();
        format!(
            "3. Overlap: {size} in {chunks} chunks, H2D -> kernel ({kernel}) -> D2H, pinned host memory, median of {repeat}\n\
             \x20  1 stream   {serial:>10}\n\
             \x20  {streams} streams  {pipelined:>10}   {speedup:.2}x faster\n\
             \x20  bound      {bound:>10}   (in + out bytes at {bidir:.1} GB/s both ways); pipeline {rel}\n\
             \x20  fill       {fill:>10}   (the first chunk in and through the kernel: nothing can go out before)\n\
             \x20  with events around every operation (the picture): {pictured}\n\
             \x20  pageable host memory through pinned staging, {streams} streams: {staged}\n\
             \x20  host thread meanwhile: {units} units of CPU work, {busy:.0}% of its {waited} wait, \
             polling is_complete() {polls} times\n\
             \x20  completion: stream callback ran {callback} after the first copy was issued\n\
             \x20  output {verified}\n",
            size = gib(self.bytes),
            repeat = self.repeat,
            pictured = ms(self.pipelined_with_stage_events),
            chunks = self.chunks,
            kernel = self.kernel,
            serial = ms(self.serial),
            streams = self.streams,
            pipelined = ms(self.pipelined),
            speedup = self.speedup(),
            bound = ms(self.bound),
            staged = ms(self.staged),
            fill = ms(self.fill),
            bidir = self.bidirectional.gb_per_s(),
            rel = if within >= 0.0 {
                format!("{:.1}% above it", within * 100.0)
            } else {
                format!("{:.1}% below it (measurement noise)", -within * 100.0)
            },
            units = self.host.work_units,
            busy = self.host.busy_fraction() * 100.0,
            waited = ms(self.host.waited),
            polls = self.host.polls,
            callback = ms(self.callback_after),
            verified = if self.verified {
                "equals the CPU's"
            } else {
                "DIFFERS from the CPU's"
            },
        )
    }

    /// Step 3 as JSON.
    pub fn to_json(&self) -> Value {
        json!({
            "bytes": self.bytes,
            "chunks": self.chunks,
            "streams": self.streams,
            "kernel": self.kernel,
            "serial_seconds": self.serial.as_secs_f64(),
            "repeat": self.repeat,
            "pipelined_seconds": self.pipelined.as_secs_f64(),
            "pipelined_with_stage_events_seconds": self.pipelined_with_stage_events.as_secs_f64(),
            "staged_seconds": self.staged.as_secs_f64(),
            "speedup": self.speedup(),
            "bound_seconds": self.bound.as_secs_f64(),
            "over_bound": self.over_bound(),
            "bidirectional": self.bidirectional.to_json(),
            "fill_seconds": self.fill.as_secs_f64(),
            "verified": self.verified,
            "host": {
                "work_units": self.host.work_units,
                "polls": self.host.polls,
                "working_seconds": self.host.working.as_secs_f64(),
                "waited_seconds": self.host.waited.as_secs_f64(),
                "busy_fraction": self.host.busy_fraction(),
            },
            "callback_after_seconds": self.callback_after.as_secs_f64(),
        })
    }
}

impl SortReport {
    /// The text of step 4.
    pub fn text(&self) -> String {
        match self {
            SortReport::Sorted {
                keys,
                time,
                verified,
            } => format!(
                "4. Sort: {keys} random u32 keys, dynamic-parallelism mergesort on the GPU, median\n\
                 \x20  {time}, {rate:.2} Gkeys/s; result {verified}\n",
                keys = count(*keys),
                time = ms(*time),
                rate = self.gkeys_per_s().unwrap_or(0.0),
                verified = if *verified {
                    "equals the CPU's sort"
                } else {
                    "DIFFERS from the CPU's sort"
                },
            ),
        }
    }

    /// Step 4 as JSON.
    pub fn to_json(&self) -> Value {
        match self {
            SortReport::Sorted {
                keys,
                time,
                verified,
            } => json!({
                "keys": keys,
                "seconds": time.as_secs_f64(),
                "gkeys_per_s": self.gkeys_per_s(),
                "verified": verified,
            }),
        }
    }
}

/// `2^24` for powers of two from 2^10 up, else the decimal number.
fn count(n: u64) -> String {
    if n.is_power_of_two() && n >= 1024 {
        format!("2^{}", n.trailing_zeros())
    } else {
        n.to_string()
    }
}

impl TourReport {
    /// The closing table: one line per figure that matters.
    pub fn summary(&self) -> String {
        let mut rows: Vec<(String, String)> = Vec::new();
        if let Some(device) = &self.device {
            rows.push((
                "device".into(),
                format!(
                    "{} (sm_{}{})",
                    device.name, device.compute_capability.0, device.compute_capability.1
                ),
            ));
        }
        if let Some(transfers) = &self.transfers {
            for row in &transfers.rows {
                rows.push((
                    format!("{} H2D / D2H", row.memory.name()),
                    format!(
                        "{:.1} / {:.1} GB/s",
                        row.host_to_device.gb_per_s(),
                        row.device_to_host.gb_per_s()
                    ),
                ));
            }
            rows.push((
                "both directions".into(),
                format!("{:.1} GB/s", transfers.bidirectional.gb_per_s()),
            ));
        }
        if let Some(overlap) = &self.overlap {
            rows.push(("overlap: 1 stream".into(), ms(overlap.serial)));
            rows.push((
                format!("overlap: {} streams", overlap.streams),
                format!(
                    "{} ({:.2}x; {:+.1}% vs bound {})",
                    ms(overlap.pipelined),
                    overlap.speedup(),
                    overlap.over_bound() * 100.0,
                    ms(overlap.bound)
                ),
            ));
            rows.push((
                "host busy while waiting".into(),
                format!("{:.0}%", overlap.host.busy_fraction() * 100.0),
            ));
        }
        match &self.sort {
            Some(sort @ SortReport::Sorted { keys, .. }) => rows.push((
                format!("sort {}", count(*keys)),
                format!("{:.2} Gkeys/s", sort.gkeys_per_s().unwrap_or(0.0)),
            )),
            None => {}
        }
        let verified = [
            self.overlap.as_ref().map(|o| o.verified),
            match &self.sort {
                Some(SortReport::Sorted { verified, .. }) => Some(*verified),
                _ => None,
            },
        ];
        if verified.iter().any(Option::is_some) {
            let all = verified.iter().flatten().all(|&v| v);
            rows.push((
                "results checked on the CPU".into(),
                if all { "all equal" } else { "MISMATCH" }.into(),
            ));
        }
        let width = rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
        let mut text = String::from("Summary\n");
        for (key, value) in rows {
            let _ = writeln!(text, "   {key:<width$}  {value}");
        }
        text
    }

    /// Whether every check that ran passed.
    pub fn all_verified(&self) -> bool {
        self.overlap.as_ref().is_none_or(|o| o.verified)
            && !matches!(
                self.sort,
                Some(SortReport::Sorted {
                    verified: false,
                    ..
                })
            )
    }

    /// Everything as one JSON document.
    pub fn to_json(&self) -> Value {
        json!({
            "device": self.device.as_ref().map(DeviceReport::to_json),
            "transfers": self.transfers.as_ref().map(TransferReport::to_json),
            "overlap": self.overlap.as_ref().map(OverlapReport::to_json),
            "sort": self.sort.as_ref().map(SortReport::to_json),
            "all_verified": self.all_verified(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn overlap() -> OverlapReport {
        OverlapReport {
            bytes: 256 << 20,
            chunks: 16,
            streams: 4,
            kernel: "out = in * 3 + 1".into(),
            serial: Duration::from_micros(10_290),
            repeat: 9,
            pipelined: Duration::from_micros(5_800),
            pipelined_with_stage_events: Duration::from_micros(5_950),
            staged: Duration::from_micros(30_000),
            bound: Duration::from_micros(5_760),
            bidirectional: Bandwidth {
                bytes: 512 << 20,
                time: Duration::from_micros(5_760),
            },
            fill: Duration::from_micros(370),
            verified: true,
            host: HostWhileWaiting {
                work_units: 1000,
                polls: 1001,
                working: Duration::from_micros(5_000),
                waited: Duration::from_micros(5_500),
            },
            callback_after: Duration::from_micros(5_810),
        }
    }

    #[test]
    fn bandwidth_is_bytes_over_time() {
        let b = Bandwidth {
            bytes: 93_200_000_000,
            time: Duration::from_secs(1),
        };
        assert!((b.gb_per_s() - 93.2).abs() < 1e-9);
        assert_eq!(b.to_json()["gb_per_s"], 93.2);
    }

    #[test]
    fn overlap_figures() {
        let o = overlap();
        assert!((o.speedup() - 10.29 / 5.8).abs() < 1e-9);
        assert!((o.over_bound() - (5.8 / 5.76 - 1.0)).abs() < 1e-9);
        assert!(o.text().contains("0.7% above it"), "{}", o.text());
        let v = o.to_json();
        assert_eq!(v["streams"], 4);
        // The bound is the time to move in + out at the bidirectional bandwidth.
        let bound = v["bound_seconds"].as_f64().unwrap();
        let bidir = v["bidirectional"]["gb_per_s"].as_f64().unwrap() * 1e9;
        assert!((bound - 2.0 * v["bytes"].as_f64().unwrap() / bidir).abs() < 1e-9);
    }

    #[test]
    fn summary_and_json_cover_what_ran() {
        let report = TourReport {
            overlap: Some(overlap()),
            sort: Some(SortReport::Sorted {
                keys: 1 << 20,
                time: Duration::from_millis(1),
                verified: true,
            }),
            ..TourReport::default()
        };
        let summary = report.summary();
        assert!(summary.contains("overlap: 4 streams"), "{summary}");
        assert!(summary.contains("sort"), "{summary}");
        let v = report.to_json();
        assert!(v["device"].is_null());
        assert_eq!(v["sort"]["keys"], 1 << 20);
        assert_eq!(v["all_verified"], true);
    }
}
