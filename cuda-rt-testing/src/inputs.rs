//! proptest strategies for host data bound for the device: lengths that hit the edges of
//! blocks and tiles, value distributions that break kernels, and [`Data`], a vector that
//! shrinks fast however long it is.
//!
//! A vector of a million elements shrunk one element at a time (as `proptest::collection::vec`
//! does) costs a GPU run per step. [`Data`] is generated from a small description instead
//! (length, [`Dist`], seed), so it shrinks by halving its length (`O(log n)` runs), then
//! toward simpler distributions, and only then, once it is short, element by element toward
//! zero.
//!
//! # Examples
//! ```
//! use cuda_rt_testing::inputs::{self, Dist};
//! use proptest::strategy::{Strategy, ValueTree};
//! use proptest::test_runner::TestRunner;
//!
//! // Lengths 0, 1, 2, 3, odd, 255/256/257 and 1023/1024/1025, and anything up to 5000.
//! let lengths = inputs::lengths(5000, &[256, 1024]);
//! let data = inputs::data::<f32>(lengths);
//! let value = data.new_tree(&mut TestRunner::deterministic()).unwrap().current();
//! assert!(value.len() <= 5000);
//!
//! // The same generator without proptest.
//! let v: Vec<i16> = inputs::generate(Dist::Sorted, 100, 7);
//! assert!(v.windows(2).all(|w| w[0] <= w[1]));
//! ```

use crate::element::Element;
use crate::random::SplitMix64;
use proptest::sample::Select;
use proptest::strategy::{BoxedStrategy, NewTree, Strategy, ValueTree};
use proptest::test_runner::TestRunner;
use std::fmt;
use std::marker::PhantomData;
use std::ops::Deref;

/// How the values of generated data are distributed.
///
/// Listed from the plainest to the most adversarial; shrinking moves toward the start of
/// [`DISTS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dist {
    /// Random bit patterns (for floats: every class of value, NaNs and infinities included,
    /// in the proportions of random bits).
    Uniform,
    /// Random values in ascending (total) order.
    Sorted,
    /// Random values in descending (total) order.
    Reversed,
    /// Four distinct random values, repeated at random: long runs of equal keys.
    FewDistinct,
    /// One random value, repeated.
    AllEqual,
    /// `0, 1, ..., p-1, 0, 1, ...` (as [`Element::from_small`]) for a random period `p` up to 300.
    Sawtooth,
    /// Mostly [`Element::specials`] (two in three elements): MIN/MAX/0 for integers; NaN
    /// payloads, ±0, ±inf, subnormals for floats; random bits for the rest.
    Specials,
}

/// Every distribution, in the order shrinking prefers.
pub const DISTS: [Dist; 7] = [
    Dist::Uniform,
    Dist::Sorted,
    Dist::Reversed,
    Dist::FewDistinct,
    Dist::AllEqual,
    Dist::Sawtooth,
    Dist::Specials,
];

/// `len` values of distribution `dist` from `seed`: the same on every machine and every run.
///
/// Except for [`Dist::Sorted`] and [`Dist::Reversed`], a shorter vector of the same seed is a
/// prefix of a longer one, so that shrinking the length keeps the data.
pub fn generate<T: Element>(dist: Dist, len: usize, seed: u64) -> Vec<T> {
    let mut rng = SplitMix64::new(seed);
    let mut values: Vec<T> = match dist {
        Dist::Uniform | Dist::Sorted | Dist::Reversed => {
            (0..len).map(|_| T::from_bits64(rng.next_u64())).collect()
        }
        Dist::AllEqual => vec![T::from_bits64(rng.next_u64()); len],
        Dist::FewDistinct => {
            let pool: Vec<T> = (0..4).map(|_| T::from_bits64(rng.next_u64())).collect();
            (0..len)
                .map(|_| pool[(rng.next_u64() % 4) as usize])
                .collect()
        }
        Dist::Sawtooth => {
            let period = 1 + rng.next_u64() % 300;
            (0..len as u64)
                .map(|i| T::from_small((i % period) as u32))
                .collect()
        }
        Dist::Specials => {
            let specials = T::specials();
            (0..len)
                .map(|_| {
                    let r = rng.next_u64();
                    if !specials.is_empty() && r % 3 != 0 {
                        specials[(r >> 8) as usize % specials.len()]
                    } else {
                        T::from_bits64(rng.next_u64())
                    }
                })
                .collect()
        }
    };
    match dist {
        Dist::Sorted => values.sort_by(T::total_order),
        Dist::Reversed => values.sort_by(|a, b| b.total_order(a)),
        _ => {}
    }
    values
}

