//! Typed kernels: launch a `__global__` function with checked argument types, and no `unsafe`
//! at the call.
//!
//! A [`Kernel<P>`] is a kernel's handle together with its parameter list `P`, a tuple of
//! parameter types:
//! - [`SliceMut<T>`]: two C parameters, `T* data, size_t len`, for memory the kernel may write;
//!   the argument is device memory borrowed mutably (`&mut DeviceBuffer<T>`, a
//!   [`DeviceViewMut`], ...);
//! - [`Slice<T>`]: `const T* data, size_t len`, for memory the kernel only reads; the argument is
//!   device memory borrowed shared (`&DeviceBuffer<T>`, a [`DeviceView`], ...);
//! - any [`DeviceCopy`] type `T` (integers, floats, arrays, your `#[repr(C)]` structs): one C
//!   parameter of type `T`, passed by value.
//!
//! The length travels with the pointer, so the kernel knows the bounds of every buffer it is
//! given: `__global__ void scale(float* data, size_t n, float factor)` is a
//! `Kernel<(SliceMut<f32>, f32)>`.
//!
//! Kernels that already exist usually take bare pointers and one element count, as CUDA's
//! samples do: `__global__ void saxpy(int n, float a, const float* x, float* y)`. Those are
//! declared with three more kinds, and need no new signature:
//! - [`PtrMut<T>`]: one C parameter `T*`; the argument is device memory borrowed mutably, as
//!   for `SliceMut`;
//! - [`Ptr<T>`]: one C parameter `const T*`; the argument is device memory borrowed shared;
//! - [`Len<I>`]: one C parameter of the integer type `I` (`int`, `unsigned`, `long long`,
//!   `size_t`, ...): the count of elements the kernel may touch through its bare pointers.
//!
//! `saxpy` above is a `Kernel<(Len<i32>, f32, Ptr<f32>, PtrMut<f32>)>`. Every launch checks
//! its arguments before the kernel is queued: each bare-pointer argument must hold at least as
//! many elements as the smallest `Len` argument (a negative count is zero), or at least one
//! element when the kernel has no `Len` parameter. A launch that fails the check orders no
//! memory, queues nothing and returns [`ErrorKind::PointerTooShort`], naming the parameter.
//!
//! # What is checked, and the one thing that is claimed
//! [`Kernel::launch`] borrows its memory arguments for the launch and orders the kernel on the
//! stream like any other use of that memory (see [`memory`](crate::memory)): a kernel that
//! writes a buffer waits for every earlier use of those bytes on other streams, one that reads
//! waits for earlier writes, and later uses wait for the kernel. Mutable and shared borrows
//! follow Rust's rules, so a safe launch cannot race with a copy or with another kernel.
//!
//! The argument tuple's types must match `P` (the compiler checks), and `P` is checked against
//! the compiled kernel when the handle is made: the number of C parameters and the size of
//! each (`cudaFuncGetParamInfo`, CUDA 12.4 and newer; earlier runtimes cannot tell, and the
//! declaration's claim stands alone); a mismatch is [`ErrorKind::KernelSignature`].
//!
//! What no one can check is what the kernel does. Making a handle is `unsafe`
//! ([`Kernel::from_raw`], [`Library::kernel`](crate::Library::kernel), the `unsafe fn` of the
//! [`kernels!`](crate::kernels) macro), and that is the claim it makes: the kernel has exactly
//! these parameter types, and for **every** argument values of those types (and every launch
//! configuration) it accesses memory only through its memory parameters: through a
//! `Slice`/`SliceMut` within its length, through a `Ptr`/`PtrMut` only at indices below the
//! smallest of its `Len` parameters (zero when that is negative), or only element 0 when it
//! has none; and it writes only through `SliceMut` and `PtrMut` parameters. A kernel whose
//! bare pointers are bounded otherwise (rows × columns, a count read from memory) does not fit
//! that claim: give it `Slice` parameters, or launch it with
//! [`launch_kernel`](crate::launch_kernel).
//!
//! # Examples
//! A kernel compiled into the program (CUDA C++, built by cuda-rt-build):
//! ```cuda
//! extern "C" __global__ void axpy(float* y, size_t n, const float* x, size_t xn, float a) {
//!     size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
//!     if (i < n && i < xn) y[i] += a * x[i];
//! }
//! ```
//! is declared once and launched without `unsafe`:
//! ```no_run
//! use cuda_rt::{kernels, DeviceBuffer, LaunchConfig, Slice, SliceMut, Stream};
//! kernels! {
//!     /// `y[i] += a * x[i]`.
//!     pub unsafe fn axpy(y: SliceMut<f32>, x: Slice<f32>, a: f32);
//! }
//! let stream = Stream::new()?;
//! let x = DeviceBuffer::from_slice(&[1.0f32; 1000])?;
//! let mut y = DeviceBuffer::from_slice(&[2.0f32; 1000])?;
//! axpy()?.launch(&stream, LaunchConfig::for_items(1000, 256), (&mut y, &x, 3.0))?;
//! assert_eq!(y.to_vec()?, vec![5.0; 1000]);
//! # Ok::<(), cuda_rt::Error>(())
//! ```
//!
//! A launch cannot mutate memory that is borrowed elsewhere:
//! ```compile_fail,E0502
//! # use cuda_rt::{kernels, DeviceBuffer, DeviceMemory, LaunchConfig, Slice, SliceMut, Stream};
//! # kernels! { unsafe fn fill(out: SliceMut<u32>, v: u32); }
//! # let stream = Stream::new().unwrap();
//! let mut a = DeviceBuffer::<u32>::zeroed(8).unwrap();
//! let view = a.slice(0..4).unwrap();
//! fill().unwrap().launch(&stream, LaunchConfig::for_items(8, 8), (&mut a, 1)).unwrap();
//! drop(view);
//! ```
//!
//! Nor write through a bare pointer to memory it only borrows shared:
//! ```compile_fail,E0277
//! # use cuda_rt::{kernels, DeviceBuffer, LaunchConfig, Len, PtrMut, Stream};
//! # kernels! { unsafe fn fill(n: Len<u32>, out: PtrMut<u32>); }
//! # let stream = Stream::new().unwrap();
//! let a = DeviceBuffer::<u32>::zeroed(8).unwrap();
//! fill().unwrap().launch(&stream, LaunchConfig::for_items(8, 8), (8u32, &a)).unwrap();
//! ```

use crate::error::{Error, ErrorKind, Result};
use crate::graph::{
    Capture, Captured, CapturedMut, Condition, GraphBuilder, GraphSite, LaunchableGraph, Node,
};
use crate::launch::{launch_raw, LaunchConfig};
use crate::memory::{DeviceCopy, DeviceMemory, DeviceMemoryMut, DeviceView, DeviceViewMut};
use crate::raw;
use crate::stream::StreamRef;
use std::any::Any;
use std::ffi::c_void;
use std::marker::PhantomData;
use std::sync::Arc;

