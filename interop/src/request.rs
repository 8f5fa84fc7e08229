//! The arguments of a sort as C passes them (a key type and an order as numbers, untyped
//! device pointers, a value size) and their checks: everything the C ABI can reject before
//! calling the sort is rejected here, with a message that names the argument.

use crate::failure::{check, Failure};
use cuda_rt_sort::raw::{DeviceLen, RawSortBuffers};
use cuda_rt_sort::{KeyFormat, KeyKind, Order};
use cuda_rt_sys as sys;
use std::ffi::c_void;

/// `cuda_rt_key_type`: the type of the keys of a sort, one of the `CUDA_RT_KEY_*` values.
/// Zero is no key type, so that a zero-initialized argument is rejected.
pub type KeyType = u32;

/// Keys are `uint8_t`.
pub const CUDA_RT_KEY_U8: KeyType = 1;
/// Keys are `uint16_t`.
pub const CUDA_RT_KEY_U16: KeyType = 2;
/// Keys are `uint32_t`.
pub const CUDA_RT_KEY_U32: KeyType = 3;
/// Keys are `uint64_t`.
pub const CUDA_RT_KEY_U64: KeyType = 4;
/// Keys are `int8_t`.
pub const CUDA_RT_KEY_I8: KeyType = 5;
/// Keys are `int16_t`.
pub const CUDA_RT_KEY_I16: KeyType = 6;
/// Keys are `int32_t`.
pub const CUDA_RT_KEY_I32: KeyType = 7;
/// Keys are `int64_t`.
pub const CUDA_RT_KEY_I64: KeyType = 8;
/// Keys are `float`, sorted in IEEE 754 total order:
/// -NaN < -inf < ... < -0.0 < +0.0 < ... < +inf < +NaN.
pub const CUDA_RT_KEY_F32: KeyType = 9;
/// Keys are `double`, in IEEE 754 total order as for `CUDA_RT_KEY_F32`.
pub const CUDA_RT_KEY_F64: KeyType = 10;

/// `cuda_rt_order`: the order of a sort, `CUDA_RT_ORDER_ASCENDING` or
/// `CUDA_RT_ORDER_DESCENDING`. Both are stable: equal keys keep their input order.
pub type SortOrder = u32;

/// Smallest key first.
pub const CUDA_RT_ORDER_ASCENDING: SortOrder = 0;
/// Largest key first.
pub const CUDA_RT_ORDER_DESCENDING: SortOrder = 1;

/// The key format of a `CUDA_RT_KEY_*` value, `None` for any other number.
pub fn key_format(key_type: KeyType) -> Option<KeyFormat> {
    let (bytes, kind) = match key_type {
        CUDA_RT_KEY_U8 => (1, KeyKind::Unsigned),
        CUDA_RT_KEY_U16 => (2, KeyKind::Unsigned),
        CUDA_RT_KEY_U32 => (4, KeyKind::Unsigned),
        CUDA_RT_KEY_U64 => (8, KeyKind::Unsigned),
        CUDA_RT_KEY_I8 => (1, KeyKind::Signed),
        CUDA_RT_KEY_I16 => (2, KeyKind::Signed),
        CUDA_RT_KEY_I32 => (4, KeyKind::Signed),
        CUDA_RT_KEY_I64 => (8, KeyKind::Signed),
        CUDA_RT_KEY_F32 => (4, KeyKind::Float),
        CUDA_RT_KEY_F64 => (8, KeyKind::Float),
        _ => return None,
    };
    Some(KeyFormat { bytes, kind })
}

/// The order of a `CUDA_RT_ORDER_*` value, `None` for any other number.
pub fn order(order: SortOrder) -> Option<Order> {
    match order {
        CUDA_RT_ORDER_ASCENDING => Some(Order::Ascending),
        CUDA_RT_ORDER_DESCENDING => Some(Order::Descending),
        _ => None,
    }
}

