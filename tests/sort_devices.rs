//! The sort across devices (`SortWorkspace::sort_spread`, `sort_on_devices` and their pairs
//! forms) against the CPU: every key type, both orders, every input distribution, parts of
//! unequal lengths (empty ones too), one to eight parts (several on one device where the
//! machine has fewer GPUs, so one GPU runs every round and the odd run out), pairs stable
//! across parts, sizes past the sort's thresholds; and its refusals. The results are read on
//! other streams than the sort's: the tracking orders them.

mod sort_common;

use cuda_rt::{Device, DeviceBuffer, DeviceMemory, ErrorKind, Stream, StreamFlags};
use cuda_rt_kernels::sort::{Order, SortError, SortWorkspace};
use sort_common::{assert_same_keys, cpu_permutation, cpu_sorted, make, Dist, TestKey};

/// The devices of this machine (at least one), or `None` after saying why the test skips.
fn devices() -> Option<Vec<Device>> {
    let gpu = cuda_rt_testing::gpu()?;
    let count = usize::try_from(gpu.device_count).unwrap_or(1).max(1);
    Some((0..count).map(|d| Device::new(d).unwrap()).collect())
}

fn stream_on(device: Device) -> Stream {
    let _current = device.set_current_scoped().unwrap();
    Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap()
}

fn upload<T: cuda_rt::DeviceCopy>(device: Device, data: &[T]) -> DeviceBuffer<T> {
    let _current = device.set_current_scoped().unwrap();
    DeviceBuffer::from_slice(data).unwrap()
}

/// Part lengths for `parts` parts of about `n` keys in all: unequal, the second one empty
/// where there are three or more.
fn lengths(parts: usize, n: usize) -> Vec<usize> {
    (0..parts)
        .map(|i| match i {
            1 if parts >= 3 => 0,
            _ => n / parts + i * 37 % 101,
        })
        .collect()
}

/// Sorts `input` cut into parts of `lens` (part `i` on device `i % devices`) with
/// `sort_spread`, and checks the concatenation against the CPU.
fn spread_case<K: TestKey>(devices: &[Device], lens: &[usize], dist: Dist, order: Order) {
    let total: usize = lens.iter().sum();
    let input: Vec<K> = make(dist, total, total as u64 ^ lens.len() as u64);
    let mut parts = Vec::new();
    let mut streams = Vec::new();
    let mut at = 0;
    for (i, &len) in lens.iter().enumerate() {
        let device = devices[i % devices.len()];
        parts.push(upload(device, &input[at..at + len]));
        streams.push(stream_on(device));
        at += len;
    }
    let workspace = SortWorkspace::new();
    workspace.sort_spread(&mut parts, &streams, order).unwrap();
    let mut got = Vec::with_capacity(total);
    for (i, part) in parts.iter().enumerate() {
        assert_eq!(part.len(), lens[i], "part {i} keeps its length");
        assert_eq!(
            part.device(),
            devices[i % devices.len()],
            "part {i} stays on its device"
        );
        got.extend(part.to_vec().unwrap());
    }
    let what = format!(
        "{} {dist:?} {order:?}, parts {lens:?} on {} device(s)",
        std::any::type_name::<K>(),
        devices.len()
    );
    assert_same_keys(&got, &cpu_sorted(&input, order), &what);
}

#[test]
fn keys_spread_over_devices_sort_as_one_array_for_every_key_type() {
    let Some(devices) = devices() else {
        return;
    };
    for parts in 1..=5 {
        let lens = lengths(parts, 50_000);
        for order in [Order::Ascending, Order::Descending] {
            spread_case::<u8>(&devices, &lens, Dist::Uniform, order);
            spread_case::<u16>(&devices, &lens, Dist::FewDistinct, order);
            spread_case::<u32>(&devices, &lens, Dist::Uniform, order);
            spread_case::<u64>(&devices, &lens, Dist::Sawtooth, order);
            spread_case::<i8>(&devices, &lens, Dist::Specials, order);
            spread_case::<i16>(&devices, &lens, Dist::Reversed, order);
            spread_case::<i32>(&devices, &lens, Dist::Specials, order);
            spread_case::<i64>(&devices, &lens, Dist::Uniform, order);
            spread_case::<f32>(&devices, &lens, Dist::Specials, order);
            spread_case::<f64>(&devices, &lens, Dist::Uniform, order);
        }
    }
    for dist in [
        Dist::Sorted,
        Dist::Reversed,
        Dist::AllEqual,
        Dist::FewDistinct,
    ] {
        spread_case::<u32>(&devices, &lengths(8, 200_000), dist, Order::Ascending);
    }
}