/// A kernel parameter `T* data, size_t len`: device memory the kernel may read and write.
///
/// A type-level marker (never a value): it names the parameter in [`Kernel<P>`]; the argument
/// passed for it is mutably borrowed device memory.
#[derive(Debug)]
pub struct SliceMut<T>(PhantomData<fn() -> T>);

/// A kernel parameter `const T* data, size_t len`: device memory the kernel only reads.
///
/// A type-level marker (never a value), like [`SliceMut`]; the argument is device memory
/// borrowed shared.
#[derive(Debug)]
pub struct Slice<T>(PhantomData<fn() -> T>);

/// A kernel parameter `T* data` without a length: device memory the kernel may read and write,
/// at indices below the kernel's [`Len`] argument.
///
/// A type-level marker (never a value), like [`SliceMut`]; the argument is device memory
/// borrowed mutably. A launch checks that the memory holds at least as many elements as the
/// smallest `Len` argument (at least one where the kernel has no `Len` parameter).
#[derive(Debug)]
pub struct PtrMut<T>(PhantomData<fn() -> T>);

/// A kernel parameter `const T* data` without a length: device memory the kernel only reads, at
/// indices below the kernel's [`Len`] argument.
///
/// A type-level marker (never a value), like [`Slice`]; the argument is device memory borrowed
/// shared, checked at each launch as for [`PtrMut`].
#[derive(Debug)]
pub struct Ptr<T>(PhantomData<fn() -> T>);

/// A kernel parameter of integer type `I` that counts the elements the kernel touches through
/// its bare pointers ([`Ptr`], [`PtrMut`]): `int n` in `saxpy(int n, float a, const float* x,
/// float* y)`.
///
/// A type-level marker (never a value); the argument is a value of type `I`, passed as is. A
/// launch refuses a count larger than any bare-pointer argument's length, in elements of that
/// argument's type (a negative count is zero). Where a kernel has several `Len` parameters,
/// its bare pointers are bounded by the smallest.
#[derive(Debug)]
pub struct Len<I>(PhantomData<fn() -> I>);

/// An integer type a [`Len`] parameter may have: `i8` to `i64`, `u8` to `u64`, `isize`,
/// `usize`. Sealed.
pub trait LenType: DeviceCopy + sealed::LenType {
    /// The count as an unsigned bound (a negative count is zero).
    #[doc(hidden)]
    fn bound(self) -> u64;
}

macro_rules! len_types {
    ($($t:ty)*) => {$(
        impl sealed::LenType for $t {}
        impl LenType for $t {
            #[inline(always)]
            fn bound(self) -> u64 {
                u64::try_from(self).unwrap_or(0)
            }
        }
    )*};
}
len_types!(i8 i16 i32 i64 isize u8 u16 u32 u64 usize);

/// A kernel parameter `cudaGraphConditionalHandle`: a condition of the graph the kernel node
/// belongs to, which the kernel may set with `cudaGraphSetConditional`.
///
/// A type-level marker (never a value), like [`Slice`]; the argument is a
/// [`Condition`] of the graph being built or captured, or of a graph
/// it is a body of (another graph's is refused with
/// [`ErrorKind::WrongGraph`]). Only launches into a graph take it. A kernel declared with such a
/// parameter also claims, in its declaration's `unsafe`, that it calls
/// `cudaGraphSetConditional` on it from at most one thread per launch (CUDA leaves racing calls
/// undefined); that nodes using one condition run one after the other is checked where the
/// graph is built (see [`Condition`]).
#[derive(Debug)]
pub struct ConditionHandle(());

/// A kernel parameter `cudaGraphExec_t`: an executable graph that the kernel may launch from the
/// device (`cudaGraphLaunch` into `cudaStreamGraphFireAndForget`, `cudaStreamGraphTailLaunch` or
/// `cudaStreamGraphFireAndForgetAsSibling`).
///
/// A type-level marker (never a value), like [`Slice`]; the argument is a [`LaunchableGraph`]
/// of the graph being built or captured (only launches into a graph take it, as CUDA launches
/// device graphs only from kernels of a graph), bound there from a
/// [`DeviceGraphExec`](crate::DeviceGraphExec), which says what is guaranteed. The
/// declaration's `unsafe` claims nothing more for it than for a value: whatever the kernel
/// launches it with, CUDA reports a misuse (a launch into another stream, a second launch
/// while one runs) as the call's status.
#[derive(Debug)]
pub struct DeviceGraphHandle(());

/// The most C parameters a kernel of this module may have (12 parameters, each of at most two
/// C parameters).
const MAX_C_PARAMS: usize = 24;

mod sealed {
    pub trait Param {}
    pub trait Params {}
    pub trait Mode {}
    pub trait Arg<P, M> {}
    pub trait Args<P, M> {}
    pub trait LenType {}
}

/// The argument pointers of one launch (`void* args[]`), on the stack.
#[doc(hidden)]
#[derive(Debug)]
pub struct ArgPtrs {
    ptrs: [*mut c_void; MAX_C_PARAMS],
    len: usize,
}

impl ArgPtrs {
    fn new() -> ArgPtrs {
        ArgPtrs {
            ptrs: [std::ptr::null_mut(); MAX_C_PARAMS],
            len: 0,
        }
    }

    /// Appends the address of one C argument (a tuple has at most 12 parameters of at most two
    /// C parameters each, so this never overflows).
    fn push<V>(&mut self, value: &mut V) {
        self.ptrs[self.len] = std::ptr::from_mut(value).cast();
        self.len += 1;
    }
}

/// The two C arguments of a [`Slice`] or [`SliceMut`] parameter.
#[doc(hidden)]
#[derive(Debug)]
pub struct RawSlice<P> {
    ptr: P,
    len: usize,
}

impl<P: Copy> Clone for RawSlice<P> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<P: Copy> Copy for RawSlice<P> {}

/// One parameter type of a kernel: [`SliceMut<T>`], [`Slice<T>`] or a [`DeviceCopy`] value.
/// Sealed.
pub trait KernelParam: sealed::Param + 'static {
    #[doc(hidden)]
    type Raw: Copy;
    #[doc(hidden)]
    fn c_sizes(out: &mut Vec<usize>);
    #[doc(hidden)]
    fn push(raw: &mut Self::Raw, out: &mut ArgPtrs);
}

/// What one argument of a launch says about the bounds of the kernel's bare pointers.
#[doc(hidden)]
#[derive(Debug, Clone, Copy)]
pub enum Extent {
    /// Nothing: a value, or memory that carries its own length.
    None,
    /// A [`Len`] argument: the kernel touches bare pointers below this index.
    Count(u64),
    /// A [`Ptr`] or [`PtrMut`] argument holding this many elements.
    Elements(usize),
}

/// The bare-pointer check of one launch: every `Ptr`/`PtrMut` argument holds at least as many
/// elements as the smallest `Len` argument, or at least one where there is none.
#[derive(Debug)]
struct Extents {
    count: Option<u64>,
    /// The shortest bare-pointer argument: its parameter index and its length.
    shortest: Option<(usize, usize)>,
    index: usize,
}

impl Extents {
    #[inline(always)]
    fn new() -> Extents {
        Extents {
            count: None,
            shortest: None,
            index: 0,
        }
    }