/// The key format of `key_type`, with `value_bytes` checked: the element sizes of a sort.
///
/// # Errors
/// [`Failure::InvalidArgument`] for an unknown key type or a value size other than 0, 4, 8, 16.
pub fn element_sizes(key_type: KeyType, value_bytes: usize) -> Result<KeyFormat, Failure> {
    let key = key_format(key_type).ok_or(Failure::InvalidArgument(
        "key_type is not a CUDA_RT_KEY_* value",
    ))?;
    if ![0, 4, 8, 16].contains(&value_bytes) {
        return Err(Failure::InvalidArgument(
            "value_bytes is not 0 (keys only), 4, 8 or 16",
        ));
    }
    Ok(key)
}

/// One sort as the C caller describes it, before any check.
#[derive(Debug, Clone, Copy)]
pub struct SortRequest {
    /// `n` keys (device memory), sorted in place.
    pub keys: *mut c_void,
    /// `n` values of `value_bytes` each (device memory), permuted with the keys; null for keys
    /// only.
    pub values: *mut c_void,
    /// Number of keys (and values).
    pub n: usize,
    /// A `CUDA_RT_KEY_*` value.
    pub key_type: KeyType,
    /// 0 (keys only), 4, 8 or 16.
    pub value_bytes: usize,
    /// A `CUDA_RT_ORDER_*` value.
    pub order: SortOrder,
}

impl SortRequest {
    /// The checked request as the sort's raw layer takes it: in-place buffers and an order.
    /// `Ok(None)` for `n == 0`: there is nothing to sort (the pointers are then not looked at).
    ///
    /// Checks, each an [`Failure::InvalidArgument`] naming what is wrong: a known key type,
    /// order and value size; non-null keys, and values exactly when `value_bytes > 0`; sizes
    /// in bytes that fit the address space; keys aligned to the key size and values to the
    /// value size; key and value ranges that do not overlap; and, last, the only checks that
    /// call CUDA (`cudaPointerGetAttributes`): both pointers are device or managed memory that
    /// CUDA knows, device memory of the current device (`current_device`, asked for only then).
    ///
    /// # Errors
    /// As listed above ([`Failure::Pointer`] for the memory checks); the failure of
    /// `current_device` or of `cudaPointerGetAttributes`.
    pub fn check(
        &self,
        current_device: impl FnOnce() -> Result<i32, Failure>,
    ) -> Result<Option<(RawSortBuffers, Order)>, Failure> {
        let (key, order) = self.formats()?;
        if self.n == 0 {
            return Ok(None);
        }
        if self.keys.is_null() {
            return Err(Failure::InvalidArgument("keys is null"));
        }
        if self.value_bytes > 0 && self.values.is_null() {
            return Err(Failure::InvalidArgument(
                "values is null but value_bytes is not 0: pass the values, or 0 for keys only",
            ));
        }
        let key_bytes = key.bytes as usize;
        let keys_len = span(self.keys, self.n, key_bytes)?;
        if self.keys as usize % key_bytes != 0 {
            return Err(Failure::InvalidArgument(
                "keys is not aligned to the size of its key type",
            ));
        }
        if self.value_bytes > 0 {
            let values_len = span(self.values, self.n, self.value_bytes)?;
            if self.values as usize % self.value_bytes != 0 {
                return Err(Failure::InvalidArgument(
                    "values is not aligned to value_bytes",
                ));
            }
            let (k, v) = (self.keys as usize, self.values as usize);
            if k < v + values_len && v < k + keys_len {
                return Err(Failure::InvalidArgument("the keys and the values overlap"));
            }
        }
        // Last: the only checks that call CUDA.
        let current_device = current_device()?;
        device_memory(self.keys, current_device, "keys")?;
        if self.value_bytes > 0 {
            device_memory(self.values, current_device, "values")?;
        }
        let buffers = RawSortBuffers {
            key,
            values_in: self.values.cast_const(),
            values_out: self.values,
            value_bytes: self.value_bytes,
            ..RawSortBuffers::keys(self.keys.cast::<u8>(), self.n)
        };
        Ok(Some((buffers, order)))
    }
}

