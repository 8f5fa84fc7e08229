//! Views of part of a piece of device memory: [`DeviceView`] (shared, read-only) and
//! [`DeviceViewMut`] (exclusive), and the chunk iterators that make them.

use super::private::{Parts, Sealed};
use super::{DeviceCopy, DeviceMemory, DeviceMemoryMut};
use crate::error::{Error, ErrorKind, Result};
use std::marker::PhantomData;
use std::ops::{Bound, RangeBounds};

/// The elements `start..end` of `range` within `0..len`.
pub(crate) fn resolve(
    range: impl RangeBounds<usize>,
    len: usize,
    what: &'static str,
) -> Result<(usize, usize)> {
    let out = || Error::new(ErrorKind::OutOfRange, what);
    let start = match range.start_bound() {
        Bound::Included(&s) => s,
        Bound::Excluded(&s) => s.checked_add(1).ok_or_else(out)?,
        Bound::Unbounded => 0,
    };
    let end = match range.end_bound() {
        Bound::Included(&e) => e.checked_add(1).ok_or_else(out)?,
        Bound::Excluded(&e) => e,
        Bound::Unbounded => len,
    };
    if start > end || end > len {
        return Err(out());
    }
    Ok((start, end))
}

/// The parts of elements `start..end` of `parts` (`start <= end <= parts.len`).
pub(crate) fn sub_parts<T>(parts: Parts<'_, T>, start: usize, end: usize) -> Parts<'_, T> {
    debug_assert!(start <= end && end <= parts.len);
    Parts {
        // SAFETY: `start <= len`: the pointer stays within the allocation (or one past its
        // end); for a dangling pointer of empty memory `start` is 0.
        ptr: unsafe { parts.ptr.add(start) },
        len: end - start,
        device: parts.device,
        tracker: parts.tracker,
        offset: parts.offset + start * std::mem::size_of::<T>(),
    }
}

/// A read-only view of part of device memory ([`DeviceMemory::slice`],
/// [`DeviceMemory::chunks`]): usable wherever device memory is read (copies to the host, the
/// source of device copies, [`with_ptr_on`](DeviceMemory::with_ptr_on), graph capture).
///
/// Like `&'a [T]`: `Copy`, and the memory it views cannot be written or freed while it lives.
/// Work on it is ordered after earlier writes of the same bytes; later writes of those bytes
/// wait for it.
///
/// # Thread safety
/// `Send` and `Sync` when `T` is `Sync`.
///
/// # Examples
/// ```no_run
/// use cuda_rt::{DeviceBuffer, DeviceMemory};
/// let buffer = DeviceBuffer::from_slice(&[1u32, 2, 3, 4])?;
/// assert_eq!(buffer.slice(1..3)?.to_vec()?, [2, 3]);
/// assert_eq!(buffer.slice(3..9).unwrap_err().kind(), cuda_rt::ErrorKind::OutOfRange);
/// # Ok::<(), cuda_rt::Error>(())
/// ```
#[derive(Debug)]
pub struct DeviceView<'a, T: DeviceCopy> {
    parts: Parts<'a, T>,
    _memory: PhantomData<&'a [T]>,
}

impl<T: DeviceCopy> Clone for DeviceView<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T: DeviceCopy> Copy for DeviceView<'_, T> {}

// SAFETY: like `&[T]`: it only reads the memory, and its tracker is Sync.
unsafe impl<T: DeviceCopy + Sync> Send for DeviceView<'_, T> {}
// SAFETY: as above.
unsafe impl<T: DeviceCopy + Sync> Sync for DeviceView<'_, T> {}

impl<'a, T: DeviceCopy> DeviceView<'a, T> {
    pub(crate) fn new(parts: Parts<'a, T>) -> Self {
        DeviceView {
            parts,
            _memory: PhantomData,
        }
    }

    /// A view of elements `range` of this view, for as long as this view's memory is borrowed.
    ///
    /// # Errors
    /// [`ErrorKind::OutOfRange`].
    pub fn subview(self, range: impl RangeBounds<usize>) -> Result<DeviceView<'a, T>> {
        let (start, end) = resolve(range, self.parts.len, "DeviceView::subview")?;
        Ok(DeviceView::new(sub_parts(self.parts, start, end)))
    }
}

impl<T: DeviceCopy> Sealed<T> for DeviceView<'_, T> {
    fn parts(&self) -> Parts<'_, T> {
        self.parts
    }
}
impl<T: DeviceCopy> DeviceMemory<T> for DeviceView<'_, T> {}

