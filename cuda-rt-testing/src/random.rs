//! Reproducible pseudo-random test inputs (SplitMix64; no dependency needed).

/// SplitMix64 (Steele, Lea, Flood, "Fast splittable pseudorandom number generators", OOPSLA
/// 2014): a 64-bit state, good enough for test inputs, and the same on every machine.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Fills `out` with random `u32`s.
    pub fn fill_u32(&mut self, out: &mut [u32]) {
        for pair in out.chunks_mut(2) {
            let bits = self.next_u64();
            pair[0] = bits as u32;
            if let Some(second) = pair.get_mut(1) {
                *second = (bits >> 32) as u32;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reproducible_and_spread() {
        let (mut a, mut b) = (vec![0u32; 1001], vec![0u32; 1001]);
        SplitMix64::new(7).fill_u32(&mut a);
        SplitMix64::new(7).fill_u32(&mut b);
        assert_eq!(a, b);
        let mut sorted = a.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert!(sorted.len() > 990);
    }
}
