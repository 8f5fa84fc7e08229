//! The sort across the GPUs of one host: keys spread over several devices, or keys of one
//! device sorted by several.
//!
//! Each device sorts its part with the ordinary sort. Then sorted runs are merged pairwise, in
//! rounds (two runs, then four, ...): the merge of two runs is cut into slices, one per device
//! of the runs, each device writing its slice into its own memory and reading the runs' parts
//! wherever they are, over NVLink or PCIe (`kernels/merge_runs.cu`). A round moves every key
//! once between memories and reads it once more than a merge pass of one GPU would.
//!
//! Everything is queued on streams, one per device, and ordered by cuda-rt's tracking of the
//! memory: a slice's merge waits for the sorts (or earlier merges) of every part it reads, and a
//! part is rewritten only after every device has read it. Nothing blocks the host. The devices
//! get peer access to one another ([`Device::enable_peer_access`], which stays enabled).

use crate::ffi::{self, merge_runs, MergeArgs, SortRun};
use crate::{Order, SortError, SortKey, SortWorkspace};
use cuda_rt::{
    Device, DeviceBuffer, DeviceCopy, DeviceMemory, DeviceMemoryMut, Stream, StreamFlags, StreamRef,
};
use cuda_rt_sys as sys;

/// One part of the data: keys, and values for pairs.
struct Part<'a, K: DeviceCopy, V: DeviceCopy> {
    keys: &'a mut DeviceBuffer<K>,
    values: Option<&'a mut DeviceBuffer<V>>,
}

impl SortWorkspace {
    /// Sorts keys spread over several devices, as one array: `parts[i]` (on the device of
    /// `streams[i]`) is the `i`-th piece of the array. Afterwards the concatenation of the parts
    /// is sorted, and each part keeps its length: part 0 holds the smallest keys, part `i` the
    /// keys of ranks `len(0) + ... + len(i-1)` onwards. Stable across parts too: equal keys keep
    /// the order of the concatenation.
    ///
    /// Queued on the streams; the host does not wait. Each device sorts its part, then
    /// ⌈log2 parts⌉ rounds of merges follow, each device writing its own part (module docs).
    /// A part's buffer may be exchanged for another buffer of the same device and length (the
    /// merges write the other of two buffers, which are swapped at the end where that is where
    /// the keys are).
    ///
    /// # Errors
    /// [`SortError::TooManyParts`] for no parts or more than
    /// [`merge_runs::MAX_PARTS`](ffi::merge_runs::MAX_PARTS); [`SortError::Runtime`] with
    /// [`ErrorKind::LengthMismatch`](cuda_rt::ErrorKind::LengthMismatch) unless there is a stream per part, with
    /// [`ErrorKind::WrongDevice`](cuda_rt::ErrorKind::WrongDevice) for a stream of another device than its part, and errors of
    /// enabling peer access (`cudaErrorPeerAccessUnsupported` where two devices cannot reach
    /// each other); the errors of [`sort`](Self::sort) and of queuing the merges.
    pub fn sort_spread<K: SortKey + DeviceCopy>(
        &self,
        parts: &mut [DeviceBuffer<K>],
        streams: &[Stream],
        order: Order,
    ) -> Result<(), SortError> {
        let parts = parts
            .iter_mut()
            .map(|keys| Part::<K, u32> { keys, values: None })
            .collect();
        self.spread(parts, streams, order, None)
    }

    /// [`sort_spread`](Self::sort_spread) of key–value pairs: `values[i]` moves with
    /// `keys[i]`.
    ///
    /// # Errors
    /// As for [`sort_spread`](Self::sort_spread); [`SortError::LengthMismatch`] for a part whose
    /// keys and values differ in length; [`SortError::UnsupportedValue`] for values not of 4,
    /// 8 or 16 bytes.
    pub fn sort_pairs_spread<K: SortKey + DeviceCopy, V: DeviceCopy>(
        &self,
        keys: &mut [DeviceBuffer<K>],
        values: &mut [DeviceBuffer<V>],
        streams: &[Stream],
        order: Order,
    ) -> Result<(), SortError> {
        if keys.len() != values.len() {
            return Err(SortError::length_mismatch(
                keys.len(),
                values.len(),
                "sort_pairs_spread: value parts",
            ));
        }
        check_value::<V>()?;
        let parts = keys
            .iter_mut()
            .zip(values.iter_mut())
            .map(|(keys, values)| Part {
                keys,
                values: Some(values),
            })
            .collect();
        self.spread(parts, streams, order, None)
    }

