//! Host-memory registration (`cudaHostRegister`): owned registrations ([`RegisteredHost`]) that
//! never free memory while it is registered, read-only registrations, and registrations that a
//! scope makes and undoes itself. Each GPU test skips loudly without a GPU; the refusals that
//! need no CUDA call run everywhere.

use cuda_rt::prelude::*;
use cuda_rt::{ErrorKind, HostRegisterFlags, ReadOnly, RegisterError, RegisteredHost};
use cuda_rt_sys as sys;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Mutex;

/// Tests run one at a time: deferred errors are reported to the next synchronize, and some
/// tests make them on purpose.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// 64 MiB of `u32`.
const BIG: usize = 16 << 20;

/// A pattern that differs from one buffer to the next (`seed`) and along the buffer.
fn pattern(len: usize, seed: u32) -> Vec<u32> {
    (0..len as u32)
        .map(|i| i.wrapping_mul(2_654_435_761).wrapping_add(seed))
        .collect()
}

/// `cudaPointerGetAttributes(...).type` of a host address: `cudaMemoryTypeHost` while
/// registered, `cudaMemoryTypeUnregistered` otherwise.
fn host_memory_type(address: *const u32) -> u32 {
    // SAFETY: cudaPointerAttributes is plain data; all-zero is a valid value.
    let mut attributes: sys::cudaPointerAttributes = unsafe { std::mem::zeroed() };
    // SAFETY: CUDA writes one struct through a valid pointer; the address is only looked up.
    let status = unsafe { sys::cudaPointerGetAttributes(&mut attributes, address.cast()) };
    assert_eq!(status, sys::cudaSuccess, "cudaPointerGetAttributes");
    attributes.type_
}

/// Uploads `source` and downloads the result into `destination`, both registered, through one
/// stream in a scope.
fn round_trip(
    stream: &Stream,
    source: &RegisteredHost<u32>,
    destination: &mut RegisteredHost<u32>,
) -> cuda_rt::Result<()> {
    let mut device = DeviceBuffer::<u32>::new(source.len())?;
    cuda_rt::scope(|s| {
        s.copy_to_device_async(stream, source, &mut device)?;
        s.copy_to_host_async(stream, &device, destination)
    })
}

/// Whether `e` says the memory is registered already (CUDA 13.0 reports some overlapping
/// ranges as invalid values).
fn is_already_registered(e: &cuda_rt::Error) -> bool {
    [
        "cudaErrorHostMemoryAlreadyRegistered",
        "cudaErrorInvalidValue",
    ]
    .contains(&e.name())
}

#[test]
fn a_forgotten_registration_leaks_its_memory_and_fresh_vectors_register_and_copy_right() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let stream = Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap();
    let forgotten = RegisteredHost::new(pattern(BIG, 1), HostRegisterFlags::DEFAULT).unwrap();
    let forgotten_address = forgotten.as_ptr();
    std::mem::forget(forgotten);
    // The Vec was leaked with the registration: its memory is never handed out again.
    assert_eq!(host_memory_type(forgotten_address), sys::cudaMemoryTypeHost);

    let expected = pattern(BIG, 2);
    let source = RegisteredHost::new(expected.clone(), HostRegisterFlags::DEFAULT)
        .expect("a fresh Vec registers after a forgotten registration");
    let mut destination = RegisteredHost::new(vec![0u32; BIG], HostRegisterFlags::DEFAULT)
        .expect("a second fresh Vec registers");
    assert_ne!(source.as_ptr(), forgotten_address);
    assert_ne!(destination.as_ptr(), forgotten_address);
    round_trip(&stream, &source, &mut destination).unwrap();
    assert!(
        destination[..] == expected[..],
        "the download differs from the CPU's data"
    );
    assert!(source.into_inner().unwrap() == expected);
    assert!(destination.into_inner().unwrap() == expected);
    stream.synchronize().unwrap();
}