/// A mutable view of part of device memory ([`DeviceMemoryMut::slice_mut`],
/// [`split_at_mut`](DeviceMemoryMut::split_at_mut), [`chunks_mut`](DeviceMemoryMut::chunks_mut)):
/// usable wherever device memory is (copies, memsets, [`with_ptr_mut_on`](DeviceMemoryMut::with_ptr_mut_on),
/// the sort, graph capture).
///
/// Like `&'a mut [T]`: views borrowed mutably at the same time never overlap, so work on
/// disjoint views is not ordered against each other (on different streams it runs
/// concurrently), while work on overlapping bytes, through views made one after the other or
/// through the whole buffer, stays ordered.
///
/// # Thread safety
/// `Send` when `T` is `Send`, `Sync` when `T` is `Sync`: disjoint views may be used from
/// different threads.
///
/// # Examples
/// Each half on its own stream:
/// ```no_run
/// use cuda_rt::{DeviceBuffer, DeviceMemory, DeviceMemoryMut, Stream};
/// let (s0, s1) = (Stream::new()?, Stream::new()?);
/// let mut buffer = DeviceBuffer::<u8>::zeroed(1 << 20)?;
/// let (mut low, mut high) = buffer.split_at_mut(1 << 19)?;
/// low.set_bytes_async(&s0, 1)?;
/// high.set_bytes_async(&s1, 2)?; // does not wait for the first memset
/// let bytes = buffer.to_vec()?; // waits for both
/// assert_eq!((bytes[0], bytes[1 << 19]), (1, 2));
/// # Ok::<(), cuda_rt::Error>(())
/// ```
///
/// Two mutable views of the same bytes cannot coexist:
/// ```compile_fail
/// use cuda_rt::{DeviceBuffer, DeviceMemoryMut};
/// let mut buffer = DeviceBuffer::<u8>::new(8).unwrap();
/// let a = buffer.slice_mut(0..4).unwrap();
/// let b = buffer.slice_mut(2..6).unwrap(); // error: `buffer` is already borrowed mutably
/// drop((a, b));
/// ```
#[derive(Debug)]
pub struct DeviceViewMut<'a, T: DeviceCopy> {
    parts: Parts<'a, T>,
    _memory: PhantomData<&'a mut [T]>,
}

// SAFETY: like `&mut [T]`: exclusive access to its bytes; the tracker is Sync.
unsafe impl<T: DeviceCopy + Send> Send for DeviceViewMut<'_, T> {}
// SAFETY: `&self` operations only read the memory (or go through the tracker's lock).
unsafe impl<T: DeviceCopy + Sync> Sync for DeviceViewMut<'_, T> {}

impl<'a, T: DeviceCopy> DeviceViewMut<'a, T> {
    pub(crate) fn new(parts: Parts<'a, T>) -> Self {
        DeviceViewMut {
            parts,
            _memory: PhantomData,
        }
    }

    /// Splits the view into `0..mid` and `mid..len()`, both borrowing for all of `'a` (unlike
    /// [`split_at_mut`](DeviceMemoryMut::split_at_mut), which borrows this view).
    ///
    /// # Errors
    /// [`ErrorKind::OutOfRange`] if `mid > len()`.
    pub fn into_split_at(self, mid: usize) -> Result<(DeviceViewMut<'a, T>, DeviceViewMut<'a, T>)> {
        if mid > self.parts.len {
            return Err(Error::new(
                ErrorKind::OutOfRange,
                "DeviceViewMut::into_split_at",
            ));
        }
        let len = self.parts.len;
        Ok((
            DeviceViewMut::new(sub_parts(self.parts, 0, mid)),
            DeviceViewMut::new(sub_parts(self.parts, mid, len)),
        ))
    }

    /// A read-only view of the same elements, borrowing for all of `'a`.
    pub fn into_view(self) -> DeviceView<'a, T> {
        DeviceView::new(self.parts)
    }
}

impl<T: DeviceCopy> Sealed<T> for DeviceViewMut<'_, T> {
    fn parts(&self) -> Parts<'_, T> {
        self.parts
    }
}
impl<T: DeviceCopy> DeviceMemory<T> for DeviceViewMut<'_, T> {}
impl<T: DeviceCopy> DeviceMemoryMut<T> for DeviceViewMut<'_, T> {}

/// Read-only views of consecutive chunks ([`DeviceMemory::chunks`]).
#[derive(Debug, Clone)]
pub struct Chunks<'a, T: DeviceCopy> {
    rest: DeviceView<'a, T>,
    chunk_len: usize,
}

impl<'a, T: DeviceCopy> Chunks<'a, T> {
    pub(crate) fn new(parts: Parts<'a, T>, chunk_len: usize) -> Result<Self> {
        if chunk_len == 0 {
            return Err(Error::new(
                ErrorKind::OutOfRange,
                "DeviceMemory::chunks (length 0)",
            ));
        }
        Ok(Chunks {
            rest: DeviceView::new(parts),
            chunk_len,
        })
    }
}

impl<'a, T: DeviceCopy> Iterator for Chunks<'a, T> {
    type Item = DeviceView<'a, T>;