    /// Sorts `keys` (of the device of `stream`) on every device of `devices`: a piece of the
    /// keys is copied to each (peer copies), sorted there, and the sorted pieces are merged in
    /// rounds (module docs); the last merge writes `keys` itself, on `stream`, reading the runs
    /// where they are. The keys' own device, when it is one of `devices`, keeps a larger piece
    /// (it waits for no copy); the others get equal pieces.
    ///
    /// Queued; the host does not wait (it makes a stream on each device, and the copies'
    /// buffers, which are freed behind the merges). Later users of `keys` wait for the sort
    /// through the tracking, as for [`sort`](Self::sort).
    ///
    /// # Errors
    /// [`SortError::TooManyParts`] for no devices or more than
    /// [`merge_runs::MAX_PARTS`](ffi::merge_runs::MAX_PARTS); [`SortError::Runtime`] with
    /// [`ErrorKind::WrongDevice`](cuda_rt::ErrorKind::WrongDevice) when `stream` is not of the keys' device; as for
    /// [`sort_spread`](Self::sort_spread).
    pub fn sort_on_devices<'s, K: SortKey + DeviceCopy>(
        &self,
        stream: impl Into<StreamRef<'s>>,
        keys: &mut DeviceBuffer<K>,
        devices: &[Device],
        order: Order,
    ) -> Result<(), SortError> {
        self.on_devices::<K, u32>(stream.into(), keys, None, devices, order)
    }

    /// [`sort_on_devices`](Self::sort_on_devices) of key–value pairs.
    ///
    /// # Errors
    /// As for [`sort_on_devices`](Self::sort_on_devices) and
    /// [`sort_pairs_spread`](Self::sort_pairs_spread).
    pub fn sort_pairs_on_devices<'s, K: SortKey + DeviceCopy, V: DeviceCopy>(
        &self,
        stream: impl Into<StreamRef<'s>>,
        keys: &mut DeviceBuffer<K>,
        values: &mut DeviceBuffer<V>,
        devices: &[Device],
        order: Order,
    ) -> Result<(), SortError> {
        if keys.len() != values.len() {
            return Err(SortError::LengthMismatch {
                keys: keys.len(),
                values: values.len(),
            });
        }
        check_value::<V>()?;
        self.on_devices(stream.into(), keys, Some(values), devices, order)
    }

    fn on_devices<K: SortKey + DeviceCopy, V: DeviceCopy>(
        &self,
        stream: StreamRef<'_>,
        keys: &mut DeviceBuffer<K>,
        values: Option<&mut DeviceBuffer<V>>,
        devices: &[Device],
        order: Order,
    ) -> Result<(), SortError> {
        const WHAT: &str = "SortWorkspace::sort_on_devices";
        check_parts(devices.len())?;
        let home = keys.device();
        let stream_device = stream
            .device()
            .map_err(|e| SortError::Runtime(e.context(WHAT)))?;
        if stream_device != home {
            return Err(SortError::wrong_device(home, stream_device, WHAT));
        }
        let n = keys.len();
        if devices.len() == 1 && devices[0] == home {
            return match values {
                Some(values) => self.sort_pairs(stream, keys, values, order),
                None => self.sort(stream, keys, order),
            };
        }
        let mut all = devices.to_vec();
        all.push(home);
        enable_peer_access(&all)?;
        // A piece per device, copied there on that device's stream.
        let bounds = piece_bounds(n, devices.len(), devices.iter().position(|&d| d == home));
        let mut streams = Vec::with_capacity(devices.len());
        let mut piece_keys = Vec::with_capacity(devices.len());
        let mut piece_values = Vec::with_capacity(devices.len());
        for (i, &device) in devices.iter().enumerate() {
            let begin = bounds[i];
            let end = bounds[i + 1];
            let s = device
                .with_current(|| Stream::with_flags(StreamFlags::NON_BLOCKING))
                .and_then(|s| s)
                .map_err(|e| SortError::Runtime(e.context(WHAT)))?;
            piece_keys.push(copy_piece(&*keys, begin..end, &s, WHAT)?);
            if let Some(values) = values.as_deref() {
                piece_values.push(copy_piece(values, begin..end, &s, WHAT)?);
            }
            streams.push(s);
        }
        let parts = piece_keys
            .iter_mut()
            .zip(
                piece_values
                    .iter_mut()
                    .map(Some)
                    .chain(std::iter::repeat_with(|| None)),
            )
            .map(|(keys, values)| Part { keys, values })
            .collect();
        let out = MergeInto {
            keys,
            values,
            begin: 0,
            stream,
        };
        self.spread(parts, &streams, order, Some(out))
    }

    /// Sorts every part on its stream, then merges them in rounds; the last merge writes `out`
    /// where it is given, else the parts themselves.
    fn spread<K: SortKey + DeviceCopy, V: DeviceCopy>(
        &self,
        mut parts: Vec<Part<'_, K, V>>,
        streams: &[Stream],
        order: Order,
        mut out: Option<MergeInto<'_, '_, K, V>>,
    ) -> Result<(), SortError> {
        const WHAT: &str = "SortWorkspace::sort_spread";
        check_parts(parts.len())?;
        if streams.len() != parts.len() {
            return Err(SortError::length_mismatch(
                parts.len(),
                streams.len(),
                "sort_spread: streams",
            ));
        }
        for (part, stream) in parts.iter().zip(streams) {
            if part.keys.device() != stream.device() {
                return Err(SortError::wrong_device(
                    part.keys.device(),
                    stream.device(),
                    WHAT,
                ));
            }
            if let Some(values) = part.values.as_deref() {
                if values.len() != part.keys.len() {
                    return Err(SortError::LengthMismatch {
                        keys: part.keys.len(),
                        values: values.len(),
                    });
                }
                if values.device() != stream.device() {
                    return Err(SortError::wrong_device(
                        values.device(),
                        stream.device(),
                        WHAT,
                    ));
                }
            }
        }
        if out.is_none() {
            let devices: Vec<Device> = streams.iter().map(Stream::device).collect();
            enable_peer_access(&devices)?;
        }
        let mode = K::FORMAT.mode(order);

        // The other buffer of each part, written by the merges of odd rounds. Allocated before
        // the sorts' scratch, so that a sort repeated with the same sizes finds each block
        // where the previous call freed one of its size: an allocation that makes the pool join
        // freed blocks of other sizes costs the host about a millisecond for 513 MiB on an
        // H200, and the next device's sort is queued that much later (docs/sorting.md).
        let mut others: Vec<(DeviceBuffer<K>, Option<DeviceBuffer<V>>)> = Vec::new();
        if parts.len() > 1 {
            for (part, stream) in parts.iter().zip(streams) {
                let keys = DeviceBuffer::new_async(part.keys.len(), stream)
                    .map_err(|e| SortError::Runtime(e.context(WHAT)))?;
                let values = match part.values {
                    Some(_) => Some(
                        DeviceBuffer::new_async(part.keys.len(), stream)
                            .map_err(|e| SortError::Runtime(e.context(WHAT)))?,
                    ),
                    None => None,
                };
                others.push((keys, values));
            }
        }

        // Each part sorted on its own device.
        for (part, stream) in parts.iter_mut().zip(streams) {
            let device = stream.device();
            let sorted = device.with_current(|| match part.values.as_deref_mut() {
                Some(values) => self.sort_pairs(stream, &mut *part.keys, values, order),
                None => self.sort(stream, &mut *part.keys, order),
            });
            sorted.map_err(|e| SortError::Runtime(e.context(WHAT)))??;
        }
        if parts.len() == 1 {
            // One part: sorted where it is, or copied to where the keys go.
            if let Some(out) = out {
                let runtime = |e: cuda_rt::Error| SortError::Runtime(e.context(WHAT));
                out.keys
                    .copy_from_device_async(out.stream, &*parts[0].keys)
                    .map_err(runtime)?;
                if let (Some(o), Some(v)) = (out.values, parts[0].values.as_deref()) {
                    o.copy_from_device_async(out.stream, v).map_err(runtime)?;
                }
            }
            return Ok(());
        }

        // Rounds: runs are lists of consecutive parts, merged pairwise.
        let lens: Vec<usize> = parts.iter().map(|p| p.keys.len()).collect();
        let mut runs: Vec<Vec<usize>> = (0..parts.len()).map(|i| vec![i]).collect();
        let mut in_others = false;
        while runs.len() > 1 {
            let last_round = runs.len() == 2;
            let mut next_runs = Vec::new();
            for pair in runs.chunks(2) {
                let [x, y] = pair else {
                    // An odd run out: copied into the other buffers, unchanged.
                    for &i in &pair[0] {
                        carry(&mut parts[i], &mut others[i], in_others, &streams[i], WHAT)?;
                    }
                    next_runs.push(pair[0].clone());
                    continue;
                };
                let members: Vec<usize> = x.iter().chain(y).copied().collect();
                let begins: Vec<usize> = members
                    .iter()
                    .scan(0, |at, &j| {
                        let begin = *at;
                        *at += lens[j];
                        Some(begin)
                    })
                    .collect();
                let target = |j: usize| begins[members.iter().position(|&m| m == j).unwrap_or(0)];
                let last = out.as_mut().filter(|_| last_round);
                // The runs are read from one set of buffers and merged into the other (two
                // branches for the borrows: which set is read alternates by round).
                if in_others {
                    let a = run_of(x, |i| others_parts(&others[i]));
                    let b = run_of(y, |i| others_parts(&others[i]));
                    let into = parts
                        .iter_mut()
                        .enumerate()
                        .filter(|(j, _)| members.contains(j))
                        .map(|(j, part)| MergeInto {
                            keys: &mut *part.keys,
                            values: part.values.as_deref_mut(),
                            begin: target(j),
                            stream: streams[j].as_stream_ref(),
                        });
                    merge_pair(&a, &b, last, into, mode)?;
                } else {
                    let a = run_of(x, |i| part_parts(&parts[i]));
                    let b = run_of(y, |i| part_parts(&parts[i]));
                    let into = others
                        .iter_mut()
                        .enumerate()
                        .filter(|(j, _)| members.contains(j))
                        .map(|(j, (keys, values))| MergeInto {
                            keys,
                            values: values.as_mut(),
                            begin: target(j),
                            stream: streams[j].as_stream_ref(),
                        });
                    merge_pair(&a, &b, last, into, mode)?;
                }
                next_runs.push(members);
            }
            runs = next_runs;
            in_others = !in_others;
        }
        // The sorted keys are in the other buffers: they become the parts.
        if in_others && out.is_none() {
            for (part, (keys, values)) in parts.iter_mut().zip(others.iter_mut()) {
                std::mem::swap(part.keys, keys);
                if let (Some(a), Some(b)) = (part.values.as_deref_mut(), values.as_mut()) {
                    std::mem::swap(a, b);
                }
            }
        }
        Ok(())
    }
}