    #[inline(always)]
    fn add(&mut self, extent: Extent) {
        match extent {
            Extent::None => {}
            Extent::Count(n) => self.count = Some(self.count.map_or(n, |c| c.min(n))),
            Extent::Elements(len) => {
                if self.shortest.is_none_or(|(_, shortest)| len < shortest) {
                    self.shortest = Some((self.index, len));
                }
            }
        }
        self.index += 1;
    }

    #[inline(always)]
    fn check(&self) -> Result<()> {
        let Some((param, len)) = self.shortest else {
            return Ok(());
        };
        let needed = self.count.unwrap_or(1);
        if (len as u64) < needed {
            return Err(Error::new(
                ErrorKind::PointerTooShort { param, len, needed },
                "the launch's bare-pointer check",
            ));
        }
        Ok(())
    }
}

impl<T: DeviceCopy> sealed::Param for SliceMut<T> {}
impl<T: DeviceCopy> KernelParam for SliceMut<T> {
    type Raw = RawSlice<*mut T>;
    fn c_sizes(out: &mut Vec<usize>) {
        out.extend([size_of::<*mut T>(), size_of::<usize>()]);
    }
    fn push(raw: &mut Self::Raw, out: &mut ArgPtrs) {
        out.push(&mut raw.ptr);
        out.push(&mut raw.len);
    }
}

impl<T: DeviceCopy> sealed::Param for Slice<T> {}
impl<T: DeviceCopy> KernelParam for Slice<T> {
    type Raw = RawSlice<*const T>;
    fn c_sizes(out: &mut Vec<usize>) {
        out.extend([size_of::<*const T>(), size_of::<usize>()]);
    }
    fn push(raw: &mut Self::Raw, out: &mut ArgPtrs) {
        out.push(&mut raw.ptr);
        out.push(&mut raw.len);
    }
}

impl<T: DeviceCopy> sealed::Param for PtrMut<T> {}
impl<T: DeviceCopy> KernelParam for PtrMut<T> {
    type Raw = *mut T;
    fn c_sizes(out: &mut Vec<usize>) {
        out.push(size_of::<*mut T>());
    }
    fn push(raw: &mut Self::Raw, out: &mut ArgPtrs) {
        out.push(raw);
    }
}

impl<T: DeviceCopy> sealed::Param for Ptr<T> {}
impl<T: DeviceCopy> KernelParam for Ptr<T> {
    type Raw = *const T;
    fn c_sizes(out: &mut Vec<usize>) {
        out.push(size_of::<*const T>());
    }
    fn push(raw: &mut Self::Raw, out: &mut ArgPtrs) {
        out.push(raw);
    }
}

impl<I: LenType> sealed::Param for Len<I> {}
impl<I: LenType> KernelParam for Len<I> {
    type Raw = I;
    fn c_sizes(out: &mut Vec<usize>) {
        out.push(size_of::<I>());
    }
    fn push(raw: &mut I, out: &mut ArgPtrs) {
        out.push(raw);
    }
}

impl<T: DeviceCopy> sealed::Param for T {}
impl<T: DeviceCopy> KernelParam for T {
    type Raw = T;
    fn c_sizes(out: &mut Vec<usize>) {
        out.push(size_of::<T>());
    }
    fn push(raw: &mut T, out: &mut ArgPtrs) {
        out.push(raw);
    }
}

impl sealed::Param for ConditionHandle {}
impl KernelParam for ConditionHandle {
    type Raw = raw::RawConditionalHandle;
    fn c_sizes(out: &mut Vec<usize>) {
        out.push(size_of::<raw::RawConditionalHandle>());
    }
    fn push(raw: &mut Self::Raw, out: &mut ArgPtrs) {
        out.push(raw);
    }
}

impl sealed::Param for DeviceGraphHandle {}
impl KernelParam for DeviceGraphHandle {
    type Raw = raw::RawGraphExec;
    fn c_sizes(out: &mut Vec<usize>) {
        out.push(size_of::<raw::RawGraphExec>());
    }
    fn push(raw: &mut Self::Raw, out: &mut ArgPtrs) {
        out.push(raw);
    }
}

/// A kernel's parameter list: a tuple of up to 12 [`KernelParam`]s. Sealed.
pub trait KernelParams: sealed::Params + 'static {
    /// The sizes in bytes of the C parameters this list stands for, in order.
    fn c_param_sizes() -> Vec<usize>;
}

/// Where a launch goes: on a stream ([`OnStream`]) or into a graph being built
/// ([`InGraph`]). Sealed.
pub trait LaunchMode: sealed::Mode {
    #[doc(hidden)]
    type On<'s>: Copy;
}

/// Launches queued on a stream, ordered by the tracking of device memory.
#[derive(Debug)]
pub enum OnStream {}
impl sealed::Mode for OnStream {}
impl LaunchMode for OnStream {
    type On<'s> = StreamRef<'s>;
}

/// Launches that become kernel nodes of the graph branded `'c` (a [`Capture`] or a graph
/// builder), whose arguments are memory bound into that graph.
#[derive(Debug)]
pub struct InGraph<'c>(PhantomData<fn(&'c ()) -> &'c ()>);
impl sealed::Mode for InGraph<'_> {}
impl LaunchMode for InGraph<'_> {
    type On<'s> = &'s GraphSite<'s>;
}

/// A value that may be passed for a parameter `P` of a launch in mode `M`. Sealed: the
/// implementations are the ones listed here.
pub trait KernelArg<P: KernelParam, M: LaunchMode>: sealed::Arg<P, M> + Sized {
    /// Orders the use of the argument on `on`, then runs `f` with its raw value (the launch).
    #[doc(hidden)]
    fn bind<R>(self, on: M::On<'_>, f: impl FnOnce(P::Raw) -> Result<R>) -> Result<R>;

    /// What the argument contributes to the bare-pointer check, made before any argument is
    /// bound (nothing, for most kinds).
    #[doc(hidden)]
    #[inline(always)]
    fn extent(&self) -> Extent {
        Extent::None
    }
}

/// The argument tuple of a launch with parameter list `P` in mode `M`. Sealed.
pub trait KernelArgs<P: KernelParams, M: LaunchMode>: sealed::Args<P, M> + Sized {
    /// Binds every argument (ordering its memory), then runs `f` with the argument pointers.
    #[doc(hidden)]
    fn bind_all(
        self,
        on: M::On<'_>,
        f: impl FnOnce(&mut [*mut c_void]) -> Result<()>,
    ) -> Result<()>;
}

// Values passed by value.
impl<T: DeviceCopy, M: LaunchMode> sealed::Arg<T, M> for T {}
impl<T: DeviceCopy, M: LaunchMode> KernelArg<T, M> for T {
    #[inline(always)]
    fn bind<R>(self, _on: M::On<'_>, f: impl FnOnce(T) -> Result<R>) -> Result<R> {
        f(self)
    }
}

// Counts, passed by value.
impl<I: LenType, M: LaunchMode> sealed::Arg<Len<I>, M> for I {}
impl<I: LenType, M: LaunchMode> KernelArg<Len<I>, M> for I {
    #[inline(always)]
    fn bind<R>(self, _on: M::On<'_>, f: impl FnOnce(I) -> Result<R>) -> Result<R> {
        f(self)
    }

