//! Registered host memory: existing host memory page-locked with `cudaHostRegister` while a
//! [`RegisteredHost`] owns it.

use crate::device::with_current;
use crate::element::DeviceCopy;
use crate::error::{defer, Error, Result};
use crate::raw;
use std::marker::PhantomData;
use std::ops::{BitOr, Deref, DerefMut};

/// Flags of [`RegisteredHost::new`] and [`Scope::register_host`](crate::Scope::register_host)
/// (`cudaHostRegister`); combine with `|`.
///
/// [`READ_ONLY`](Self::READ_ONLY) is added by the read-only forms
/// ([`RegisteredHost::new_read_only`],
/// [`Scope::register_host_read_only`](crate::Scope::register_host_read_only)), which give no
/// mutable access to the memory; the other forms refuse it.
///
/// # Examples
/// ```
/// use cuda_rt::HostRegisterFlags;
/// assert_eq!(HostRegisterFlags::DEFAULT.bits(), 0);
/// let flags = HostRegisterFlags::PORTABLE | HostRegisterFlags::READ_ONLY;
/// assert_eq!(flags.bits(), 1 | 8);
/// assert!(flags.contains(HostRegisterFlags::READ_ONLY));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct HostRegisterFlags(u32);

impl HostRegisterFlags {
    /// `cudaHostRegisterDefault`.
    pub const DEFAULT: HostRegisterFlags = HostRegisterFlags(raw::flags::HOST_REGISTER_DEFAULT);
    /// `cudaHostRegisterPortable`: page-locked for every CUDA context.
    pub const PORTABLE: HostRegisterFlags = HostRegisterFlags(raw::flags::HOST_REGISTER_PORTABLE);
    /// `cudaHostRegisterMapped`: also mapped into the device address space.
    pub const MAPPED: HostRegisterFlags = HostRegisterFlags(raw::flags::HOST_REGISTER_MAPPED);
    /// `cudaHostRegisterReadOnly`: the device only reads it. Only the read-only forms
    /// ([`RegisteredHost::new_read_only`],
    /// [`Scope::register_host_read_only`](crate::Scope::register_host_read_only)) accept it.
    pub const READ_ONLY: HostRegisterFlags = HostRegisterFlags(raw::flags::HOST_REGISTER_READ_ONLY);

    /// The `cudaHostRegister` value.
    pub const fn bits(self) -> u32 {
        self.0
    }

    /// Whether all of `other`'s flags are set.
    pub const fn contains(self, other: HostRegisterFlags) -> bool {
        self.0 & other.0 == other.0
    }
}

impl BitOr for HostRegisterFlags {
    type Output = HostRegisterFlags;
    fn bitor(self, other: HostRegisterFlags) -> HostRegisterFlags {
        HostRegisterFlags(self.0 | other.0)
    }
}

mod sealed {
    /// Keeps [`RegistrationAccess`](super::RegistrationAccess) to the two types of this module.
    pub trait Sealed {}
    impl Sealed for super::ReadWrite {}
    impl Sealed for super::ReadOnly {}
}

/// The access a [`RegisteredHost`] gives to its memory: [`ReadWrite`] or [`ReadOnly`]. Sealed:
/// no other type implements it.
pub trait RegistrationAccess: sealed::Sealed {
    /// The flags this access adds to `cudaHostRegister` (`cudaHostRegisterReadOnly` for
    /// [`ReadOnly`]).
    const FLAGS: HostRegisterFlags;
}

/// Access of a [`RegisteredHost`] made by [`RegisteredHost::new`]: the host reads and writes
/// the memory (`DerefMut`), and copies may read it (uploads) or write it (downloads).
///
/// A marker type: it has no values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReadWrite {}

/// Access of a [`RegisteredHost`] made by [`RegisteredHost::new_read_only`]
/// (`cudaHostRegisterReadOnly`): the device only reads the memory, so it hands out no mutable
/// access (no `DerefMut`): it can be the source of an upload, never the destination of a
/// download.
///
/// A marker type: it has no values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReadOnly {}

impl RegistrationAccess for ReadWrite {
    const FLAGS: HostRegisterFlags = HostRegisterFlags::DEFAULT;
}

impl RegistrationAccess for ReadOnly {
    const FLAGS: HostRegisterFlags = HostRegisterFlags::READ_ONLY;
}

