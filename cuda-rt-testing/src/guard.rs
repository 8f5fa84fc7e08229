//! Device buffers with guard bands: a range of elements inside one allocation, with canary
//! bytes before and after it that the code under test must leave alone, so that a write out of
//! bounds lands in memory the test owns (not in a neighbouring allocation, and without a fault)
//! and is reported as what it is. Outputs are poisoned before the run, so that an element the
//! code never writes cannot pass for a correct one.

use crate::failure::{Failure, FailureKind, Side};
use cuda_rt::raw;
use cuda_rt::{
    DeviceBuffer, DeviceCopy, DeviceMemory, DeviceMemoryMut, DeviceView, DeviceViewMut, Stream,
};
use std::mem::size_of;

/// The bytes written around and into guarded buffers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Guards {
    /// At least this many bytes of guard band on each side of a range (rounded up to whole
    /// elements, and so that the range keeps the 256-byte alignment of `cudaMalloc`); 0 for
    /// none.
    pub bytes: usize,
    /// The byte every guard band holds.
    pub canary: u8,
    /// The byte outputs are filled with before the run (`None`: zero bytes). `0xFF` makes
    /// every float a NaN and every integer all ones.
    pub poison: Option<u8>,
}

impl Default for Guards {
    /// 256 bytes of `0xA5` on each side; outputs poisoned with `0x5A`.
    fn default() -> Guards {
        Guards {
            bytes: 256,
            canary: 0xA5,
            poison: Some(0x5A),
        }
    }
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// A changed guard band: which side, the changed element nearest the range (0: adjacent),
/// how many of the band's elements changed, and the bytes of the nearest one.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Damage {
    side: Side,
    element: usize,
    changed: usize,
    found: Vec<u8>,
}

/// The damage to the guard bands of an allocation whose bytes are `bytes`, whose range is the
/// bytes `range`, of elements of `size` bytes, with canary byte `canary`. The band before the
/// range is looked at first.
fn guard_damage(
    bytes: &[u8],
    range: std::ops::Range<usize>,
    canary: u8,
    size: usize,
) -> Option<Damage> {
    let changed = |band: &[u8]| {
        band.chunks(size)
            .filter(|e| e.iter().any(|&b| b != canary))
            .count()
    };
    let before = &bytes[..range.start];
    if let Some(b) = before.iter().rposition(|&x| x != canary) {
        // Elements are counted back from the range's start (which is a whole number of
        // elements past the allocation's start).
        let element = (range.start - 1 - b) / size;
        let start = range.start - (element + 1) * size;
        return Some(Damage {
            side: Side::Before,
            element,
            changed: changed(before),
            found: before[start..start + size].to_vec(),
        });
    }
    let after = &bytes[range.end..];
    let b = after.iter().position(|&x| x != canary)?;
    let element = b / size;
    let start = element * size;
    Some(Damage {
        side: Side::After,
        element,
        changed: changed(after),
        found: after[start..(start + size).min(after.len())].to_vec(),
    })
}

impl Guards {
    /// Elements of guard band for elements of `size` bytes: at least `self.bytes`, a multiple
    /// of 256 bytes whenever possible.
    fn elements(&self, size: usize) -> usize {
        if self.bytes == 0 || size == 0 {
            return 0;
        }
        let step = 256 / gcd(size, 256);
        self.bytes.div_ceil(size).div_ceil(step) * step
    }
}

/// A range of `len` elements of `T` inside a device allocation, with guard bands around it.
///
/// Made with [`GuardedBuffer::from_slice`] (an input: the data, and a snapshot of the whole
/// allocation to check later that nothing changed) or [`GuardedBuffer::poisoned`] (an
/// output). [`view`](Self::view) and [`view_mut`](Self::view_mut) give the range as cuda-rt
/// views, which go wherever device memory goes (kernel launches, copies, `with_ptr_on`).
/// [`download`](Self::download) checks the guard bands before it returns the range.
///
/// # Thread safety
/// `Send` and `Sync` when `T` is, like the `DeviceBuffer` it holds.
#[derive(Debug)]
pub struct GuardedBuffer<T: DeviceCopy> {
    name: String,
    memory: DeviceBuffer<T>,
    /// Elements before the range (guard band and offset).
    front: usize,
    len: usize,
    guards: Guards,
    /// The allocation's bytes right after it was filled, for inputs.
    snapshot: Option<Vec<u8>>,
}