    #[inline(always)]
    fn extent(&self) -> Extent {
        Extent::Count(self.bound())
    }
}

/// A bare-pointer parameter takes what the slice parameter of the same access takes, bound the
/// same way; the kernel gets the pointer alone (the length went to the launch's check, through
/// `extent`).
macro_rules! bare_pointer_args {
    ($($Bare:ident as $Slice:ident for [$($gen:tt)*] $A:ty, $M:ty;)*) => {$(
        impl<$($gen)*> sealed::Arg<$Bare<T>, $M> for $A {}
        impl<$($gen)*> KernelArg<$Bare<T>, $M> for $A {
            #[inline(always)]
            fn bind<R>(
                self,
                on: <$M as LaunchMode>::On<'_>,
                f: impl FnOnce(<$Bare<T> as KernelParam>::Raw) -> Result<R>,
            ) -> Result<R> {
                KernelArg::<$Slice<T>, $M>::bind(self, on, |slice| f(slice.ptr))
            }

            #[inline(always)]
            fn extent(&self) -> Extent {
                Extent::Elements(self.len())
            }
        }
    )*};
}

bare_pointer_args! {
    PtrMut as SliceMut for [T: DeviceCopy, D: DeviceMemoryMut<T>] &mut D, OnStream;
    PtrMut as SliceMut for [T: DeviceCopy] DeviceViewMut<'_, T>, OnStream;
    Ptr as Slice for [T: DeviceCopy, D: DeviceMemory<T>] &D, OnStream;
    Ptr as Slice for [T: DeviceCopy, D: DeviceMemory<T>] &mut D, OnStream;
    Ptr as Slice for [T: DeviceCopy] DeviceView<'_, T>, OnStream;
    PtrMut as SliceMut for ['c, T: DeviceCopy] &CapturedMut<'c, T>, InGraph<'c>;
    Ptr as Slice for ['c, T: DeviceCopy] &CapturedMut<'c, T>, InGraph<'c>;
    Ptr as Slice for ['c, T: DeviceCopy] Captured<'c, T>, InGraph<'c>;
    Ptr as Slice for ['c, T: DeviceCopy] &Captured<'c, T>, InGraph<'c>;
}

// Device memory on a stream: borrowed for the launch, ordered by its tracker.
impl<T: DeviceCopy, D: DeviceMemoryMut<T>> sealed::Arg<SliceMut<T>, OnStream> for &mut D {}
impl<T: DeviceCopy, D: DeviceMemoryMut<T>> KernelArg<SliceMut<T>, OnStream> for &mut D {
    #[inline(always)]
    fn bind<R>(
        self,
        stream: StreamRef<'_>,
        f: impl FnOnce(RawSlice<*mut T>) -> Result<R>,
    ) -> Result<R> {
        let len = self.len();
        self.with_ptr_mut_on(stream, |ptr| f(RawSlice { ptr, len }))?
    }
}

impl<T: DeviceCopy> sealed::Arg<SliceMut<T>, OnStream> for DeviceViewMut<'_, T> {}
impl<T: DeviceCopy> KernelArg<SliceMut<T>, OnStream> for DeviceViewMut<'_, T> {
    #[inline(always)]
    fn bind<R>(
        mut self,
        stream: StreamRef<'_>,
        f: impl FnOnce(RawSlice<*mut T>) -> Result<R>,
    ) -> Result<R> {
        KernelArg::<SliceMut<T>, OnStream>::bind(&mut self, stream, f)
    }
}

impl<T: DeviceCopy, D: DeviceMemory<T>> sealed::Arg<Slice<T>, OnStream> for &D {}
impl<T: DeviceCopy, D: DeviceMemory<T>> KernelArg<Slice<T>, OnStream> for &D {
    #[inline(always)]
    fn bind<R>(
        self,
        stream: StreamRef<'_>,
        f: impl FnOnce(RawSlice<*const T>) -> Result<R>,
    ) -> Result<R> {
        let len = self.len();
        self.with_ptr_on(stream, |ptr| f(RawSlice { ptr, len }))?
    }
}

impl<T: DeviceCopy, D: DeviceMemory<T>> sealed::Arg<Slice<T>, OnStream> for &mut D {}
impl<T: DeviceCopy, D: DeviceMemory<T>> KernelArg<Slice<T>, OnStream> for &mut D {
    #[inline(always)]
    fn bind<R>(
        self,
        stream: StreamRef<'_>,
        f: impl FnOnce(RawSlice<*const T>) -> Result<R>,
    ) -> Result<R> {
        KernelArg::<Slice<T>, OnStream>::bind(&*self, stream, f)
    }
}

impl<T: DeviceCopy> sealed::Arg<Slice<T>, OnStream> for DeviceView<'_, T> {}
impl<T: DeviceCopy> KernelArg<Slice<T>, OnStream> for DeviceView<'_, T> {
    #[inline(always)]
    fn bind<R>(
        self,
        stream: StreamRef<'_>,
        f: impl FnOnce(RawSlice<*const T>) -> Result<R>,
    ) -> Result<R> {
        KernelArg::<Slice<T>, OnStream>::bind(&self, stream, f)
    }
}

// Device memory bound into a graph: ordered by the graph (its memory was waited for when it was
// bound, and is borrowed for the graph's lifetime).
impl<'c, T: DeviceCopy> sealed::Arg<SliceMut<T>, InGraph<'c>> for &CapturedMut<'c, T> {}
impl<'c, T: DeviceCopy> KernelArg<SliceMut<T>, InGraph<'c>> for &CapturedMut<'c, T> {
    fn bind<R>(
        self,
        _site: &GraphSite<'_>,
        f: impl FnOnce(RawSlice<*mut T>) -> Result<R>,
    ) -> Result<R> {
        f(RawSlice {
            ptr: self.as_mut_raw_ptr(),
            len: self.len(),
        })
    }
}

impl<'c, T: DeviceCopy> sealed::Arg<Slice<T>, InGraph<'c>> for &CapturedMut<'c, T> {}
impl<'c, T: DeviceCopy> KernelArg<Slice<T>, InGraph<'c>> for &CapturedMut<'c, T> {
    fn bind<R>(
        self,
        _site: &GraphSite<'_>,
        f: impl FnOnce(RawSlice<*const T>) -> Result<R>,
    ) -> Result<R> {
        f(RawSlice {
            ptr: self.as_mut_raw_ptr().cast_const(),
            len: self.len(),
        })
    }
}

impl<'c, T: DeviceCopy> sealed::Arg<Slice<T>, InGraph<'c>> for Captured<'c, T> {}
impl<'c, T: DeviceCopy> KernelArg<Slice<T>, InGraph<'c>> for Captured<'c, T> {
    fn bind<R>(
        self,
        _site: &GraphSite<'_>,
        f: impl FnOnce(RawSlice<*const T>) -> Result<R>,
    ) -> Result<R> {
        f(RawSlice {
            ptr: self.as_raw_ptr(),
            len: self.len(),
        })
    }
}