#[test]
fn a_registration_dropped_in_a_host_callback_is_leaked_and_reported() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    while cuda_rt::take_deferred_error().is_some() {}
    let stream = Stream::new().unwrap();
    let registered = RegisteredHost::new(pattern(1 << 20, 3), HostRegisterFlags::DEFAULT).unwrap();
    let address = registered.as_ptr();
    stream.launch_host_fn(move || drop(registered)).unwrap();
    let e = stream.synchronize().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LeakedInCallback, "{e}");
    stream.synchronize().unwrap();
    // Leaked: still registered, never freed.
    assert_eq!(host_memory_type(address), sys::cudaMemoryTypeHost);

    // New registrations still work.
    let expected = pattern(BIG, 4);
    let source = RegisteredHost::new(expected.clone(), HostRegisterFlags::DEFAULT).unwrap();
    let mut destination =
        RegisteredHost::new(vec![0u32; BIG], HostRegisterFlags::PORTABLE).unwrap();
    round_trip(&stream, &source, &mut destination).unwrap();
    assert!(destination.into_inner().unwrap() == expected);
    source.close().unwrap();
    stream.synchronize().unwrap();
}

#[test]
fn into_inner_gives_the_data_back_unchanged_and_it_registers_again() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let expected = pattern(BIG, 5);
    let registered = RegisteredHost::new(expected.clone(), HostRegisterFlags::DEFAULT).unwrap();
    let address = registered.as_ptr();
    assert_eq!(registered.flags(), HostRegisterFlags::DEFAULT);
    assert_eq!(host_memory_type(address), sys::cudaMemoryTypeHost);
    let data = registered.into_inner().unwrap();
    assert_eq!(data.as_ptr(), address, "the same allocation comes back");
    assert!(data == expected);
    assert_eq!(host_memory_type(address), sys::cudaMemoryTypeUnregistered);

    // The same memory registers again, and writes through the registration stay.
    let mut again = RegisteredHost::new(data, HostRegisterFlags::PORTABLE).unwrap();
    assert_eq!(again.as_ptr(), address);
    again[7] = 7;
    let data = again.into_inner().unwrap();
    assert_eq!(data[7], 7);
    assert_eq!(data[8], expected[8]);

    // Empty vectors register nothing, with or without capacity.
    for empty in [Vec::<u32>::new(), Vec::with_capacity(1000)] {
        let capacity = empty.capacity();
        let registered = RegisteredHost::new(empty, HostRegisterFlags::DEFAULT).unwrap();
        assert!(registered.is_empty());
        let back = registered.into_inner().unwrap();
        assert!(back.is_empty());
        assert_eq!(back.capacity(), capacity);
    }
    RegisteredHost::new(Vec::<u8>::new(), HostRegisterFlags::DEFAULT)
        .unwrap()
        .close()
        .unwrap();
    drop(RegisteredHost::new_read_only(Vec::<u8>::new(), HostRegisterFlags::DEFAULT).unwrap());
    assert!(cuda_rt::take_deferred_error().is_none());
}

/// `?` turns a [`RegisterError`] into a [`cuda_rt::Error`].
fn register_with_question_mark(data: Vec<u32>) -> cuda_rt::Result<RegisteredHost<u32>> {
    Ok(RegisteredHost::new(data, HostRegisterFlags::READ_ONLY)?)
}