    fn next(&mut self) -> Option<DeviceView<'a, T>> {
        let len = self.rest.parts.len;
        if len == 0 {
            return None;
        }
        let take = self.chunk_len.min(len);
        let chunk = DeviceView::new(sub_parts(self.rest.parts, 0, take));
        self.rest = DeviceView::new(sub_parts(self.rest.parts, take, len));
        Some(chunk)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.rest.parts.len.div_ceil(self.chunk_len);
        (n, Some(n))
    }
}

impl<T: DeviceCopy> ExactSizeIterator for Chunks<'_, T> {}

/// Mutable views of consecutive chunks ([`DeviceMemoryMut::chunks_mut`]).
#[derive(Debug)]
pub struct ChunksMut<'a, T: DeviceCopy> {
    rest: Option<DeviceViewMut<'a, T>>,
    chunk_len: usize,
}

impl<'a, T: DeviceCopy> ChunksMut<'a, T> {
    pub(crate) fn new(parts: Parts<'a, T>, chunk_len: usize) -> Result<Self> {
        if chunk_len == 0 {
            return Err(Error::new(
                ErrorKind::OutOfRange,
                "DeviceMemoryMut::chunks_mut (length 0)",
            ));
        }
        Ok(ChunksMut {
            rest: Some(DeviceViewMut::new(parts)),
            chunk_len,
        })
    }
}

impl<'a, T: DeviceCopy> Iterator for ChunksMut<'a, T> {
    type Item = DeviceViewMut<'a, T>;

    fn next(&mut self) -> Option<DeviceViewMut<'a, T>> {
        let rest = self.rest.take()?;
        let len = rest.parts.len;
        if len == 0 {
            return None;
        }
        let take = self.chunk_len.min(len);
        let chunk = DeviceViewMut::new(sub_parts(rest.parts, 0, take));
        self.rest = Some(DeviceViewMut::new(sub_parts(rest.parts, take, len)));
        Some(chunk)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self
            .rest
            .as_ref()
            .map_or(0, |r| r.parts.len.div_ceil(self.chunk_len));
        (n, Some(n))
    }
}

impl<T: DeviceCopy> ExactSizeIterator for ChunksMut<'_, T> {}

/// Mutable views of consecutive chunks of one length
/// ([`DeviceMemoryMut::chunks_exact_mut`]): [`ChunksMut`] over the whole chunks, with the rest
/// kept apart.
#[derive(Debug)]
pub struct ChunksExactMut<'a, T: DeviceCopy> {
    chunks: ChunksMut<'a, T>,
    remainder: DeviceViewMut<'a, T>,
}

impl<'a, T: DeviceCopy> ChunksExactMut<'a, T> {
    pub(crate) fn new(parts: Parts<'a, T>, chunk_len: usize) -> Result<Self> {
        if chunk_len == 0 {
            return Err(Error::new(
                ErrorKind::OutOfRange,
                "DeviceMemoryMut::chunks_exact_mut (length 0)",
            ));
        }
        let exact = parts.len - parts.len % chunk_len;
        Ok(ChunksExactMut {
            chunks: ChunksMut::new(sub_parts(parts, 0, exact), chunk_len)?,
            remainder: DeviceViewMut::new(sub_parts(parts, exact, parts.len)),
        })
    }

    /// The elements after the last whole chunk (fewer than the chunk length).
    pub fn into_remainder(self) -> DeviceViewMut<'a, T> {
        self.remainder
    }
}

impl<'a, T: DeviceCopy> Iterator for ChunksExactMut<'a, T> {
    type Item = DeviceViewMut<'a, T>;

    fn next(&mut self) -> Option<DeviceViewMut<'a, T>> {
        self.chunks.next()
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.chunks.size_hint()
    }
}

impl<T: DeviceCopy> ExactSizeIterator for ChunksExactMut<'_, T> {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_resolve_or_are_out_of_range() {
        assert_eq!(resolve(.., 10, "t").unwrap(), (0, 10));
        assert_eq!(resolve(2..5, 10, "t").unwrap(), (2, 5));
        assert_eq!(resolve(2..=5, 10, "t").unwrap(), (2, 6));
        assert_eq!(resolve(..=9, 10, "t").unwrap(), (0, 10));
        assert_eq!(resolve(10.., 10, "t").unwrap(), (10, 10));
        for bad in [
            resolve(0..11, 10, "t"),
            resolve(11.., 10, "t"),
            resolve(..=10, 10, "t"),
            resolve(..=usize::MAX, 10, "t"),
            resolve((Bound::Excluded(usize::MAX), Bound::Unbounded), 10, "t"),
        ] {
            assert_eq!(bad.unwrap_err().kind(), ErrorKind::OutOfRange);
        }
        #[allow(clippy::reversed_empty_ranges)]
        let reversed = resolve(5..2, 10, "t");
        assert_eq!(reversed.unwrap_err().kind(), ErrorKind::OutOfRange);
    }
}