/// What copying a key over the link between two GPUs costs, as a fraction of what sorting it
/// costs: peer copies move about 390 GB/s between two H200s, the sort of 2^30 `u32` keys on
/// one H200 gets through about 85 GB/s of keys (`BENCHMARKS.md`, the sort across GPUs).
const LINK_TO_SORT_COST: f64 = 0.22;

/// The pieces of `n` keys that `m` devices sort in [`SortWorkspace::sort_on_devices`]: piece
/// `i` is `bounds[i]..bounds[i + 1]`; `home` is the index of the keys' own device among them.
///
/// The home device sorts without waiting for a copy, so it takes the larger piece that makes
/// every device finish its sort at about the same time: with `a` the cost of sorting a key and
/// `c` that of copying it to a peer, the home piece `f` of `m` devices satisfies
/// `f a = (1 - f) c + (1 - f) a / (m - 1)`. The other devices take equal pieces; without the
/// home device among them every device does.
fn piece_bounds(n: usize, m: usize, home: Option<usize>) -> Vec<usize> {
    let others = m.saturating_sub(1);
    let mut bounds = Vec::with_capacity(m + 1);
    bounds.push(0);
    let Some(home) = home.filter(|_| others > 0) else {
        let piece = n.div_ceil(m.max(1));
        bounds.extend((1..=m).map(|i| (i * piece).min(n)));
        return bounds;
    };
    let spread = 1.0 / others as f64;
    let share = (LINK_TO_SORT_COST + spread) / (1.0 + LINK_TO_SORT_COST + spread);
    // Rounded to whole keys; the rest split evenly (the first ones one longer).
    let home_len = ((n as f64 * share) as usize).min(n);
    let rest = n - home_len;
    let mut k = 0;
    let mut at = 0;
    for i in 0..m {
        at += if i == home {
            home_len
        } else {
            k += 1;
            rest * k / others - rest * (k - 1) / others
        };
        bounds.push(at);
    }
    bounds
}