impl<T: DeviceCopy> GuardedBuffer<T> {
    /// Allocates `offset + len` elements between two guard bands, all canary, on `stream`.
    fn allocate(
        name: &str,
        len: usize,
        offset: usize,
        guards: Guards,
        stream: &Stream,
    ) -> cuda_rt::Result<GuardedBuffer<T>> {
        let band = guards.elements(size_of::<T>());
        let front = band + offset;
        let total = front + len + band;
        let mut memory = DeviceBuffer::<T>::new(total)?;
        memory.set_bytes_async(stream, guards.canary)?;
        Ok(GuardedBuffer {
            name: name.to_string(),
            memory,
            front,
            len,
            guards,
            snapshot: None,
        })
    }

    /// An input: a copy of `data` at element `offset` past the front guard band (0 keeps the
    /// alignment of `cudaMalloc`; others test unaligned data), then a snapshot of the whole
    /// allocation for [`check_unchanged`](Self::check_unchanged). Returns once all of it is on
    /// the device (`cudaMemsetAsync`, `cudaMemcpyAsync`, `cudaStreamSynchronize`).
    ///
    /// # Errors
    /// CUDA errors of the allocation, fill, copy and snapshot.
    pub fn from_slice(
        name: &str,
        data: &[T],
        offset: usize,
        guards: Guards,
        stream: &Stream,
    ) -> cuda_rt::Result<GuardedBuffer<T>> {
        let mut buffer = Self::allocate(name, data.len(), offset, guards, stream)?;
        let range = buffer.front..buffer.front + buffer.len;
        buffer.memory.slice_mut(range)?.copy_from_host(data)?;
        buffer.snapshot = Some(buffer.download_bytes(stream)?);
        Ok(buffer)
    }

    /// An output of `len` elements filled with the poison byte of `guards` (zero bytes without
    /// one), so that an element the code does not write keeps a pattern it would not compute.
    /// Returns once the fills have run (`cudaMemsetAsync`, `cudaStreamSynchronize`).
    ///
    /// # Errors
    /// CUDA errors of the allocation and fills.
    pub fn poisoned(
        name: &str,
        len: usize,
        guards: Guards,
        stream: &Stream,
    ) -> cuda_rt::Result<GuardedBuffer<T>> {
        Self::poisoned_at(name, len, 0, guards, stream)
    }

    /// [`poisoned`](Self::poisoned), with the range at element `offset` past the front guard
    /// band (see [`from_slice`](Self::from_slice)).
    ///
    /// # Errors
    /// As for [`poisoned`](Self::poisoned).
    pub fn poisoned_at(
        name: &str,
        len: usize,
        offset: usize,
        guards: Guards,
        stream: &Stream,
    ) -> cuda_rt::Result<GuardedBuffer<T>> {
        let mut buffer = Self::allocate(name, len, offset, guards, stream)?;
        let range = buffer.front..buffer.front + buffer.len;
        buffer
            .memory
            .slice_mut(range)?
            .set_bytes_async(stream, guards.poison.unwrap_or(0))?;
        stream.synchronize()?;
        Ok(buffer)
    }