/// CPU-only: the refusal comes before any CUDA call.
#[test]
fn new_refuses_read_only_and_hands_the_vec_back() {
    let data = pattern(4096, 6);
    for flags in [
        HostRegisterFlags::READ_ONLY,
        HostRegisterFlags::PORTABLE | HostRegisterFlags::READ_ONLY,
    ] {
        let refused: RegisterError<u32> = RegisteredHost::new(data.clone(), flags).unwrap_err();
        assert_eq!(refused.error().kind(), ErrorKind::ReadOnlyWithMutableAccess);
        assert_eq!(refused.error().call(), "RegisteredHost::new");
        let text = refused.to_string();
        assert!(text.contains("new_read_only"), "{text}");
        assert!(format!("{refused:?}").contains("len: 4096"));
        let (error, back) = refused.into_parts();
        assert_eq!(error.kind(), ErrorKind::ReadOnlyWithMutableAccess);
        assert_eq!(back, data);
    }
    let e = register_with_question_mark(data.clone()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ReadOnlyWithMutableAccess);
    let boxed: Box<dyn std::error::Error + Send + Sync> =
        Box::new(RegisteredHost::new(data, HostRegisterFlags::READ_ONLY).unwrap_err());
    assert!(boxed.to_string().contains("READ_ONLY"));

    // The scoped form refuses it too, and the scope returns the refusal.
    let mut memory = vec![0u32; 16];
    let e = cuda_rt::scope(|s| {
        s.register_host(&mut memory, HostRegisterFlags::READ_ONLY)
            .map(drop)
    })
    .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ReadOnlyWithMutableAccess);
    assert_eq!(e.call(), "Scope::register_host");
}

/// Registers `data` read-only, or says loudly why the device cannot.
fn read_only_or_skip(data: Vec<u32>) -> Option<RegisteredHost<u32, ReadOnly>> {
    match RegisteredHost::new_read_only(data, HostRegisterFlags::DEFAULT) {
        Ok(registered) => Some(registered),
        Err(e) if e.error().name() == "cudaErrorNotSupported" => {
            println!("skipped read-only registration: the device cannot ({e})");
            None
        }
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn a_read_only_registration_is_an_upload_source() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let stream = Stream::new().unwrap();
    let expected = pattern(BIG, 7);
    let Some(registered) = read_only_or_skip(expected.clone()) else {
        return;
    };
    assert!(registered.flags().contains(HostRegisterFlags::READ_ONLY));
    assert_eq!(
        host_memory_type(registered.as_ptr()),
        sys::cudaMemoryTypeHost
    );
    let mut device = DeviceBuffer::<u32>::new(BIG).unwrap();
    cuda_rt::scope(|s| s.copy_to_device_async(&stream, &registered, &mut device)).unwrap();
    assert!(device.to_vec().unwrap() == expected);
    assert!(registered.into_inner().unwrap() == expected);

    // The scoped read-only form, as an upload source beside a registered download.
    let mut downloaded = vec![0u32; BIG];
    let mut second = DeviceBuffer::<u32>::new(BIG).unwrap();
    cuda_rt::scope(|s| {
        let source = s.register_host_read_only(&expected, HostRegisterFlags::PORTABLE)?;
        let destination = s.register_host(&mut downloaded, HostRegisterFlags::DEFAULT)?;
        s.copy_to_device_async(&stream, source, &mut second)?;
        s.copy_to_host_async(&stream, &second, destination)
    })
    .unwrap();
    assert!(downloaded == expected);
    assert_eq!(
        host_memory_type(expected.as_ptr()),
        sys::cudaMemoryTypeUnregistered
    );
    assert_eq!(
        host_memory_type(downloaded.as_ptr()),
        sys::cudaMemoryTypeUnregistered
    );
}

/// The first index of `data` at an address aligned to 64 KiB (a page boundary on every page
/// size up to that), at or after `from`.
fn page_aligned_index(data: &[u32], from: usize) -> usize {
    let address = data[from..].as_ptr() as usize;
    from + (address.next_multiple_of(1 << 16) - address) / std::mem::size_of::<u32>()
}

#[test]
fn scoped_registrations_copy_on_two_streams_and_are_unregistered_at_the_end() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let (a, b) = (
        Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap(),
        Stream::with_flags(StreamFlags::NON_BLOCKING).unwrap(),
    );
    let expected = pattern(BIG, 8);
    let mut input = expected.clone();
    let mut output = vec![0u32; BIG];
    // Split before registering (each half registered on its own, at a page boundary) for the
    // input; split after registering for the output.
    let half = page_aligned_index(&input, BIG / 2);
    let mut low = DeviceBuffer::<u32>::new(half).unwrap();
    let mut high = DeviceBuffer::<u32>::new(BIG - half).unwrap();
    let (input_low, input_high) = input.split_at_mut(half);
    cuda_rt::scope(|s| {
        let input_low = s.register_host(input_low, HostRegisterFlags::DEFAULT)?;
        let input_high = s.register_host(input_high, HostRegisterFlags::PORTABLE)?;
        let output = s.register_host(&mut output, HostRegisterFlags::DEFAULT)?;
        let (output_low, output_high) = output.split_at_mut(half);
        s.copy_to_device_async(&a, input_low, &mut low)?;
        s.copy_to_device_async(&b, input_high, &mut high)?;
        s.copy_to_host_async(&a, &low, output_low)?;
        s.copy_to_host_async(&b, &high, output_high)
    })
    .unwrap();
    assert!(
        output == expected,
        "the copies through scoped registrations differ"
    );
    for address in [input.as_ptr(), input[half..].as_ptr(), output.as_ptr()] {
        assert_eq!(host_memory_type(address), sys::cudaMemoryTypeUnregistered);
    }
    // Unregistered, so registrable again, owned this time.
    let input = RegisteredHost::new(input, HostRegisterFlags::DEFAULT).unwrap();
    let output = RegisteredHost::new(output, HostRegisterFlags::DEFAULT).unwrap();
    assert!(input.into_inner().unwrap() == expected);
    output.close().unwrap();

    // A panicking closure: the scope still unregisters before the panic goes on.
    let mut memory = pattern(1 << 20, 9);
    let mut small = DeviceBuffer::<u32>::new(1 << 20).unwrap();
    let panicked = catch_unwind(AssertUnwindSafe(|| {
        cuda_rt::scope(|s| -> cuda_rt::Result<()> {
            let registered = s.register_host(&mut memory, HostRegisterFlags::DEFAULT)?;
            s.copy_to_device_async(&a, registered, &mut small)?;
            panic!("after registering")
        })
    }));
    assert!(panicked.is_err());
    assert_eq!(
        host_memory_type(memory.as_ptr()),
        sys::cudaMemoryTypeUnregistered
    );
    RegisteredHost::new(memory, HostRegisterFlags::DEFAULT)
        .unwrap()
        .close()
        .unwrap();
    a.synchronize().unwrap();
    b.synchronize().unwrap();
}