impl SortRequest {
    /// The checks of [`check`](Self::check) that need no pointer: a known key type, order and
    /// value size, and no values for keys only. Returns the key format and the order.
    fn formats(&self) -> Result<(KeyFormat, Order), Failure> {
        let key = element_sizes(self.key_type, self.value_bytes)?;
        let order = order(self.order).ok_or(Failure::InvalidArgument(
            "order is not CUDA_RT_ORDER_ASCENDING or CUDA_RT_ORDER_DESCENDING",
        ))?;
        if self.value_bytes == 0 && !self.values.is_null() {
            return Err(Failure::InvalidArgument(
                "values is not null but value_bytes is 0 (keys only): give the value size",
            ));
        }
        Ok((key, order))
    }

    /// [`check`](Self::check) for a sort whose length the GPU reads from `len` (`len_bytes` 4:
    /// a `uint32_t`, 8: a `uint64_t`), `n` being the capacity: the buffers with that length,
    /// also for a capacity of 0 (the GPU then checks that the length is 0).
    ///
    /// Checks, besides those of [`check`](Self::check): `len` is not null, `len_bytes` is 4 or
    /// 8, `len` is aligned to it and is device or managed memory of the current device.
    ///
    /// # Errors
    /// As [`check`](Self::check).
    pub fn check_device_len(
        &self,
        len: *const c_void,
        len_bytes: usize,
        current_device: impl Fn() -> Result<i32, Failure>,
    ) -> Result<(RawSortBuffers, Order), Failure> {
        if len.is_null() {
            return Err(Failure::InvalidArgument("len is null"));
        }
        let bytes = match len_bytes {
            4 => 4,
            8 => 8,
            _ => {
                return Err(Failure::InvalidArgument(
                    "len_bytes is not 4 (uint32_t) or 8 (uint64_t)",
                ))
            }
        };
        if len as usize % len_bytes != 0 {
            return Err(Failure::InvalidArgument("len is not aligned to len_bytes"));
        }
        let (buffers, order) = match self.check(&current_device)? {
            Some(checked) => checked,
            None => {
                // A capacity of 0: no buffer to look at, but the length still is.
                let (key, order) = self.formats()?;
                let empty = RawSortBuffers {
                    key,
                    value_bytes: self.value_bytes,
                    ..RawSortBuffers::keys(std::ptr::null_mut::<u8>(), 0)
                };
                (empty, order)
            }
        };
        device_memory(len.cast_mut(), current_device()?, "len")?;
        let device_len = DeviceLen { ptr: len, bytes };
        Ok((
            RawSortBuffers {
                device_len: Some(device_len),
                ..buffers
            },
            order,
        ))
    }
}

/// The length in bytes of `n` elements of `bytes` at `ptr`, refused when the range does not fit
/// the address space.
fn span(ptr: *mut c_void, n: usize, bytes: usize) -> Result<usize, Failure> {
    n.checked_mul(bytes)
        .filter(|len| (ptr as usize).checked_add(*len).is_some())
        .ok_or(Failure::InvalidArgument(
            "n elements at that address overflow the address space: n is wrong",
        ))
}