    /// The buffer's name in reports.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The number of elements of the range.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the range is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The range, read-only.
    pub fn view(&self) -> DeviceView<'_, T> {
        self.memory
            .slice(self.front..self.front + self.len)
            .expect("the range lies within the allocation")
    }

    /// The range, writable.
    pub fn view_mut(&mut self) -> DeviceViewMut<'_, T> {
        let range = self.front..self.front + self.len;
        self.memory
            .slice_mut(range)
            .expect("the range lies within the allocation")
    }

    /// Fills the range with the poison byte again (zero bytes without one), on `stream`: to
    /// reuse an output for another run.
    ///
    /// # Errors
    /// CUDA errors of queuing the fill.
    pub fn repoison(&mut self, stream: &Stream) -> cuda_rt::Result<()> {
        let byte = self.guards.poison.unwrap_or(0);
        self.view_mut().set_bytes_async(stream, byte)
    }

    /// Every byte of the allocation, guard bands included, copied to the host on `stream`
    /// after the work queued on the memory (`cudaMemcpyAsync` inside `with_ptr_on`, then
    /// `cudaStreamSynchronize`).
    fn download_bytes(&self, stream: &Stream) -> cuda_rt::Result<Vec<u8>> {
        let bytes = self.memory.size_bytes();
        let mut host = vec![0u8; bytes];
        if bytes == 0 {
            return Ok(host);
        }
        let mut queued = false;
        let ordered = self.memory.with_ptr_on(stream, |source| {
            // SAFETY: `host` holds `bytes` bytes and is neither read, moved nor freed until the
            // stream has been synchronized below (or it is leaked); `source` is the
            // allocation's `bytes` bytes, kept alive and ordered after earlier writes by
            // `with_ptr_on`; the copy is queued on `stream`, as `with_ptr_on` requires.
            let copy = unsafe {
                raw::memcpy_async(
                    host.as_mut_ptr().cast(),
                    source.cast(),
                    bytes,
                    raw::flags::MEMCPY_DEVICE_TO_HOST,
                    stream.as_raw(),
                )
            };
            queued = copy.is_ok();
            copy
        });
        if queued {
            if let Err(e) = stream.synchronize() {
                // The copy may not have finished: leak the destination rather than free it
                // under the copy.
                std::mem::forget(host);
                return Err(e);
            }
        }
        ordered??;
        Ok(host)
    }

    /// Byte range of the guarded range in the allocation.
    fn range_bytes(&self) -> std::ops::Range<usize> {
        let size = size_of::<T>();
        self.front * size..(self.front + self.len) * size
    }

    /// The first guard band byte that is not the canary, as a failure.
    fn check_guard_bytes(&self, bytes: &[u8]) -> Result<(), Failure> {
        let size = size_of::<T>().max(1);
        match guard_damage(bytes, self.range_bytes(), self.guards.canary, size) {
            None => Ok(()),
            Some(damage) => {
                Err(self.guard_failure(damage.side, damage.element, damage.changed, &damage.found))
            }
        }
    }

    /// The failure of guard element `element` on `side` (counted from the range), which holds
    /// the bytes `found`; `changed` elements of that band differ from the canary.
    fn guard_failure(&self, side: Side, element: usize, changed: usize, found: &[u8]) -> Failure {
        let (name, len, canary) = (&self.name, self.len, self.guards.canary);
        let position = match side {
            Side::Before => format!("{} before its start", element + 1),
            Side::After => format!("{} past its end (index {})", element + 1, len + element),
        };
        let band = self.guards.elements(size_of::<T>());
        Failure::new(
            FailureKind::GuardBand {
                buffer: name.clone(),
                side,
                element,
            },
            format!(
                "out-of-bounds write: the guard band {side} `{name}` ({len} elements) was \
                 written {position}: bytes {found:02x?}, canary {canary:#04x} ({changed} of \
                 the band's {band} elements changed)"
            ),
        )
    }

    /// The range's elements from the allocation's bytes.
    fn values(&self, bytes: &[u8]) -> Vec<T> {
        let range = self.range_bytes();
        let source = &bytes[range.clone()];
        let mut values: Vec<T> = Vec::with_capacity(self.len);
        // SAFETY: the capacity holds `len` elements, `source.len() == len * size_of::<T>()`
        // bytes, and the two do not overlap; after the copy every element is initialized, and
        // any bit pattern is a valid `T` (DeviceCopy).
        unsafe {
            std::ptr::copy_nonoverlapping(
                source.as_ptr(),
                values.as_mut_ptr().cast::<u8>(),
                source.len(),
            );
            values.set_len(self.len);
        }
        values
    }

    /// The range's elements and the allocation's bytes, after checking the guard bands.
    pub(crate) fn download_with_bytes(
        &self,
        stream: &Stream,
    ) -> Result<(Vec<T>, Vec<u8>), Failure> {
        let bytes = self.download_bytes(stream)?;
        self.check_guard_bytes(&bytes)?;
        Ok((self.values(&bytes), bytes))
    }

    /// Whether element `index` of the range still holds the poison in `bytes` (from
    /// [`download_with_bytes`](Self::download_with_bytes)).
    pub(crate) fn holds_poison(&self, bytes: &[u8], index: usize) -> bool {
        let Some(poison) = self.guards.poison else {
            return false;
        };
        let size = size_of::<T>();
        let start = self.range_bytes().start + index * size;
        size > 0 && bytes[start..start + size].iter().all(|&b| b == poison)
    }

    /// Checks both guard bands, then returns the range's elements (after the work queued on
    /// the memory: `cudaMemcpyAsync`, `cudaStreamSynchronize`).
    ///
    /// # Errors
    /// [`FailureKind::GuardBand`] naming the side and the element nearest the range that
    /// changed; [`FailureKind::Cuda`] for errors of the copy (and of the work before it).
    pub fn download(&self, stream: &Stream) -> Result<Vec<T>, Failure> {
        self.download_with_bytes(stream).map(|(values, _)| values)
    }

    /// Checks that neither the guard bands nor the range changed since
    /// [`from_slice`](Self::from_slice) (for buffers the code only reads); a poisoned buffer
    /// has only its guard bands checked.
    ///
    /// # Errors
    /// [`FailureKind::GuardBand`], [`FailureKind::InputModified`] with the first changed
    /// element, or [`FailureKind::Cuda`].
    pub fn check_unchanged(&self, stream: &Stream) -> Result<(), Failure> {
        let bytes = self.download_bytes(stream)?;
        self.check_guard_bytes(&bytes)?;
        let Some(snapshot) = &self.snapshot else {
            return Ok(());
        };
        let range = self.range_bytes();
        let size = size_of::<T>().max(1);
        match bytes[range.clone()]
            .iter()
            .zip(&snapshot[range])
            .position(|(a, b)| a != b)
        {
            None => Ok(()),
            Some(b) => {
                let index = b / size;
                Err(Failure::new(
                    FailureKind::InputModified {
                        buffer: self.name.clone(),
                        index,
                    },
                    format!(
                        "`{}` is an input, but element {index} of its {} was written",
                        self.name, self.len
                    ),
                ))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guard_damage_names_the_side_and_the_nearest_element() {
        // 4-byte elements: 3 before the range, 2 in it, 3 after.
        let mut bytes = vec![0xA5u8; 32];
        let range = 12..20;
        assert_eq!(guard_damage(&bytes, range.clone(), 0xA5, 4), None);
        bytes[12..20].fill(0); // the range itself may change
        assert_eq!(guard_damage(&bytes, range.clone(), 0xA5, 4), None);
        bytes[21] = 0; // the element right after the range
        bytes[28] = 1; // and the last one
        let damage = guard_damage(&bytes, range.clone(), 0xA5, 4).unwrap();
        assert_eq!(
            (damage.side, damage.element, damage.changed),
            (Side::After, 0, 2)
        );
        assert_eq!(damage.found, [0xA5, 0, 0xA5, 0xA5]);
        bytes[5] = 7; // the second element before the range
        let damage = guard_damage(&bytes, range, 0xA5, 4).unwrap();
        assert_eq!(
            (damage.side, damage.element, damage.changed),
            (Side::Before, 1, 1)
        );
        assert_eq!(damage.found, [0xA5, 7, 0xA5, 0xA5]);
    }

    #[test]
    fn guard_bands_keep_the_alignment_of_cuda_malloc() {
        let guards = Guards::default();
        assert_eq!(guards.elements(4), 64);
        assert_eq!(guards.elements(1), 256);
        assert_eq!(guards.elements(8), 32);
        assert_eq!(guards.elements(12) * 12 % 256, 0);
        assert_eq!(guards.elements(16), 16);
        assert_eq!(Guards { bytes: 1, ..guards }.elements(4), 64);
        assert_eq!(Guards { bytes: 0, ..guards }.elements(4), 0);
    }
}