#[test]
fn a_scope_registering_registered_memory_fails_and_still_unregisters_the_others() {
    let Some(_gpu) = cuda_rt_testing::gpu() else {
        return;
    };
    let _serial = serial();
    let stream = Stream::new().unwrap();
    let mut first = pattern(1 << 20, 10);
    let mut owned = RegisteredHost::new(pattern(1 << 20, 11), HostRegisterFlags::DEFAULT).unwrap();
    let mut device = DeviceBuffer::<u32>::new(1 << 20).unwrap();
    let e = cuda_rt::scope(|s| -> cuda_rt::Result<()> {
        let first = s.register_host(&mut first, HostRegisterFlags::DEFAULT)?;
        s.copy_to_device_async(&stream, first, &mut device)?;
        // Registered already (owned by `owned`): refused with CUDA's error.
        s.register_host(&mut owned[..], HostRegisterFlags::DEFAULT)?;
        unreachable!("registering registered memory succeeded")
    })
    .unwrap_err();
    assert!(is_already_registered(&e), "{e}");
    assert_eq!(
        (e.call(), e.what()),
        ("cudaHostRegister", "Scope::register_host")
    );
    // The scope unregistered `first`, and left `owned` registered and working.
    assert_eq!(
        host_memory_type(first.as_ptr()),
        sys::cudaMemoryTypeUnregistered
    );
    assert_eq!(host_memory_type(owned.as_ptr()), sys::cudaMemoryTypeHost);
    assert!(device.to_vec().unwrap() == first);
    cuda_rt::scope(|s| s.copy_to_host_async(&stream, &device, &mut owned)).unwrap();
    assert!(owned.into_inner().unwrap() == first);
    RegisteredHost::new(first, HostRegisterFlags::DEFAULT)
        .unwrap()
        .close()
        .unwrap();
    stream.synchronize().unwrap();
}