/// Where a merge of two runs writes: the slice of the merge that starts at `begin` (as long as
/// `keys`), into these buffers, on `stream` (of their device). The last merge of
/// [`SortWorkspace::sort_on_devices`] writes all of it into the output; the other merges write
/// each member's slice into its buffers.
struct MergeInto<'a, 's, K: DeviceCopy, V: DeviceCopy> {
    keys: &'a mut DeviceBuffer<K>,
    values: Option<&'a mut DeviceBuffer<V>>,
    begin: usize,
    stream: StreamRef<'s>,
}

impl<K: DeviceCopy, V: DeviceCopy> MergeInto<'_, '_, K, V> {
    /// The same place, borrowed again.
    fn reborrow(&mut self) -> MergeInto<'_, '_, K, V> {
        MergeInto {
            keys: &mut *self.keys,
            values: self.values.as_deref_mut(),
            begin: self.begin,
            stream: self.stream,
        }
    }
}

/// One part of a run as the merge reads it.
type RunPart<'a, K, V> = (&'a DeviceBuffer<K>, Option<&'a DeviceBuffer<V>>);

fn part_parts<'a, K: DeviceCopy, V: DeviceCopy>(part: &'a Part<'_, K, V>) -> RunPart<'a, K, V> {
    (&*part.keys, part.values.as_deref())
}