impl<'c, T: DeviceCopy> sealed::Arg<Slice<T>, InGraph<'c>> for &Captured<'c, T> {}
impl<'c, T: DeviceCopy> KernelArg<Slice<T>, InGraph<'c>> for &Captured<'c, T> {
    fn bind<R>(
        self,
        _site: &GraphSite<'_>,
        f: impl FnOnce(RawSlice<*const T>) -> Result<R>,
    ) -> Result<R> {
        KernelArg::<Slice<T>, InGraph<'c>>::bind(*self, _site, f)
    }
}

// Conditions, of the graph being built or of one it is a body of.
impl<'c> sealed::Arg<ConditionHandle, InGraph<'c>> for Condition<'_> {}
impl<'c> KernelArg<ConditionHandle, InGraph<'c>> for Condition<'_> {
    fn bind<R>(
        self,
        site: &GraphSite<'_>,
        f: impl FnOnce(raw::RawConditionalHandle) -> Result<R>,
    ) -> Result<R> {
        f(site.accept(&self)?)
    }
}

impl<'c> sealed::Arg<ConditionHandle, InGraph<'c>> for &Condition<'_> {}
impl<'c> KernelArg<ConditionHandle, InGraph<'c>> for &Condition<'_> {
    fn bind<R>(
        self,
        site: &GraphSite<'_>,
        f: impl FnOnce(raw::RawConditionalHandle) -> Result<R>,
    ) -> Result<R> {
        f(site.accept(self)?)
    }
}

// Executable graphs bound into the graph being built, for its kernels to launch.
impl<'c> sealed::Arg<DeviceGraphHandle, InGraph<'c>> for LaunchableGraph<'c> {}
impl<'c> KernelArg<DeviceGraphHandle, InGraph<'c>> for LaunchableGraph<'c> {
    fn bind<R>(
        self,
        _site: &GraphSite<'_>,
        f: impl FnOnce(raw::RawGraphExec) -> Result<R>,
    ) -> Result<R> {
        f(self.as_raw())
    }
}

/// Binds the arguments one inside the other (each orders its memory, then runs the rest), and
/// launches with all raw values in place.
macro_rules! bind_nested {
    ($on:ident, $f:ident; [$(($raw:ident, $P:ident))*];) => {{
        let mut ptrs = ArgPtrs::new();
        $(
            let mut $raw = $raw;
            <$P as KernelParam>::push(&mut $raw, &mut ptrs);
        )*
        let len = ptrs.len;
        $f(&mut ptrs.ptrs[..len])
    }};
    ($on:ident, $f:ident; [$($done:tt)*]; ($a:ident, $raw:ident, $P:ident) $($rest:tt)*) => {
        KernelArg::<$P, M>::bind($a, $on, move |$raw| {
            bind_nested!($on, $f; [$($done)* ($raw, $P)]; $($rest)*)
        })
    };
}

macro_rules! tuple_impls {
    ($( ($($A:ident $a:ident $raw:ident $P:ident),*) )*) => {$(
        impl<$($P: KernelParam),*> sealed::Params for ($($P,)*) {}
        impl<$($P: KernelParam),*> KernelParams for ($($P,)*) {
            fn c_param_sizes() -> Vec<usize> {
                #[allow(unused_mut)]
                let mut sizes = Vec::new();
                $( <$P as KernelParam>::c_sizes(&mut sizes); )*
                sizes
            }
        }
        impl<M: LaunchMode, $($P: KernelParam, $A: KernelArg<$P, M>),*>
            sealed::Args<($($P,)*), M> for ($($A,)*) {}
        impl<M: LaunchMode, $($P: KernelParam, $A: KernelArg<$P, M>),*>
            KernelArgs<($($P,)*), M> for ($($A,)*)
        {
            #[inline(always)]
            #[allow(unused_variables)]
            fn bind_all(
                self,
                on: M::On<'_>,
                f: impl FnOnce(&mut [*mut c_void]) -> Result<()>,
            ) -> Result<()> {
                let ($($a,)*) = self;
                // The bare-pointer check, before any memory is ordered or anything queued.
                #[allow(unused_mut)]
                let mut extents = Extents::new();
                $( extents.add(KernelArg::<$P, M>::extent(&$a)); )*
                extents.check()?;
                bind_nested!(on, f; []; $(($a, $raw, $P))*)
            }
        }
    )*};
}

tuple_impls! {
    ()
    (A0 a0 r0 P0)
    (A0 a0 r0 P0, A1 a1 r1 P1)
    (A0 a0 r0 P0, A1 a1 r1 P1, A2 a2 r2 P2)
    (A0 a0 r0 P0, A1 a1 r1 P1, A2 a2 r2 P2, A3 a3 r3 P3)
    (A0 a0 r0 P0, A1 a1 r1 P1, A2 a2 r2 P2, A3 a3 r3 P3, A4 a4 r4 P4)
    (A0 a0 r0 P0, A1 a1 r1 P1, A2 a2 r2 P2, A3 a3 r3 P3, A4 a4 r4 P4, A5 a5 r5 P5)
    (A0 a0 r0 P0, A1 a1 r1 P1, A2 a2 r2 P2, A3 a3 r3 P3, A4 a4 r4 P4, A5 a5 r5 P5,
     A6 a6 r6 P6)
    (A0 a0 r0 P0, A1 a1 r1 P1, A2 a2 r2 P2, A3 a3 r3 P3, A4 a4 r4 P4, A5 a5 r5 P5,
     A6 a6 r6 P6, A7 a7 r7 P7)
    (A0 a0 r0 P0, A1 a1 r1 P1, A2 a2 r2 P2, A3 a3 r3 P3, A4 a4 r4 P4, A5 a5 r5 P5,
     A6 a6 r6 P6, A7 a7 r7 P7, A8 a8 r8 P8)
    (A0 a0 r0 P0, A1 a1 r1 P1, A2 a2 r2 P2, A3 a3 r3 P3, A4 a4 r4 P4, A5 a5 r5 P5,
     A6 a6 r6 P6, A7 a7 r7 P7, A8 a8 r8 P8, A9 a9 r9 P9)
    (A0 a0 r0 P0, A1 a1 r1 P1, A2 a2 r2 P2, A3 a3 r3 P3, A4 a4 r4 P4, A5 a5 r5 P5,
     A6 a6 r6 P6, A7 a7 r7 P7, A8 a8 r8 P8, A9 a9 r9 P9, A10 a10 r10 P10)
    (A0 a0 r0 P0, A1 a1 r1 P1, A2 a2 r2 P2, A3 a3 r3 P3, A4 a4 r4 P4, A5 a5 r5 P5,
     A6 a6 r6 P6, A7 a7 r7 P7, A8 a8 r8 P8, A9 a9 r9 P9, A10 a10 r10 P10, A11 a11 r11 P11)
}

/// What `cudaFuncGetAttributes` says of a kernel.
pub type KernelAttributes = raw::FuncAttributes;