/// Lengths from 0 to `max`, with the ones that break kernels made likely: 0, 1, 2, 3, small
/// odd lengths, and each of `around` (block sizes, tile sizes, ...) with its neighbours −1 and
/// +1. Every length is at most `max`, except the `around` sizes themselves and their
/// neighbours, which are always included. Shrinks toward 0.
///
/// # Examples
/// ```
/// // Block size 256, tile 4096: 255, 256, 257, 4095, 4096, 4097 are likely.
/// let lengths = cuda_rt_testing::inputs::lengths(100_000, &[256, 4096]);
/// # let _ = lengths;
/// ```
pub fn lengths(max: usize, around: &[usize]) -> BoxedStrategy<usize> {
    let mut special: Vec<usize> = vec![0, 1, 2, 3];
    for &size in around {
        special.extend([size.saturating_sub(1), size, size.saturating_add(1)]);
    }
    special.sort_unstable();
    special.dedup();
    let odd_max = max.clamp(1, 255) / 2;
    proptest::prop_oneof![
        3 => proptest::sample::select(special),
        1 => (0..=odd_max).prop_map(|h| 2 * h + 1),
        3 => 0..=max,
    ]
    .boxed()
}

/// Generated data: the values, and the description they were generated from (length,
/// [`Dist`], seed), which is what its `Debug` prints for long data instead of every value.
///
/// Dereferences to `[T]`.
#[derive(Clone, PartialEq)]
pub struct Data<T> {
    values: Vec<T>,
    dist: Dist,
    seed: u64,
    /// Whether shrinking changed elements after generation.
    edited: bool,
}

impl<T> Data<T> {
    /// Data with these values (described as [`Dist::Uniform`] of seed 0, and printed in full
    /// when short): for explicit examples.
    pub fn from_vec(values: Vec<T>) -> Data<T> {
        Data {
            values,
            dist: Dist::Uniform,
            seed: 0,
            edited: true,
        }
    }

    /// The distribution the data was generated from.
    pub fn dist(&self) -> Dist {
        self.dist
    }

    /// The seed the data was generated from.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The values.
    pub fn into_vec(self) -> Vec<T> {
        self.values
    }
}

impl<T: Element> Data<T> {
    /// `len` values of `dist` from `seed` ([`generate`]).
    pub fn generate(dist: Dist, len: usize, seed: u64) -> Data<T> {
        Data {
            values: generate(dist, len, seed),
            dist,
            seed,
            edited: false,
        }
    }
}

impl<T> Deref for Data<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        &self.values
    }
}

impl<T> AsRef<[T]> for Data<T> {
    fn as_ref(&self) -> &[T] {
        &self.values
    }
}

/// Values printed in full up to this many; longer data prints its head and tail.
const PRINTED_IN_FULL: usize = 32;

impl<T: fmt::Debug> fmt::Debug for Data<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.values.len();
        write!(f, "Data {{ len: {n}, ")?;
        if self.edited {
            write!(f, "shrunk element-wise, ")?;
        } else {
            write!(f, "dist: {:?}, seed: {:#x}, ", self.dist, self.seed)?;
        }
        if n <= PRINTED_IN_FULL {
            write!(f, "values: {:?} }}", self.values)
        } else {
            let head = &self.values[..8];
            let tail = &self.values[n - 4..];
            write!(f, "values: {head:?} ... {tail:?} }}")
        }
    }
}

/// The strategy of [`data`] and [`data_with`].
#[derive(Debug, Clone)]
pub struct DataStrategy<T> {
    lengths: BoxedStrategy<usize>,
    dists: Vec<Dist>,
    _element: PhantomData<fn() -> T>,
}

/// [`Data`] of every [`Dist`], with lengths from `lengths` (see [`lengths`]).
pub fn data<T: Element>(lengths: impl Strategy<Value = usize> + 'static) -> DataStrategy<T> {
    data_with(lengths, &DISTS)
}

/// [`Data`] of the distributions `dists` (in the order shrinking prefers), with lengths from
/// `lengths`.
///
/// # Panics
/// If `dists` is empty.
pub fn data_with<T: Element>(
    lengths: impl Strategy<Value = usize> + 'static,
    dists: &[Dist],
) -> DataStrategy<T> {
    assert!(!dists.is_empty(), "data_with: no distribution given");
    DataStrategy {
        lengths: lengths.boxed(),
        dists: dists.to_vec(),
        _element: PhantomData,
    }
}