/// A `Vec<T>` whose memory is page-locked with `cudaHostRegister` while this value owns it;
/// [`into_inner`](Self::into_inner) unregisters it (`cudaHostUnregister`) and gives the `Vec`
/// back, and dropping it unregisters it and frees it.
///
/// Copies from and to registered memory are truly asynchronous; like other host memory, they
/// can borrow it only inside a [`scope`](crate::scope()), which waits for them, so the memory is
/// never unregistered or freed under a copy.
///
/// # Why it owns the memory
/// Memory must not be freed while it is registered: the driver keeps the old pages locked, a
/// later allocation at the same address cannot be registered
/// (`cudaErrorHostMemoryAlreadyRegistered`), and copies from or to it would move the old pages'
/// bytes. So the `Vec` is freed only after a successful `cudaHostUnregister`. If unregistering
/// fails, or the value is dropped inside a host callback (where CUDA must not be called), or it
/// is leaked (`mem::forget`), the `Vec` is leaked with the registration: never freed while
/// registered. A registration that borrows memory instead is made inside a scope, which
/// unregisters it itself ([`Scope::register_host`](crate::Scope::register_host)).
///
/// # Access
/// `A` is [`ReadWrite`] (from [`new`](RegisteredHost::new)): it dereferences to `[T]` mutably
/// too; or [`ReadOnly`] (from [`new_read_only`](RegisteredHost::new_read_only),
/// `cudaHostRegisterReadOnly`): it dereferences to `&[T]` only.
///
/// # Thread safety
/// `Send`/`Sync` like `Vec<T>`. Unregistering selects the device that was current at
/// registration, so the value may be dropped on any thread.
///
/// # Examples
/// ```no_run
/// use cuda_rt::{DeviceBuffer, HostRegisterFlags, RegisteredHost, Stream};
/// let stream = Stream::new()?;
/// let mut device = DeviceBuffer::<u8>::new(1 << 20)?;
/// let mut registered = RegisteredHost::new(vec![7u8; 1 << 20], HostRegisterFlags::DEFAULT)?;
/// registered[1] = 8;
/// cuda_rt::scope(|s| s.copy_to_device_async(&stream, &registered, &mut device))?;
/// let data = registered.into_inner()?; // unregistered; the Vec is ours again
/// assert_eq!(data[..2], [7, 8]);
/// # Ok::<(), cuda_rt::Error>(())
/// ```
///
/// A read-only registration has no mutable access:
/// ```compile_fail
/// use cuda_rt::{HostRegisterFlags, RegisteredHost};
/// let mut registered =
///     RegisteredHost::new_read_only(vec![7u8; 4096], HostRegisterFlags::DEFAULT).unwrap();
/// registered[0] = 1; // error: cannot borrow data in dereference as mutable
/// ```
pub struct RegisteredHost<T: DeviceCopy, A: RegistrationAccess = ReadWrite> {
    /// The memory; registered at `data.as_ptr()` for `size_of_val(&data[..])` bytes when
    /// `registered`. Never reallocated (no `&mut Vec` is handed out).
    data: Vec<T>,
    /// The device current at registration (whose context holds the registration).
    device: i32,
    flags: HostRegisterFlags,
    /// Whether `cudaHostRegister` was called and not yet undone (false for zero bytes).
    registered: bool,
    _access: PhantomData<A>,
}

impl<T: DeviceCopy> RegisteredHost<T, ReadWrite> {
    /// `cudaHostRegister` of the memory of `data` (nothing for zero bytes), taking ownership of
    /// it; the host may read and write it.
    ///
    /// # Errors
    /// [`ErrorKind::ReadOnlyWithMutableAccess`](crate::ErrorKind::ReadOnlyWithMutableAccess) if
    /// `flags` contains [`HostRegisterFlags::READ_ONLY`] (use
    /// [`new_read_only`](RegisteredHost::new_read_only)); errors of `cudaGetDevice` and
    /// `cudaHostRegister`: `cudaErrorHostMemoryAlreadyRegistered` (overlaps another
    /// registration), `cudaErrorInvalidValue`, `cudaErrorNotSupported`. The error hands `data`
    /// back ([`RegisterError::into_data`]).
    pub fn new(
        data: Vec<T>,
        flags: HostRegisterFlags,
    ) -> Result<RegisteredHost<T, ReadWrite>, RegisterError<T>> {
        const WHAT: &str = "RegisteredHost::new";
        if flags.contains(HostRegisterFlags::READ_ONLY) {
            let error = Error::new(crate::ErrorKind::ReadOnlyWithMutableAccess, WHAT);
            return Err(RegisterError { error, data });
        }
        Self::register(data, flags, WHAT)
    }
}