#[test]
fn large_spread_sorts_past_the_thresholds() {
    let Some(devices) = devices() else {
        return;
    };
    let parts = devices.len().clamp(2, 4);
    spread_case::<u32>(
        &devices,
        &vec![(1 << 24) + 3; parts],
        Dist::Uniform,
        Order::Ascending,
    );
    spread_case::<f64>(
        &devices,
        &lengths(parts, 1 << 23),
        Dist::Uniform,
        Order::Descending,
    );
}

/// Pairs whose keys repeat a lot and whose values are the keys' input positions: the values
/// after the sort are the CPU's stable permutation, across parts too.
fn spread_pairs_case<V: cuda_rt::DeviceCopy + PartialEq + std::fmt::Debug>(
    devices: &[Device],
    lens: &[usize],
    order: Order,
    value: impl Fn(usize) -> V,
) {
    let total: usize = lens.iter().sum();
    let keys: Vec<u32> = (0..total)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761) % 17)
        .collect();
    let mut key_parts = Vec::new();
    let mut value_parts = Vec::new();
    let mut streams = Vec::new();
    let mut at = 0;
    for (i, &len) in lens.iter().enumerate() {
        let device = devices[i % devices.len()];
        key_parts.push(upload(device, &keys[at..at + len]));
        let values: Vec<V> = (at..at + len).map(&value).collect();
        value_parts.push(upload(device, &values));
        streams.push(stream_on(device));
        at += len;
    }
    SortWorkspace::new()
        .sort_pairs_spread(&mut key_parts, &mut value_parts, &streams, order)
        .unwrap();
    let got_keys: Vec<u32> = key_parts.iter().flat_map(|p| p.to_vec().unwrap()).collect();
    let got_values: Vec<V> = value_parts
        .iter()
        .flat_map(|p| p.to_vec().unwrap())
        .collect();
    let permutation = cpu_permutation(&keys, order);
    let want_keys: Vec<u32> = permutation.iter().map(|&i| keys[i]).collect();
    let want_values: Vec<V> = permutation.iter().map(|&i| value(i)).collect();
    assert_eq!(got_keys, want_keys, "pairs {lens:?} {order:?}: keys");
    if let Some(i) = (0..total).find(|&i| got_values[i] != want_values[i]) {
        panic!(
            "pairs {lens:?} {order:?}: value {i} is {:?}, the stable sort's is {:?}",
            got_values[i], want_values[i]
        );
    }
}

#[test]
fn pairs_spread_over_devices_are_stable_across_parts() {
    let Some(devices) = devices() else {
        return;
    };
    for parts in [1, 2, 3, 4, 7] {
        let lens = lengths(parts, 300_000);
        for order in [Order::Ascending, Order::Descending] {
            spread_pairs_case(&devices, &lens, order, |i| i as u32);
            spread_pairs_case(&devices, &lens, order, |i| i as u64 * 3);
            spread_pairs_case(&devices, &lens, order, |i| [i as u32, 1, 2, !(i as u32)]);
        }
    }
}

/// Keys of device 0 sorted on `use_devices`: every piece copied out, sorted, merged back.
fn on_devices_case<K: TestKey>(use_devices: &[Device], n: usize, dist: Dist, order: Order) {
    let home = use_devices[0];
    let input: Vec<K> = make(dist, n, n as u64 + 11);
    let mut keys = upload(home, &input);
    let stream = stream_on(home);
    SortWorkspace::new()
        .sort_on_devices(&stream, &mut keys, use_devices, order)
        .unwrap();
    let what = format!(
        "{} {dist:?} {order:?}, {n} keys on {} device(s)",
        std::any::type_name::<K>(),
        use_devices.len()
    );
    // Read on the per-thread default stream: ordered after the last merge by the tracking.
    assert_same_keys(&keys.to_vec().unwrap(), &cpu_sorted(&input, order), &what);
}

