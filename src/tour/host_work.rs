//! The CPU work the host thread does while it waits for the GPU, so the tour can say how much
//! of the wait was put to use.

use std::time::{Duration, Instant};

/// Elements checksummed by one unit of work (16 KiB of `u32`, a few microseconds: short
/// enough that the host notices the GPU finishing within a few microseconds).
pub const ELEMENTS_PER_UNIT: usize = 4096;

/// A stand-in for useful host work: checksums over `data`, one [`ELEMENTS_PER_UNIT`] slice per
/// unit, round and round. It counts its units and the time spent inside them.
#[derive(Debug)]
pub struct HostWork<'a> {
    data: &'a [u32],
    position: usize,
    units: u64,
    working: Duration,
    checksum: u64,
}

impl<'a> HostWork<'a> {
    /// Work over `data` (which may be empty: then each unit checksums nothing).
    pub fn new(data: &'a [u32]) -> HostWork<'a> {
        HostWork {
            data,
            position: 0,
            units: 0,
            working: Duration::ZERO,
            checksum: 0xcbf2_9ce4_8422_2325,
        }
    }

    /// Does one unit of work.
    pub fn unit(&mut self) {
        let started = Instant::now();
        let end = (self.position + ELEMENTS_PER_UNIT).min(self.data.len());
        let mut hash = self.checksum;
        for &x in &self.data[self.position..end] {
            hash = (hash ^ u64::from(x)).wrapping_mul(0x0000_0100_0000_01b3);
        }
        self.checksum = std::hint::black_box(hash);
        self.position = if end >= self.data.len() { 0 } else { end };
        self.units += 1;
        self.working += started.elapsed();
    }

    /// Units done so far.
    pub fn units(&self) -> u64 {
        self.units
    }

    /// Time spent inside units so far.
    pub fn working(&self) -> Duration {
        self.working
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_walk_the_data_and_wrap() {
        let data = vec![1u32; ELEMENTS_PER_UNIT + 10];
        let mut work = HostWork::new(&data);
        work.unit();
        work.unit();
        assert_eq!(work.position, 0);
        work.unit();
        assert_eq!(work.units(), 3);
        assert!(work.working() > Duration::ZERO);
        HostWork::new(&[]).unit();
    }
}