impl<T: DeviceCopy> RegisteredHost<T, ReadOnly> {
    /// `cudaHostRegister` with `cudaHostRegisterReadOnly` added to `flags`, of the memory of
    /// `data` (nothing for zero bytes), taking ownership of it; the device only reads it, and
    /// the host gets no mutable access until [`into_inner`](RegisteredHost::into_inner).
    ///
    /// # Errors
    /// As for [`new`](RegisteredHost::new) (without the read-only refusal); also
    /// `cudaErrorNotSupported` where the device cannot register memory read-only
    /// (`cudaDevAttrHostRegisterReadOnlySupported`). The error hands `data` back.
    pub fn new_read_only(
        data: Vec<T>,
        flags: HostRegisterFlags,
    ) -> Result<RegisteredHost<T, ReadOnly>, RegisterError<T>> {
        Self::register(
            data,
            flags | ReadOnly::FLAGS,
            "RegisteredHost::new_read_only",
        )
    }
}

impl<T: DeviceCopy, A: RegistrationAccess> RegisteredHost<T, A> {
    /// `cudaHostGetDevicePointer`: the device address of this memory when it was registered
    /// with [`HostRegisterFlags::MAPPED`] (with unified addressing, the host address itself).
    /// Kernels that use it reach host memory over the bus. It is a raw pointer: using it from a
    /// kernel is `unsafe`, and the caller must keep the registration alive, and the host away
    /// from the bytes a kernel writes, until such kernels have finished.
    ///
    /// # Errors
    /// `cudaErrorInvalidValue` if the memory is not mapped; nothing is mapped for an empty
    /// registration (`cudaErrorInvalidValue` too).
    pub fn mapped_device_ptr(&self) -> Result<*const T> {
        const WHAT: &str = "RegisteredHost::mapped_device_ptr";
        if !self.registered {
            return Err(Error::cuda(raw::status::INVALID_VALUE, WHAT));
        }
        let host = self.data.as_ptr().cast_mut().cast();
        // SAFETY: the registered range starts at `host`; CUDA checks that it is mapped and
        // writes nothing through it.
        with_current(self.device, || unsafe {
            raw::host_get_device_pointer(host)
        })
        .map(|p| p.cast_const().cast::<T>())
        .map_err(|e| e.context(WHAT))
    }

    fn register(
        data: Vec<T>,
        flags: HostRegisterFlags,
        what: &'static str,
    ) -> Result<RegisteredHost<T, A>, RegisterError<T>> {
        // SAFETY: cudaGetDevice has no preconditions.
        let device = match unsafe { raw::get_device() } {
            Ok(device) => device,
            Err(e) => {
                let error = e.context(what);
                return Err(RegisterError { error, data });
            }
        };
        let bytes = std::mem::size_of_val(&data[..]);
        if bytes > 0 {
            // SAFETY: the Vec's buffer is valid for `bytes` bytes; the RegisteredHost built
            // below owns it and frees it only after `cudaHostUnregister` succeeded (it leaks it
            // otherwise), and never reallocates it, so it stays valid until unregistered.
            let registered =
                unsafe { raw::host_register(data.as_ptr().cast_mut().cast(), bytes, flags.bits()) };
            if let Err(e) = registered {
                let error = e.context(what);
                return Err(RegisterError { error, data });
            }
        }
        Ok(RegisteredHost {
            data,
            device,
            flags,
            registered: bytes > 0,
            _access: PhantomData,
        })
    }

    /// The flags it was registered with (with [`HostRegisterFlags::READ_ONLY`] for
    /// [`ReadOnly`]).
    pub fn flags(&self) -> HostRegisterFlags {
        self.flags
    }

    /// Unregisters the memory (`cudaHostUnregister`, with the device of the registration
    /// current) and gives the `Vec` back, unchanged.
    ///
    /// # Errors
    /// An error of `cudaHostUnregister` (or of selecting the device); the `Vec` is then leaked:
    /// memory that may still be registered is never freed.
    pub fn into_inner(mut self) -> Result<Vec<T>> {
        let data = std::mem::take(&mut self.data);
        let registered = std::mem::replace(&mut self.registered, false);
        let device = self.device;
        // Drops an empty, unregistered value: no CUDA call.
        drop(self);
        if registered {
            if let Err(e) = unregister(data.as_ptr(), device) {
                std::mem::forget(data);
                return Err(e.context("RegisteredHost::into_inner"));
            }
        }
        Ok(data)
    }

    /// Unregisters the memory and frees it: [`into_inner`](Self::into_inner) dropping the `Vec`,
    /// returning the error that `Drop` would report to the next synchronize.
    ///
    /// # Errors
    /// As for [`into_inner`](Self::into_inner) (the memory is then leaked).
    pub fn close(self) -> Result<()> {
        self.into_inner()
            .map(drop)
            .map_err(|e| e.context("RegisteredHost::close"))
    }
}