impl<T: Element> Strategy for DataStrategy<T> {
    type Tree = DataTree<T>;
    type Value = Data<T>;

    fn new_tree(&self, runner: &mut TestRunner) -> NewTree<Self> {
        let len = self.lengths.new_tree(runner)?;
        let dist = proptest::sample::select(self.dists.clone()).new_tree(runner)?;
        let seed = proptest::arbitrary::any::<u64>()
            .new_tree(runner)?
            .current();
        Ok(DataTree {
            len,
            dist,
            seed,
            phase: Phase::Length,
            last: Moved::Nothing,
            elements: Vec::new(),
        })
    }
}

/// Elements are shrunk one by one only in data at most this long (each element costs about
/// as many runs as it has bits).
const ELEMENT_SHRINK_MAX_LEN: usize = 32;

/// Which part of the description a [`DataTree`] is shrinking.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Length,
    Dist,
    Element(usize),
    Done,
}

/// What the last successful `simplify` or `complicate` moved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Moved {
    Nothing,
    Length,
    Dist,
    Element(usize),
}

/// The value tree of [`DataStrategy`]: the length first (as its strategy shrinks: halving for
/// ranges), then the distribution, then, for short data, each element toward zero.
pub struct DataTree<T: Element> {
    len: Box<dyn ValueTree<Value = usize>>,
    dist: <Select<Dist> as Strategy>::Tree,
    seed: u64,
    phase: Phase,
    last: Moved,
    elements: Vec<MagnitudeSearch<T>>,
}

impl<T: Element> fmt::Debug for DataTree<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DataTree")
            .field("len", &self.len.current())
            .field("seed", &self.seed)
            .field("phase", &self.phase)
            .finish_non_exhaustive()
    }
}

impl<T: Element> DataTree<T> {
    fn generated(&self) -> Data<T> {
        Data::generate(self.dist.current(), self.len.current(), self.seed)
    }
}

impl<T: Element> ValueTree for DataTree<T> {
    type Value = Data<T>;

    fn current(&self) -> Data<T> {
        if self.elements.is_empty() {
            return self.generated();
        }
        Data {
            values: self.elements.iter().map(MagnitudeSearch::current).collect(),
            dist: self.dist.current(),
            seed: self.seed,
            edited: true,
        }
    }

    fn simplify(&mut self) -> bool {
        loop {
            match self.phase {
                Phase::Length => {
                    if self.len.simplify() {
                        self.last = Moved::Length;
                        return true;
                    }
                    self.phase = Phase::Dist;
                }
                Phase::Dist => {
                    if self.dist.simplify() {
                        self.last = Moved::Dist;
                        return true;
                    }
                    let data = self.generated();
                    if data.len() <= ELEMENT_SHRINK_MAX_LEN {
                        self.elements = data.iter().map(|&x| MagnitudeSearch::new(x)).collect();
                        self.phase = Phase::Element(0);
                    } else {
                        self.phase = Phase::Done;
                    }
                }
                Phase::Element(i) => {
                    let Some(element) = self.elements.get_mut(i) else {
                        self.phase = Phase::Done;
                        continue;
                    };
                    if element.simplify() {
                        self.last = Moved::Element(i);
                        return true;
                    }
                    self.phase = Phase::Element(i + 1);
                }
                Phase::Done => return false,
            }
        }
    }

    fn complicate(&mut self) -> bool {
        match self.last {
            Moved::Nothing => false,
            Moved::Length => self.len.complicate(),
            Moved::Dist => self.dist.complicate(),
            Moved::Element(i) => self.elements[i].complicate(),
        }
    }
}

/// Binary search of an element's magnitude toward zero, keeping its sign: the smallest
/// magnitude that still fails, as proptest's integer shrinking finds it.
#[derive(Debug, Clone, Copy)]
struct MagnitudeSearch<T> {
    negative: bool,
    lo: u128,
    curr: u128,
    hi: u128,
    _element: PhantomData<T>,
}

impl<T: Element> MagnitudeSearch<T> {
    fn new(start: T) -> Self {
        let (negative, magnitude) = start.to_magnitude();
        MagnitudeSearch {
            negative,
            lo: 0,
            curr: magnitude,
            hi: magnitude,
            _element: PhantomData,
        }
    }