fn others_parts<K: DeviceCopy, V: DeviceCopy>(
    other: &(DeviceBuffer<K>, Option<DeviceBuffer<V>>),
) -> RunPart<'_, K, V> {
    (&other.0, other.1.as_ref())
}

fn run_of<'a, K: DeviceCopy, V: DeviceCopy>(
    indices: &[usize],
    part: impl Fn(usize) -> RunPart<'a, K, V>,
) -> Vec<RunPart<'a, K, V>> {
    indices.iter().map(|&i| part(i)).collect()
}

/// A part of an odd run out, copied unchanged into the buffer the next round reads.
fn carry<K: DeviceCopy, V: DeviceCopy>(
    part: &mut Part<'_, K, V>,
    other: &mut (DeviceBuffer<K>, Option<DeviceBuffer<V>>),
    in_others: bool,
    stream: &Stream,
    what: &'static str,
) -> Result<(), SortError> {
    let runtime = |e: cuda_rt::Error| SortError::Runtime(e.context(what));
    if in_others {
        part.keys
            .copy_from_device_async(stream, &other.0)
            .map_err(runtime)?;
        if let (Some(v), Some(o)) = (part.values.as_deref_mut(), other.1.as_ref()) {
            v.copy_from_device_async(stream, o).map_err(runtime)?;
        }
    } else {
        other
            .0
            .copy_from_device_async(stream, &*part.keys)
            .map_err(runtime)?;
        if let (Some(o), Some(v)) = (other.1.as_mut(), part.values.as_deref()) {
            o.copy_from_device_async(stream, v).map_err(runtime)?;
        }
    }
    Ok(())
}