/// A block size that maximizes a kernel's occupancy ([`Kernel::max_potential_block_size`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BlockSizeSuggestion {
    /// Threads per block.
    pub block_size: u32,
    /// The fewest blocks that fill the device at that block size (active blocks per
    /// multiprocessor × multiprocessors).
    pub min_grid_size: u32,
}

/// A kernel with the parameter list `P` (a tuple of [`KernelParam`]s): launched with
/// [`launch`](Self::launch) on a stream, or into a graph with
/// [`Capture::launch`].
///
/// Made by the [`kernels!`](crate::kernels) macro (kernels compiled into the program),
/// [`Library::kernel`](crate::Library::kernel) (kernels loaded at run time) or
/// [`from_raw`](Self::from_raw). See the [module docs](self).
///
/// # Thread safety
/// `Send + Sync` and cheap to clone: a kernel's handle may be launched from any thread. A kernel
/// of a loaded library keeps the library loaded.
pub struct Kernel<P> {
    func: *const c_void,
    /// What keeps the code of `func` loaded (a library), if anything must.
    owner: Option<Arc<dyn Any + Send + Sync>>,
    _params: PhantomData<fn(P)>,
}

// SAFETY: the function handle is an address valid in any thread of the process (CUDA's
// runtime API is thread-safe); the owner is Send + Sync.
unsafe impl<P> Send for Kernel<P> {}
// SAFETY: as above; nothing of the handle is mutable.
unsafe impl<P> Sync for Kernel<P> {}

impl<P> Clone for Kernel<P> {
    fn clone(&self) -> Self {
        Kernel {
            func: self.func,
            owner: self.owner.clone(),
            _params: PhantomData,
        }
    }
}

impl<P> std::fmt::Debug for Kernel<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kernel")
            .field("func", &self.func)
            .field("params", &std::any::type_name::<P>())
            .field("loaded", &self.owner.is_some())
            .finish()
    }
}

impl<P: KernelParams> Kernel<P> {
    /// The typed handle of the kernel at `func`: the address of a `__global__` function of
    /// CUDA code linked into the program (its host stub, e.g. the symbol of an
    /// `extern "C" __global__` function), or a `cudaKernel_t` cast to a pointer. Checks `P`
    /// against the kernel's parameters (`cudaFuncGetParamInfo`: their number and sizes;
    /// unchecked where the driver or the runtime, before CUDA 12.4, cannot tell).
    ///
    /// # Errors
    /// [`ErrorKind::KernelSignature`] when `P` does not match the kernel's parameters; CUDA
    /// errors of the query (`cudaErrorInvalidDeviceFunction` when `func` is no kernel the
    /// runtime knows; the errors of initializing the device).
    ///
    /// # Safety
    /// `func` must be such a kernel, and the claim of the [module docs](self) must hold: the
    /// kernel's parameters are exactly those of `P`, and for every argument values of those
    /// types it accesses device memory only through its memory parameters, within their
    /// lengths (a `Slice`/`SliceMut`'s own, the smallest `Len` argument for a `Ptr`/`PtrMut`,
    /// element 0 alone where there is no `Len`), writing only through `SliceMut`s and
    /// `PtrMut`s.
    pub unsafe fn from_raw(func: *const c_void) -> Result<Kernel<P>> {
        // SAFETY: the caller's contract.
        unsafe { Self::with_owner(func, None) }
    }

    /// [`from_raw`](Self::from_raw) for a kernel of code that `owner` keeps loaded.
    ///
    /// # Safety
    /// As for `from_raw`; `func` stays valid while `owner` lives.
    pub(crate) unsafe fn with_owner(
        func: *const c_void,
        owner: Option<Arc<dyn Any + Send + Sync>>,
    ) -> Result<Kernel<P>> {
        // SAFETY: the caller's contract (a kernel known to the runtime).
        unsafe { check_signature(func, &P::c_param_sizes()) }
            .map_err(|e| e.context("Kernel::from_raw"))?;
        Ok(Kernel {
            func,
            owner,
            _params: PhantomData,
        })
    }

    /// Launches the kernel on `stream` with `config` and the arguments `args`
    /// (`cudaLaunchKernel`, or `cudaLaunchKernelExC` when `config` has attributes).
    ///
    /// Memory arguments are borrowed for the call and ordered like any other use of their
    /// bytes: after earlier conflicting uses on other streams, before later ones.
    ///
    /// # Errors
    /// [`ErrorKind::WrongDevice`] for memory of another device than the stream's (without peer
    /// access); [`ErrorKind::PointerTooShort`] for a bare-pointer argument shorter than the
    /// `Len` argument (nothing is queued); [`ErrorKind::InHostCallback`]; errors of ordering the
    /// memory; CUDA errors of the launch (`cudaErrorInvalidConfiguration`, `cudaErrorLaunchOutOfResources`, ...). Errors the
    /// kernel meets while running are reported by later synchronizing calls.
    ///
    /// # Examples
    /// See the [module docs](self).
    #[inline]
    pub fn launch<'s, A: KernelArgs<P, OnStream>>(
        &self,
        stream: impl Into<StreamRef<'s>>,
        config: LaunchConfig,
        args: A,
    ) -> Result<()> {
        let stream = stream.into();
        args.bind_all(stream, |ptrs| {
            // SAFETY: `func` is a kernel with parameters `P` (the handle's contract), and
            // `ptrs` holds one pointer per C parameter to a value of its type, alive for the
            // call; the memory arguments are borrowed and ordered on `stream` by their
            // trackers (bind_all), so they stay valid and unraced until the kernel is done.
            unsafe { launch_raw(self.func, &config, stream.as_raw(), ptrs.as_mut_ptr()) }
        })
        .map_err(|e| e.context("Kernel::launch"))
    }

    /// The kernel's address, as CUDA takes it (`const void* func`).
    pub fn as_raw(&self) -> *const c_void {
        self.func
    }

    /// The kernel's attributes on the current device (`cudaFuncGetAttributes`): registers,
    /// static shared memory, the largest block, ...
    ///
    /// # Errors
    /// CUDA errors of the query.
    pub fn attributes(&self) -> Result<KernelAttributes> {
        // SAFETY: a kernel known to the runtime (the handle's contract).
        unsafe { raw::func_get_attributes(self.func) }.map_err(|e| e.context("Kernel::attributes"))
    }

    /// Allows launches with up to `bytes` of dynamic shared memory per block
    /// (`cudaFuncSetAttribute` with `cudaFuncAttributeMaxDynamicSharedMemorySize`; needed
    /// above 48 KiB).
    ///
    /// # Errors
    /// [`ErrorKind::SizeOverflow`] above `i32::MAX`; CUDA errors (`cudaErrorInvalidValue`
    /// beyond the device's limit).
    pub fn set_max_dynamic_shared_memory_bytes(&self, bytes: usize) -> Result<()> {
        const WHAT: &str = "Kernel::set_max_dynamic_shared_memory_bytes";
        let bytes = i32::try_from(bytes).map_err(|_| Error::new(ErrorKind::SizeOverflow, WHAT))?;
        // SAFETY: a kernel known to the runtime (the handle's contract).
        unsafe { raw::func_set_max_dynamic_shared_memory(self.func, bytes) }
            .map_err(|e| e.context(WHAT))
    }

    /// How many blocks of `block_size` threads, each with `dynamic_shared_memory_bytes`, can be
    /// resident on one multiprocessor of the current device
    /// (`cudaOccupancyMaxActiveBlocksPerMultiprocessor`).
    ///
    /// # Errors
    /// [`ErrorKind::SizeOverflow`] for a block size above `i32::MAX`; CUDA errors.
    pub fn max_active_blocks_per_multiprocessor(
        &self,
        block_size: u32,
        dynamic_shared_memory_bytes: usize,
    ) -> Result<u32> {
        const WHAT: &str = "Kernel::max_active_blocks_per_multiprocessor";
        let block_size =
            i32::try_from(block_size).map_err(|_| Error::new(ErrorKind::SizeOverflow, WHAT))?;
        // SAFETY: a kernel known to the runtime (the handle's contract).
        let blocks = unsafe {
            raw::occupancy_max_active_blocks_per_multiprocessor(
                self.func,
                block_size,
                dynamic_shared_memory_bytes,
            )
        }
        .map_err(|e| e.context(WHAT))?;
        Ok(u32::try_from(blocks).unwrap_or(0))
    }

    /// The block size (a multiple of the warp size, up to the kernel's limit) that maximizes
    /// the threads resident per multiprocessor of the current device, with
    /// `dynamic_shared_memory_bytes` per block; the largest such block size on ties. What the
    /// C++ template `cudaOccupancyMaxPotentialBlockSize` computes.
    ///
    /// # Errors
    /// CUDA errors of the queries.
    pub fn max_potential_block_size(
        &self,
        dynamic_shared_memory_bytes: usize,
    ) -> Result<BlockSizeSuggestion> {
        const WARP: u32 = 32;
        let limit = u32::try_from(self.attributes()?.max_threads_per_block).unwrap_or(0);
        let multiprocessors = crate::Device::current()?.multiprocessor_count()?;
        let mut best = BlockSizeSuggestion {
            block_size: 0,
            min_grid_size: 0,
        };
        let mut best_threads = 0u64;
        let mut block_size = limit - limit % WARP;
        while block_size > 0 {
            let blocks =
                self.max_active_blocks_per_multiprocessor(block_size, dynamic_shared_memory_bytes)?;
            let threads = u64::from(blocks) * u64::from(block_size);
            if threads > best_threads {
                best_threads = threads;
                best = BlockSizeSuggestion {
                    block_size,
                    min_grid_size: blocks.saturating_mul(multiprocessors),
                };
            }
            block_size -= WARP;
        }
        Ok(best)
    }
}