/// `cudaHostUnregister` of the registration at `ptr`, with `device` current.
fn unregister<T>(ptr: *const T, device: i32) -> Result<()> {
    with_current(device, || {
        // SAFETY: `ptr` was registered by `RegisteredHost::register` in `device`'s context and
        // is unregistered once (the caller clears `registered` or is `Drop`); no queued copy
        // uses it: copies borrow the value only inside a scope, which has waited for them, and
        // the caller owns the value.
        unsafe { raw::host_unregister(ptr.cast_mut().cast()) }
    })
}

impl<T: DeviceCopy, A: RegistrationAccess> Deref for RegisteredHost<T, A> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        &self.data
    }
}

impl<T: DeviceCopy> DerefMut for RegisteredHost<T, ReadWrite> {
    fn deref_mut(&mut self) -> &mut [T] {
        &mut self.data
    }
}

impl<T: DeviceCopy, A: RegistrationAccess> std::fmt::Debug for RegisteredHost<T, A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegisteredHost")
            .field("ptr", &self.data.as_ptr())
            .field("len", &self.data.len())
            .field("device", &self.device)
            .field("flags", &self.flags)
            .field("registered", &self.registered)
            .finish()
    }
}

impl<T: DeviceCopy, A: RegistrationAccess> Drop for RegisteredHost<T, A> {
    fn drop(&mut self) {
        if !self.registered {
            return; // the Vec is dropped with the fields
        }
        let data = std::mem::take(&mut self.data);
        if crate::error::leak_if_in_callback("RegisteredHost::drop") {
            // CUDA must not be called here: the memory stays registered, so it is never freed.
            std::mem::forget(data);
            return;
        }
        if crate::context::capture_restricts_thread() {
            // Unregistered (and freed) once the capture that restricts the thread has ended.
            // Only the allocation travels: `T` is `Copy`, so no value of it is dropped or read
            // on the thread that ends the capture.
            let mut data = std::mem::ManuallyDrop::new(data);
            let (ptr, len, capacity) = (data.as_mut_ptr() as usize, data.len(), data.capacity());
            let device = self.device;
            crate::context::after_capture(Box::new(move || {
                // SAFETY: the parts of the Vec taken above, rebuilt once; its elements are
                // `Copy` (no drop glue) and are not read.
                let data = unsafe { Vec::from_raw_parts(ptr as *mut T, len, capacity) };
                match unregister(data.as_ptr(), device) {
                    Ok(()) => drop(data),
                    Err(e) => {
                        defer(e.context("RegisteredHost::drop"));
                        std::mem::forget(data);
                    }
                }
            }));
            return;
        }
        match unregister(data.as_ptr(), self.device) {
            Ok(()) => drop(data),
            Err(e) => {
                defer(e.context("RegisteredHost::drop"));
                std::mem::forget(data);
            }
        }
    }
}

/// The error of [`RegisteredHost::new`] and [`RegisteredHost::new_read_only`]: what went wrong,
/// and the `Vec` that was not registered, handed back.
///
/// `?` converts it into an [`Error`] (dropping the `Vec`).
///
/// # Examples
/// ```no_run
/// use cuda_rt::{ErrorKind, HostRegisterFlags, RegisteredHost};
/// let refused = RegisteredHost::new(vec![1u32; 1024], HostRegisterFlags::READ_ONLY).unwrap_err();
/// assert_eq!(refused.error().kind(), ErrorKind::ReadOnlyWithMutableAccess);
/// let data = refused.into_data();
/// let registered = RegisteredHost::new_read_only(data, HostRegisterFlags::DEFAULT)?;
/// # Ok::<(), cuda_rt::Error>(())
/// ```
pub struct RegisterError<T> {
    error: Error,
    data: Vec<T>,
}

impl<T> RegisterError<T> {
    /// What went wrong.
    pub fn error(&self) -> Error {
        self.error
    }

    /// The `Vec` that was not registered.
    pub fn into_data(self) -> Vec<T> {
        self.data
    }

    /// The error and the `Vec` that was not registered.
    pub fn into_parts(self) -> (Error, Vec<T>) {
        (self.error, self.data)
    }
}

impl<T> std::fmt::Debug for RegisterError<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegisterError")
            .field("error", &self.error)
            .field("len", &self.data.len())
            .finish()
    }
}

impl<T> std::fmt::Display for RegisterError<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(&self.error, f)
    }
}

/// `Display` shows the [`Error`] itself, so `source` is `None`.
impl<T> std::error::Error for RegisterError<T> {}

impl<T> From<RegisterError<T>> for Error {
    fn from(e: RegisterError<T>) -> Error {
        e.error
    }
}
