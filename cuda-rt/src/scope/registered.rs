//! Host memory registered for a scope ([`Scope::register_host`]): page-locked while the scope
//! runs, unregistered by the scope before it returns.

use super::*;

/// A host range that `Scope::register_host*` registered, unregistered by the scope's end.
pub(super) struct Registration {
    /// The base address given to `cudaHostRegister`.
    ptr: *mut c_void,
    /// The device current at registration (whose context holds the registration).
    device: i32,
}

impl<'scope, 'env> Scope<'scope, 'env> {
    /// `cudaHostRegister` of the memory of `data` (nothing for zero bytes) until this scope
    /// ends, returning the same borrow for the scope's copies, which are then truly
    /// asynchronous. Cheaper than a [`PinnedBuffer`](crate::PinnedBuffer) staging copy for
    /// memory copied once or twice; registering costs about as much as copying the memory.
    ///
    /// # Why it is sound
    /// `data` is borrowed for `'env`, so it is neither freed nor moved before [`scope`] returns;
    /// [`scope`] unregisters it (`cudaHostUnregister`) before returning, after its final wait
    /// for the work it queued, and after `cudaDeviceSynchronize` of the registration's device
    /// (of every device for [`HostRegisterFlags::PORTABLE`]), so that copies queued through an
    /// enclosing scope are finished too. This happens also when the closure fails or panics.
    /// After the scope the memory is ordinary pageable memory again.
    ///
    /// # Errors
    /// [`ErrorKind::ReadOnlyWithMutableAccess`] if `flags` contains
    /// [`HostRegisterFlags::READ_ONLY`] (use
    /// [`register_host_read_only`](Self::register_host_read_only)); errors of `cudaGetDevice`
    /// and `cudaHostRegister`: `cudaErrorHostMemoryAlreadyRegistered` (the range overlaps
    /// another registration, or page-locked memory), `cudaErrorInvalidValue`,
    /// `cudaErrorNotSupported`. Nothing is registered then. An error of unregistering at the
    /// end is `scope`'s error if it would otherwise succeed, else reported to the next
    /// synchronize.
    ///
    /// # Examples
    /// ```no_run
    /// use cuda_rt::{DeviceBuffer, HostRegisterFlags, Stream};
    /// let (a, b) = (Stream::new()?, Stream::new()?);
    /// let mut host = vec![0u32; 1 << 20];
    /// let (low, high) = (
    ///     DeviceBuffer::<u32>::zeroed(1 << 19)?,
    ///     DeviceBuffer::<u32>::zeroed(1 << 19)?,
    /// );
    /// cuda_rt::scope(|s| {
    ///     let registered = s.register_host(&mut host, HostRegisterFlags::DEFAULT)?;
    ///     let (first, second) = registered.split_at_mut(1 << 19);
    ///     s.copy_to_host_async(&a, &low, first)?;
    ///     s.copy_to_host_async(&b, &high, second)
    /// })?; // waited for and unregistered
    /// assert_eq!(host[7], 0);
    /// # Ok::<(), cuda_rt::Error>(())
    /// ```
    pub fn register_host<T: DeviceCopy>(
        &self,
        data: &'scope mut [T],
        flags: HostRegisterFlags,
    ) -> Result<&'scope mut [T]> {
        const WHAT: &str = "Scope::register_host";
        if flags.contains(HostRegisterFlags::READ_ONLY) {
            return Err(Error::new(ErrorKind::ReadOnlyWithMutableAccess, WHAT));
        }
        let bytes = std::mem::size_of_val(data);
        // SAFETY: `data` is valid for `bytes` bytes and borrowed for 'env: it stays allocated
        // and unmoved until `scope` has unregistered it (`unregister_all`, which `scope` always
        // runs).
        unsafe { self.register(data.as_mut_ptr().cast(), bytes, flags, WHAT) }?;
        Ok(data)
    }

    /// `cudaHostRegister` with `cudaHostRegisterReadOnly` added to `flags`, of the memory of
    /// `data` (nothing for zero bytes) until this scope ends, returning the same shared borrow
    /// for the scope's uploads: the device only reads it. As
    /// [`register_host`](Self::register_host) otherwise.
    ///
    /// # Errors
    /// As for [`register_host`](Self::register_host) (without the read-only refusal); also
    /// `cudaErrorNotSupported` where the device cannot register memory read-only
    /// (`cudaDevAttrHostRegisterReadOnlySupported`).
    pub fn register_host_read_only<T: DeviceCopy>(
        &self,
        data: &'scope [T],
        flags: HostRegisterFlags,
    ) -> Result<&'scope [T]> {
        const WHAT: &str = "Scope::register_host_read_only";
        let bytes = std::mem::size_of_val(data);
        let flags = flags | HostRegisterFlags::READ_ONLY;
        // SAFETY: as in `register_host`; the device only reads the memory
        // (`cudaHostRegisterReadOnly`), and registering does not change its bytes.
        unsafe { self.register(data.as_ptr().cast_mut().cast(), bytes, flags, WHAT) }?;
        Ok(data)
    }

    /// Registers `bytes` bytes at `ptr` and records them in the ledger for `unregister_all`.
    ///
    /// # Safety
    /// The range must stay valid (allocated, unmoved) until `scope` returns.
    unsafe fn register(
        &self,
        ptr: *mut c_void,
        bytes: usize,
        flags: HostRegisterFlags,
        what: &'static str,
    ) -> Result<()> {
        if bytes == 0 {
            return Ok(());
        }
        // SAFETY: cudaGetDevice has no preconditions.
        let device = unsafe { raw::get_device() }.map_err(|e| e.context(what))?;
        // SAFETY: the caller's contract: valid until `scope` returns, which unregisters it first
        // (the entry is recorded right below, before anything can panic).
        unsafe { raw::host_register(ptr, bytes, flags.bits()) }.map_err(|e| e.context(what))?;
        self.ledger
            .borrow_mut()
            .registrations
            .push(Registration { ptr, device });
        Ok(())
    }

    /// The end of the scope's registrations, run by `scope` after `synchronize_all`: unregisters each
    /// (`cudaHostUnregister`, with its device current). No work uses them any more: they were
    /// handed out borrowed for `'scope` only, so only this scope's copies can have used them,
    /// and the scope has waited for those. Returns the first error and defers the others.
    pub(super) fn unregister_all(&self) -> Result<()> {
        const WHAT: &str = "scope: unregistering host memory";
        let registrations = std::mem::take(&mut self.ledger.borrow_mut().registrations);
        if registrations.is_empty() {
            return Ok(());
        }
        let mut errors = Vec::new();
        for r in registrations {
            let unregistered = with_current(r.device, || {
                // SAFETY: registered by `register` in this device's context, unregistered once
                // (taken from the ledger); no work uses it any more: only this scope's copies
                // can have used it (it was lent for 'scope), and the scope waited for them.
                unsafe { raw::host_unregister(r.ptr) }
            });
            if let Err(e) = unregistered {
                errors.push(e.context(WHAT));
            }
        }
        let mut errors = errors.into_iter();
        let first = errors.next();
        errors.for_each(defer);
        first.map_or(Ok(()), Err)
    }
}