/// Compares the parameter sizes `expected` with those of the compiled kernel `func`.
///
/// # Safety
/// `func` must be a kernel known to the runtime.
unsafe fn check_signature(func: *const c_void, expected: &[usize]) -> Result<()> {
    for index in 0..=expected.len() {
        // SAFETY: the caller's contract.
        let found = match unsafe { raw::func_get_param_info(func, index) } {
            Ok(info) => info.map(|(_offset, size)| size),
            // A driver that cannot tell: unchecked.
            Err(e) if e.code() == Some(raw::status::NOT_SUPPORTED) => return Ok(()),
            Err(e) => return Err(e),
        };
        let wanted = expected.get(index).copied();
        if found != wanted {
            return Err(Error::new(
                ErrorKind::KernelSignature {
                    param: index,
                    expected_bytes: wanted.unwrap_or(0),
                    found_bytes: found.unwrap_or(0),
                },
                "cudaFuncGetParamInfo",
            ));
        }
    }
    Ok(())
}

impl<'c, 'a> Capture<'c, 'a> {
    /// Captures a launch of `kernel` into the graph: a kernel node with `config` and `args`,
    /// which are values or memory bound into this capture ([`bind`](Self::bind),
    /// [`bind_mut`](Self::bind_mut)). The kernel is borrowed for the graph's lifetime (so a
    /// loaded library stays loaded while the graph exists).
    ///
    /// # Errors
    /// CUDA errors of the launch (which invalidate the capture).
    pub fn launch<P: KernelParams, A: KernelArgs<P, InGraph<'c>>>(
        &self,
        kernel: &'a Kernel<P>,
        config: LaunchConfig,
        args: A,
    ) -> Result<()> {
        let stream = self.as_raw_stream();
        let site = self.site();
        args.bind_all(&site, |ptrs| {
            // SAFETY: `kernel` has parameters `P` (its contract) and `ptrs` one pointer per C
            // parameter, alive for the call; the memory arguments are bound into this capture,
            // borrowed for 'a, the lifetime of the graph that replays the kernel; the stream is
            // capturing, so nothing runs now.
            unsafe { launch_raw(kernel.func, &config, stream, ptrs.as_mut_ptr()) }
        })
        .map_err(|e| e.context("Capture::launch"))
    }
}

impl<'b, 'a> GraphBuilder<'b, 'a> {
    /// A kernel node running `kernel` with `config` and `args` (values, or memory bound into
    /// this builder with [`bind`](Self::bind) / [`bind_mut`](Self::bind_mut)) after
    /// `dependencies` (`cudaGraphAddKernelNode`). The kernel is borrowed for the graph's
    /// lifetime.
    ///
    /// # Errors
    /// [`ErrorKind::OutOfRange`] when `config` has launch attributes (capture a launch with
    /// [`Capture::launch`] for those); CUDA errors of the call.
    pub fn kernel<P: KernelParams, A: KernelArgs<P, InGraph<'b>>>(
        &self,
        dependencies: &[Node<'b>],
        kernel: &'a Kernel<P>,
        config: LaunchConfig,
        args: A,
    ) -> Result<Node<'b>> {
        const WHAT: &str = "GraphBuilder::kernel";
        if !config.attributes.is_empty() {
            return Err(Error::new(ErrorKind::OutOfRange, WHAT));
        }
        let mut node = None;
        let site = self.site();
        args.bind_all(&site, |ptrs| {
            node = Some(
                self.add_node_using(dependencies, &site, |graph, dependencies| {
                    // SAFETY: the builder's graph, used by this thread only, and its nodes;
                    // `kernel` has parameters `P` (its contract) and `ptrs` one pointer per C
                    // parameter, alive for the call (the values are copied into the node); the
                    // memory arguments are bound into this builder, borrowed for 'a, the lifetime of
                    // the graph.
                    unsafe {
                        raw::graph_add_kernel_node(
                            graph,
                            dependencies,
                            kernel.func,
                            config.grid,
                            config.block,
                            config.shared_memory_bytes,
                            ptrs.as_mut_ptr(),
                        )
                    }
                })?,
            );
            Ok(())
        })
        .map_err(|e| e.context(WHAT))?;
        node.ok_or_else(|| Error::new(ErrorKind::OutOfRange, WHAT))
    }
}