#[test]
fn keys_of_one_device_sorted_on_several() {
    let Some(devices) = devices() else {
        return;
    };
    // Every device, and the first one three times (three parts on one GPU).
    let sets = [devices.clone(), vec![devices[0]; 3]];
    for set in &sets {
        for n in [0usize, 1, 3, 1000, (1 << 20) + 7] {
            on_devices_case::<u32>(set, n, Dist::Uniform, Order::Ascending);
        }
        on_devices_case::<f32>(set, 1 << 22, Dist::Specials, Order::Descending);
        on_devices_case::<i16>(set, 300_001, Dist::FewDistinct, Order::Ascending);
        on_devices_case::<u64>(set, (1 << 24) + 5, Dist::Uniform, Order::Descending);
    }
    // Pairs, stable.
    let home = devices[0];
    let n = (1 << 21) + 9;
    let keys_in: Vec<u8> = (0..n).map(|i| (i % 251) as u8 ^ (i / 7) as u8).collect();
    let mut keys = upload(home, &keys_in);
    let mut values = upload(home, &(0..n as u32).collect::<Vec<u32>>());
    let stream = stream_on(home);
    SortWorkspace::new()
        .sort_pairs_on_devices(&stream, &mut keys, &mut values, &devices, Order::Ascending)
        .unwrap();
    let permutation = cpu_permutation(&keys_in, Order::Ascending);
    let want: Vec<u32> = permutation.iter().map(|&i| i as u32).collect();
    assert_eq!(
        values.to_vec().unwrap(),
        want,
        "pairs on {} device(s)",
        devices.len()
    );
}

#[test]
fn refusals_queue_nothing() {
    let Some(devices) = devices() else {
        return;
    };
    let workspace = SortWorkspace::new();
    let d0 = devices[0];
    let mut none: Vec<DeviceBuffer<u32>> = Vec::new();
    assert!(matches!(
        workspace.sort_spread(&mut none, &[], Order::Ascending),
        Err(SortError::TooManyParts { parts: 0, max: 8 })
    ));
    let mut nine: Vec<DeviceBuffer<u32>> = (0..9).map(|i| upload(d0, &[i as u32; 4])).collect();
    let streams: Vec<Stream> = (0..9).map(|_| stream_on(d0)).collect();
    assert!(matches!(
        workspace.sort_spread(&mut nine, &streams, Order::Ascending),
        Err(SortError::TooManyParts { parts: 9, max: 8 })
    ));
    // Fewer streams than parts.
    match workspace.sort_spread(&mut nine[..3], &streams[..2], Order::Ascending) {
        Err(SortError::Runtime(e)) => assert!(
            matches!(
                e.kind(),
                ErrorKind::LengthMismatch {
                    expected: 3,
                    actual: 2
                }
            ),
            "{e}"
        ),
        other => panic!("fewer streams than parts: {other:?}"),
    }
    // Values of another length than their keys.
    let mut keys = vec![upload(d0, &[3u32, 1, 2])];
    let mut values = vec![upload(d0, &[1u32, 2])];
    assert!(matches!(
        workspace.sort_pairs_spread(&mut keys, &mut values, &streams[..1], Order::Ascending),
        Err(SortError::LengthMismatch { keys: 3, values: 2 })
    ));
    // Nothing was sorted by the refusals.
    assert_eq!(nine[0].to_vec().unwrap(), vec![0u32; 4]);
    assert_eq!(keys[0].to_vec().unwrap(), vec![3, 1, 2]);
    if devices.len() >= 2 {
        // A part with a stream of another device.
        let other = stream_on(devices[1]);
        match workspace.sort_spread(&mut keys, std::slice::from_ref(&other), Order::Ascending) {
            Err(SortError::Runtime(e)) => {
                assert!(
                    matches!(
                        e.kind(),
                        ErrorKind::WrongDevice {
                            memory: 0,
                            stream: 1
                        }
                    ),
                    "{e}"
                )
            }
            other => panic!("a stream of device 1 for a part of device 0: {other:?}"),
        }
        let mut home = upload(d0, &[5u32, 4]);
        match workspace.sort_on_devices(&other, &mut home, &devices, Order::Ascending) {
            Err(SortError::Runtime(e)) => {
                assert!(
                    matches!(
                        e.kind(),
                        ErrorKind::WrongDevice {
                            memory: 0,
                            stream: 1
                        }
                    ),
                    "{e}"
                )
            }
            other => panic!("sort_on_devices with a stream of device 1: {other:?}"),
        }
    }
}