/// Queues `cuda_rt_kernels_merge_runs` of merge(a, b) into `into` (its slice of the merge, on
/// its stream), inside the tracking of every buffer it reads and writes.
fn queue_merge<K: SortKey + DeviceCopy, V: DeviceCopy>(
    a: &[RunPart<'_, K, V>],
    b: &[RunPart<'_, K, V>],
    into: MergeInto<'_, '_, K, V>,
    mode: u32,
) -> Result<(), SortError> {
    const WHAT: &str = "cuda_rt_kernels_merge_runs";
    let MergeInto {
        keys: out,
        values: mut out_values,
        begin,
        stream,
    } = into;
    let runtime = |e: cuda_rt::Error| SortError::Runtime(e.context("sort across devices"));
    let len = out.len();
    if len == 0 {
        return Ok(());
    }
    let device = out.device();
    let tiles = len.div_ceil(merge_runs::TILE);
    let mut cuts = DeviceBuffer::<u64>::new_async(tiles + 1, stream).map_err(runtime)?;
    let mut args = MergeArgs {
        a: sort_run(a),
        b: sort_run(b),
        out_begin: begin as u64,
        out_len: len as u64,
        key_bytes: K::FORMAT.bytes,
        value_bytes: if out_values.is_some() {
            std::mem::size_of::<V>() as u32
        } else {
            0
        },
        key_mode: mode,
        ..MergeArgs::default()
    };
    let key_sources: Vec<&DeviceBuffer<K>> = a.iter().chain(b).map(|p| p.0).collect();
    let value_sources: Vec<&DeviceBuffer<V>> = a.iter().chain(b).filter_map(|p| p.1).collect();
    let mut launch = |out_keys: *mut K, out_vals: *mut V, cut_words: *mut u64| {
        args.keys = out_keys.cast();
        args.values = out_vals.cast();
        args.cuts = cut_words.cast();
        let status = device.with_current(|| {
            // SAFETY: every pointer of `args` is a live buffer of the length given (the runs'
            // parts, the output, the cuts), ordered on `stream` and kept alive by the tracking
            // this call runs inside; the runs' parts are readable from `device` (peer access
            // was enabled), and the output overlaps none of them (other buffers).
            unsafe { ffi::cuda_rt_kernels_merge_runs(&args, stream.as_raw()) }
        });
        match status {
            Ok(status) => SortError::check(status, WHAT),
            Err(e) => Err(SortError::Runtime(e.context(WHAT))),
        }
    };
    read_all(&key_sources, stream, &mut || {
        read_all(&value_sources, stream, &mut || {
            cuts.with_ptr_mut_on(stream, |c| {
                out.with_ptr_mut_on(stream, |k| match out_values.as_deref_mut() {
                    Some(v) => v
                        .with_ptr_mut_on(stream, |v| launch(k, v, c))
                        .map_err(runtime)?,
                    None => launch(k, std::ptr::null_mut(), c),
                })
                .map_err(runtime)?
            })
            .map_err(runtime)?
        })
    })
}

/// Merges the runs `a` and `b`: into `out` where it is given (the last round of a sort with
/// its own output), else each member's slice into its buffers (`into`), every member's stream
/// first ordered after the work that wrote the runs ([`wait_for_runs`]).
fn merge_pair<'a, 's, K: SortKey + DeviceCopy, V: DeviceCopy>(
    a: &[RunPart<'_, K, V>],
    b: &[RunPart<'_, K, V>],
    out: Option<&mut MergeInto<'_, '_, K, V>>,
    into: impl Iterator<Item = MergeInto<'a, 's, K, V>>,
    mode: u32,
) -> Result<(), SortError> {
    if let Some(out) = out {
        return queue_merge(a, b, out.reborrow(), mode);
    }
    let into: Vec<MergeInto<'a, 's, K, V>> = into.collect();
    wait_for_runs(a, b, into.iter().map(|m| m.stream))?;
    for m in into {
        queue_merge(a, b, m, mode)?;
    }
    Ok(())
}

/// Orders every stream of `streams` after the work that wrote the runs `a` and `b`, before any
/// merge of theirs is queued. A reader on another stream waits for a record of the writer's
/// marker made after the write; made lazily when the first merge is queued, it would come after
/// that merge on the writer's stream (which reads its own part), and the other devices' merges
/// would wait for it: the merges of a round ran one after the other on two H200s. Waiting here
/// records the markers right behind the writes, and the merges' own reads then find that wait
/// enough (the tracker notes a reader's record apart from a writer's).
fn wait_for_runs<'s, K: DeviceCopy, V: DeviceCopy>(
    a: &[RunPart<'_, K, V>],
    b: &[RunPart<'_, K, V>],
    streams: impl Iterator<Item = StreamRef<'s>>,
) -> Result<(), SortError> {
    let keys: Vec<&DeviceBuffer<K>> = a.iter().chain(b).map(|p| p.0).collect();
    let values: Vec<&DeviceBuffer<V>> = a.iter().chain(b).filter_map(|p| p.1).collect();
    for stream in streams {
        read_all(&keys, stream, &mut || {
            read_all(&values, stream, &mut || Ok(()))
        })?;
    }
    Ok(())
}

/// Runs `f` inside the read tracking of every buffer of `sources` on `stream`.
fn read_all<T: DeviceCopy>(
    sources: &[&DeviceBuffer<T>],
    stream: StreamRef<'_>,
    f: &mut dyn FnMut() -> Result<(), SortError>,
) -> Result<(), SortError> {
    match sources.split_first() {
        None => f(),
        Some((source, rest)) => source
            .with_ptr_on(stream, |_| read_all(rest, stream, f))
            .map_err(|e| SortError::Runtime(e.context("sort across devices")))?,
    }
}

/// The C description of a run.
fn sort_run<K: DeviceCopy, V: DeviceCopy>(parts: &[RunPart<'_, K, V>]) -> SortRun {
    ffi::sort_run(parts.iter().map(|(keys, values)| {
        let values = values.map_or(std::ptr::null(), |v| v.as_raw_ptr().cast());
        (keys.as_raw_ptr().cast(), values, keys.len() as u64)
    }))
}

/// A new buffer on `stream`'s device holding `range` of `source` (a peer copy where the
/// devices differ).
fn copy_piece<T: DeviceCopy>(
    source: &DeviceBuffer<T>,
    range: std::ops::Range<usize>,
    stream: &Stream,
    what: &'static str,
) -> Result<DeviceBuffer<T>, SortError> {
    let runtime = |e: cuda_rt::Error| SortError::Runtime(e.context(what));
    let mut piece = DeviceBuffer::new_async(range.len(), stream).map_err(runtime)?;
    let view = source.slice(range).map_err(runtime)?;
    piece
        .copy_from_device_async(stream, &view)
        .map_err(runtime)?;
    Ok(piece)
}

/// Peer access between every two of `devices` (both ways), where not already enabled.
fn enable_peer_access(devices: &[Device]) -> Result<(), SortError> {
    const WHAT: &str = "sort across devices: Device::enable_peer_access";
    for &a in devices {
        for &b in devices {
            if a.has_peer_access(b) {
                continue;
            }
            match a.enable_peer_access(b) {
                Ok(()) => {}
                Err(e) if e.code() == Some(sys::cudaErrorPeerAccessAlreadyEnabled) => {}
                Err(e) => return Err(SortError::Runtime(e.context(WHAT))),
            }
        }
    }
    Ok(())
}

fn check_parts(parts: usize) -> Result<(), SortError> {
    if parts == 0 || parts > merge_runs::MAX_PARTS {
        return Err(SortError::TooManyParts {
            parts,
            max: merge_runs::MAX_PARTS,
        });
    }
    Ok(())
}

fn check_value<V>() -> Result<(), SortError> {
    match std::mem::size_of::<V>() {
        4 | 8 | 16 => Ok(()),
        bytes => Err(SortError::UnsupportedValue { bytes }),
    }
}

#[cfg(test)]
mod tests {
    use super::piece_bounds;

    #[test]
    fn pieces_cover_the_keys_once_and_the_home_device_takes_more() {
        for n in [0usize, 1, 2, 7, 1000, 1 << 20, (1 << 30) + 3] {
            for m in 1..=8 {
                for home in std::iter::once(None).chain((0..m).map(Some)) {
                    let b = piece_bounds(n, m, home);
                    assert_eq!(b.len(), m + 1);
                    assert_eq!((b[0], b[m]), (0, n), "n {n} m {m} home {home:?}");
                    assert!(b.windows(2).all(|w| w[0] <= w[1]));
                    let lens: Vec<usize> = b.windows(2).map(|w| w[1] - w[0]).collect();
                    let rest: Vec<usize> = (0..m)
                        .filter(|&i| Some(i) != home)
                        .map(|i| lens[i])
                        .collect();
                    match home {
                        Some(h) if m > 1 => {
                            // The others equal to a key, none longer than the home piece.
                            let (lo, hi) = (rest.iter().min(), rest.iter().max());
                            assert!(hi.zip(lo).is_some_and(|(h, l)| h - l <= 1), "{lens:?}");
                            assert!(rest.iter().all(|&l| l <= lens[h] + 1), "{lens:?}");
                        }
                        _ => assert!(lens.iter().all(|&l| l <= n.div_ceil(m)), "{lens:?}"),
                    }
                }
            }
        }
        // Two devices, the home one first: a little over half.
        let b = piece_bounds(1 << 30, 2, Some(0));
        let share = b[1] as f64 / (1u64 << 30) as f64;
        assert!((0.53..0.58).contains(&share), "{share}");
    }
}