/// Declares kernels compiled into the program (by cuda-rt-build, or any nvcc-built code linked
/// in) with their typed parameter lists, each as a function returning its
/// `&'static` [`Kernel`].
///
/// Each entry is `unsafe fn name(param: Type, ...);` where `name` is the kernel's C symbol (an
/// `extern "C" __global__` function) and each `Type` a [`KernelParam`]. The `unsafe` is the
/// declaration's claim (see [`Kernel::from_raw`]): the kernel's parameters are these, and it
/// stays within the memory it is given (for bare pointers, below the smallest [`Len`]
/// argument, or at element 0 where there is none). The generated function checks the declaration against
/// the compiled kernel on its first successful call and caches the handle.
///
/// # Examples
/// ```no_run
/// use cuda_rt::{kernels, Slice, SliceMut};
/// kernels! {
///     /// `out[i] = in[i] * k` (CUDA: `extern "C" __global__ void scale(float* out, size_t n,
///     /// const float* in, size_t in_n, float k)`).
///     pub unsafe fn scale(out: SliceMut<f32>, input: Slice<f32>, k: f32);
/// }
/// let kernel: &cuda_rt::Kernel<(SliceMut<f32>, Slice<f32>, f32)> = scale()?;
/// # Ok::<(), cuda_rt::Error>(())
/// ```
///
/// A kernel with bare pointers and a count, as written for C++ callers:
/// ```no_run
/// use cuda_rt::{kernels, DeviceBuffer, LaunchConfig, Len, Ptr, PtrMut, Stream};
/// kernels! {
///     /// `y[i] = a * x[i] + y[i]` for `i < n` (CUDA: `extern "C" __global__ void saxpy(int n,
///     /// float a, const float* x, float* y)`, which tests `i < n`).
///     pub unsafe fn saxpy(n: Len<i32>, a: f32, x: Ptr<f32>, y: PtrMut<f32>);
/// }
/// let stream = Stream::new()?;
/// let x = DeviceBuffer::from_slice(&[1.0f32; 1000])?;
/// let mut y = DeviceBuffer::from_slice(&[2.0f32; 1000])?;
/// saxpy()?.launch(&stream, LaunchConfig::for_len(1000, 256)?, (1000, 3.0, &x, &mut y))?;
/// // A count past the end of `x` is refused before anything is queued.
/// assert!(saxpy()?.launch(&stream, LaunchConfig::for_len(1001, 256)?, (1001, 3.0, &x, &mut y)).is_err());
/// # Ok::<(), cuda_rt::Error>(())
/// ```
#[macro_export]
macro_rules! kernels {
    ($(
        $(#[$meta:meta])*
        $vis:vis unsafe fn $name:ident ( $($param:ident : $ty:ty),* $(,)? );
    )*) => {$(
        $(#[$meta])*
        ///
        /// Returns the kernel's typed handle, made (and its parameters checked against the
        /// compiled kernel) on the first successful call.
        ///
        /// # Errors
        /// [`ErrorKind::KernelSignature`](cuda_rt::ErrorKind::KernelSignature) when the
        /// declaration does not match the kernel; CUDA errors of the check.
        #[allow(clippy::type_complexity)]
        $vis fn $name() -> $crate::Result<&'static $crate::Kernel<($($ty,)*)>> {
            static KERNEL: ::std::sync::OnceLock<$crate::Kernel<($($ty,)*)>> =
                ::std::sync::OnceLock::new();
            if let ::std::option::Option::Some(kernel) = KERNEL.get() {
                return ::std::result::Result::Ok(kernel);
            }
            unsafe extern "C" {
                fn $name();
            }
            // SAFETY: `$name` is the host stub of a kernel linked into the program, and its
            // parameters and behaviour are as declared: the claim the declaration's `unsafe`
            // makes.
            let kernel = unsafe {
                $crate::Kernel::from_raw($name as unsafe extern "C" fn() as *const ::core::ffi::c_void)
            }?;
            ::std::result::Result::Ok(KERNEL.get_or_init(|| kernel))
        }
    )*};
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameter_lists_expand_to_c_parameters() {
        assert_eq!(<()>::c_param_sizes(), Vec::<usize>::new());
        assert_eq!(
            <(SliceMut<u32>, Slice<f64>, u8, [u16; 3])>::c_param_sizes(),
            [8, 8, 8, 8, 1, 6]
        );
    }

    #[test]
    fn bare_pointers_and_counts_are_one_c_parameter_each() {
        assert_eq!(
            <(Len<i32>, f32, Ptr<f32>, PtrMut<u64>, Len<usize>)>::c_param_sizes(),
            [4, 4, 8, 8, 8]
        );
    }

    fn extents(args: &[Extent]) -> Result<()> {
        let mut extents = Extents::new();
        for &a in args {
            extents.add(a);
        }
        extents.check()
    }

    #[test]
    fn bare_pointers_are_checked_against_the_smallest_count() {
        use Extent::{Count, Elements, None as Value};
        // No bare pointer: nothing to check, whatever the counts.
        assert!(extents(&[Count(u64::MAX), Value]).is_ok());
        // A count up to the shortest pointer's length passes; one past it names that pointer.
        assert!(extents(&[Count(10), Value, Elements(10), Elements(12)]).is_ok());
        let e = extents(&[Count(11), Value, Elements(12), Elements(10)]).unwrap_err();
        assert_eq!(
            e.kind(),
            ErrorKind::PointerTooShort {
                param: 3,
                len: 10,
                needed: 11
            }
        );
        // Several counts: the smallest bounds the pointers.
        assert!(extents(&[Count(100), Elements(5), Count(5)]).is_ok());
        // A count of zero (or a negative one, which binds as zero) allows empty memory.
        assert!(extents(&[Count(0), Elements(0)]).is_ok());
        assert_eq!((-5i32).bound(), 0);
        assert_eq!(7u8.bound(), 7);
        assert_eq!(usize::MAX.bound(), u64::MAX);
        // Without a count a bare pointer must hold one element.
        assert!(extents(&[Elements(1)]).is_ok());
        assert_eq!(
            extents(&[Value, Elements(0)]).unwrap_err().kind(),
            ErrorKind::PointerTooShort {
                param: 1,
                len: 0,
                needed: 1
            }
        );
    }

    #[test]
    fn scalars_bind_to_pointers_of_their_values() {
        let mut seen = Vec::new();
        let site = GraphSite::new(std::ptr::null_mut(), &[]);
        KernelArgs::<(u32, u64), InGraph<'_>>::bind_all((7u32, 9u64), &site, |ptrs| {
            assert_eq!(ptrs.len(), 2);
            // SAFETY: the pointers point to a u32 and a u64 alive during this closure.
            unsafe {
                seen.push(u64::from(*ptrs[0].cast::<u32>()));
                seen.push(*ptrs[1].cast::<u64>());
            }
            Ok(())
        })
        .unwrap();
        assert_eq!(seen, [7, 9]);
    }

    #[test]
    fn configs_carry_attributes_only_when_set() {
        let plain = LaunchConfig::for_items(10, 4);
        assert!(plain.attributes.is_empty());
        let clustered = plain.with_cluster_dims((2, 1, 1)).with_cooperative(true);
        assert!(!clustered.attributes.is_empty());
        assert!(clustered.attributes.cooperative());
    }
}