    fn current(&self) -> T {
        T::from_magnitude(self.negative, self.curr)
    }

    /// Moves to the middle of `lo..=hi`; false when that is where it already is.
    fn reposition(&mut self) -> bool {
        let middle = self.lo + (self.hi - self.lo) / 2;
        if middle == self.curr {
            false
        } else {
            self.curr = middle;
            true
        }
    }

    fn simplify(&mut self) -> bool {
        if self.hi <= self.lo {
            return false;
        }
        self.hi = self.curr;
        self.reposition()
    }

    fn complicate(&mut self) -> bool {
        if self.hi <= self.lo {
            return false;
        }
        self.lo = self.curr + 1;
        self.reposition()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::strategy::Just;

    #[test]
    fn generation_is_reproducible_and_prefix_stable() {
        for dist in DISTS {
            let a: Vec<u32> = generate(dist, 500, 11);
            assert_eq!(a, generate::<u32>(dist, 500, 11), "{dist:?}");
            if !matches!(dist, Dist::Sorted | Dist::Reversed) {
                assert_eq!(&a[..100], &generate::<u32>(dist, 100, 11)[..], "{dist:?}");
            }
        }
        let sorted: Vec<f64> = generate(Dist::Reversed, 1000, 3);
        assert!(sorted.windows(2).all(|w| w[0].total_order(&w[1]).is_ge()));
        let specials: Vec<f32> = generate(Dist::Specials, 3000, 5);
        assert!(specials.iter().any(|x| x.is_nan()));
        assert!(specials.iter().any(|x| x.to_bits() == 0x8000_0000));
        assert!(specials.iter().any(|x| x.is_subnormal()));
    }

    #[test]
    fn lengths_include_the_edges() {
        let strategy = lengths(10_000, &[256, 4096]);
        let mut runner = TestRunner::deterministic();
        let seen: Vec<usize> = (0..2000)
            .map(|_| strategy.new_tree(&mut runner).unwrap().current())
            .collect();
        for edge in [0, 1, 255, 256, 257, 4095, 4096, 4097] {
            assert!(seen.contains(&edge), "{edge} never generated");
        }
        assert!(seen.iter().all(|&n| n <= 10_000));
    }

    /// Shrinks `tree` as the runner does against `fails`; returns the smallest failing value.
    fn shrink<T: ValueTree>(mut tree: T, fails: impl Fn(&T::Value) -> bool) -> T::Value {
        assert!(fails(&tree.current()));
        let mut minimal = tree.current();
        while tree.simplify() {
            loop {
                let value = tree.current();
                if fails(&value) {
                    minimal = value;
                    break;
                }
                if !tree.complicate() {
                    return minimal;
                }
            }
        }
        minimal
    }

    #[test]
    fn data_shrinks_by_length_then_elements() {
        let strategy = data::<u32>(Just(100_000usize));
        let mut runner = TestRunner::deterministic();
        let tree = strategy.new_tree(&mut runner).unwrap();
        // Fails whenever it has an element above 1000: a fixed length cannot shrink, and
        // 100 000 elements are too many to shrink one by one.
        let minimal = shrink(tree, |d| d.iter().any(|&x| x > 1000));
        assert_eq!(minimal.len(), 100_000);

        let strategy = data::<i32>(0usize..100_000);
        let tree = loop {
            let tree = strategy.new_tree(&mut runner).unwrap();
            if tree.current().len() > 20 && tree.current()[20].unsigned_abs() > 1000 {
                break tree;
            }
        };
        // Fails when element 20 has a magnitude above 1000: the smallest such data has 21
        // elements, zeros but for element 20, whose magnitude is 1001.
        let minimal = shrink(tree, |d| d.len() > 20 && d[20].unsigned_abs() > 1000);
        assert_eq!(minimal.len(), 21, "{minimal:?}");
        assert_eq!(minimal[20].unsigned_abs(), 1001, "{minimal:?}");
        assert!(minimal[..20].iter().all(|&x| x == 0), "{minimal:?}");
    }

    #[test]
    fn long_data_prints_its_description() {
        let d: Data<u8> = Data::generate(Dist::Sawtooth, 1000, 0x2a);
        let text = format!("{d:?}");
        assert!(
            text.starts_with("Data { len: 1000, dist: Sawtooth, seed: 0x2a"),
            "{text}"
        );
        assert!(text.len() < 200, "{text}");
    }
}