/// Refuses a pointer that is not device or managed memory CUDA knows
/// (`cudaPointerGetAttributes`), or device memory of another device than `current_device`.
fn device_memory(ptr: *mut c_void, current_device: i32, what: &'static str) -> Result<(), Failure> {
    // SAFETY: all-zero is a valid cudaPointerAttributes (integers and pointers), whatever the
    // fields of the CUDA version built against.
    let mut attributes: sys::cudaPointerAttributes = unsafe { std::mem::zeroed() };
    // SAFETY: `attributes` is valid for a write; the call only looks the address up.
    let status = unsafe { sys::cudaPointerGetAttributes(&mut attributes, ptr.cast_const()) };
    check(status, "cudaPointerGetAttributes")?;
    let rejected = |why| {
        Err(Failure::Pointer {
            argument: what,
            why,
        })
    };
    match attributes.type_ {
        sys::cudaMemoryTypeDevice if attributes.device != current_device => {
            rejected("device memory of another device than the current one")
        }
        sys::cudaMemoryTypeDevice | sys::cudaMemoryTypeManaged => Ok(()),
        sys::cudaMemoryTypeHost => rejected("pinned host memory: pass device memory"),
        _ => rejected("not memory that CUDA allocated (host memory?): pass device memory"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(
        keys: usize,
        values: usize,
        n: usize,
        key_type: KeyType,
        value_bytes: usize,
    ) -> SortRequest {
        SortRequest {
            keys: keys as *mut c_void,
            values: values as *mut c_void,
            n,
            key_type,
            value_bytes,
            order: CUDA_RT_ORDER_ASCENDING,
        }
    }

    fn rejection(r: SortRequest) -> String {
        match r.check(|| panic!("the host-side checks come first")) {
            Err(Failure::InvalidArgument(why)) => why.to_string(),
            other => panic!("{r:?} was not rejected as an argument: {other:?}"),
        }
    }

    #[test]
    fn every_key_type_has_its_size_and_kind() {
        let sizes: Vec<(u32, KeyKind)> = (CUDA_RT_KEY_U8..=CUDA_RT_KEY_F64)
            .map(|t| key_format(t).map(|f| (f.bytes, f.kind)).unwrap())
            .collect();
        use KeyKind::*;
        assert_eq!(
            sizes,
            [
                (1, Unsigned),
                (2, Unsigned),
                (4, Unsigned),
                (8, Unsigned),
                (1, Signed),
                (2, Signed),
                (4, Signed),
                (8, Signed),
                (4, Float),
                (8, Float)
            ]
        );
        assert!(key_format(0).is_none());
        assert!(key_format(CUDA_RT_KEY_F64 + 1).is_none());
        assert_eq!(order(CUDA_RT_ORDER_DESCENDING), Some(Order::Descending));
        assert_eq!(order(2), None);
    }

    // None of these reaches CUDA: each is refused by the host-side checks before the pointer
    // lookup (so they run without a GPU).
    #[test]
    fn bad_arguments_are_refused_with_a_reason() {
        assert!(rejection(request(0x1000, 0, 8, 0, 0)).contains("key_type"));
        assert!(rejection(request(0x1000, 0, 8, 99, 0)).contains("key_type"));
        assert!(rejection(request(0x1000, 0x2000, 8, CUDA_RT_KEY_U32, 12)).contains("value_bytes"));
        let mut descending_typo = request(0x1000, 0, 8, CUDA_RT_KEY_U32, 0);
        descending_typo.order = 7;
        assert!(rejection(descending_typo).contains("order"));
        assert!(rejection(request(0, 0, 8, CUDA_RT_KEY_U32, 0)).contains("keys is null"));
        assert!(rejection(request(0x1000, 0, 8, CUDA_RT_KEY_U32, 4)).contains("values is null"));
        assert!(
            rejection(request(0x1000, 0x2000, 8, CUDA_RT_KEY_U32, 0)).contains("value_bytes is 0")
        );
        assert!(rejection(request(0x1002, 0, 8, CUDA_RT_KEY_U32, 0)).contains("aligned"));
        assert!(rejection(request(0x1000, 0x2004, 8, CUDA_RT_KEY_U32, 8)).contains("aligned"));
        assert!(rejection(request(0x1000, 0x1010, 8, CUDA_RT_KEY_U32, 4)).contains("overlap"));
        assert!(
            rejection(request(0x1000, 0, usize::MAX / 2, CUDA_RT_KEY_U64, 0)).contains("overflow")
        );
    }

    fn no_device() -> Result<i32, Failure> {
        panic!("nothing to sort: no device is asked for")
    }

    #[test]
    fn nothing_to_sort_is_accepted_without_pointers() {
        assert!(matches!(
            request(0, 0, 0, CUDA_RT_KEY_F64, 0).check(no_device),
            Ok(None)
        ));
        assert!(matches!(
            request(0, 0, 0, CUDA_RT_KEY_I8, 16).check(no_device),
            Ok(None)
        ));
        // The key type is still checked when there is nothing to sort.
        assert!(request(0, 0, 0, 0, 0).check(no_device).is_err());
    }
}
