//! How a job is cut: how many streams, how long a chunk, and which elements each chunk covers.

use std::ops::Range;

/// Smallest default chunk: below about 1 MiB the fixed cost of each copy and launch (a few
/// microseconds) becomes a noticeable share of the copy itself.
pub const MIN_DEFAULT_CHUNK_BYTES: usize = 1 << 20;
/// Largest default chunk: beyond this, fill and drain (the first copy in and the last copy out,
/// which overlap nothing) grow without making the steady state any faster.
pub const MAX_DEFAULT_CHUNK_BYTES: usize = 64 << 20;
/// Default chunks per stream: enough that fill and drain are a small share of the job.
pub const DEFAULT_CHUNKS_PER_STREAM: usize = 4;

/// The shape of a pipelined job: `streams` streams, chunks of `chunk_len` elements (the last
/// one may be shorter).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    /// Streams the chunks are spread over, round-robin (at least 1).
    pub streams: usize,
    /// Elements per chunk (at least 1).
    pub chunk_len: usize,
}

impl Plan {
    /// Default streams for a device with `copy_engines` copy engines (`asyncEngineCount`): with
    /// two or more, a copy in, a kernel and a copy out can run at once, so three streams keep
    /// them all busy and a fourth absorbs jitter; with one, copies overlap kernels but not each
    /// other (2 streams); with none, nothing overlaps (1).
    pub fn default_streams(copy_engines: i32) -> usize {
        match copy_engines {
            i32::MIN..=0 => 1,
            1 => 2,
            _ => 4,
        }
    }

    /// The default plan for `len` elements of `element_bytes` bytes each on a device with
    /// `copy_engines` copy engines: [`Plan::default_streams`], and chunks of about
    /// `len / (streams × 4)` elements, clamped to 1–64 MiB.
    pub fn for_device(len: usize, element_bytes: usize, copy_engines: i32) -> Plan {
        let streams = Plan::default_streams(copy_engines);
        let element_bytes = element_bytes.max(1);
        let target_bytes = (len * element_bytes)
            .div_ceil(streams * DEFAULT_CHUNKS_PER_STREAM)
            .clamp(MIN_DEFAULT_CHUNK_BYTES, MAX_DEFAULT_CHUNK_BYTES);
        Plan {
            streams,
            chunk_len: (target_bytes / element_bytes).clamp(1, len.max(1)),
        }
    }

    /// A plan cutting `len` elements into `chunks` chunks of equal length (the last one
    /// shorter if `chunks` does not divide `len`) over `streams` streams.
    pub fn with_chunks(len: usize, chunks: usize, streams: usize) -> Plan {
        Plan {
            streams: streams.max(1),
            chunk_len: len.div_ceil(chunks.max(1)).max(1),
        }
    }

    /// The number of chunks of a job of `len` elements.
    pub fn chunk_count(&self, len: usize) -> usize {
        len.div_ceil(self.chunk_len)
    }

    /// The element ranges of the chunks of a job of `len` elements, in order.
    pub fn chunks(&self, len: usize) -> impl Iterator<Item = Range<usize>> + '_ {
        let chunk_len = self.chunk_len;
        (0..self.chunk_count(len)).map(move |i| i * chunk_len..((i + 1) * chunk_len).min(len))
    }

    /// The stream (0-based) that carries chunk `chunk`.
    pub fn stream_of(&self, chunk: usize) -> usize {
        chunk % self.streams
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_for_256_mib_of_u32_on_an_h100_is_16_chunks_over_4_streams() {
        let plan = Plan::for_device(64 << 20, 4, 3);
        assert_eq!(plan.streams, 4);
        assert_eq!(plan.chunk_count(64 << 20), 16);
    }

    #[test]
    fn small_jobs_get_one_chunk_and_big_ones_64_mib_chunks() {
        assert_eq!(Plan::for_device(1000, 4, 2).chunk_count(1000), 1);
        assert_eq!(Plan::for_device(1 << 30, 4, 2).chunk_len * 4, 64 << 20);
        assert_eq!(Plan::for_device(0, 4, 2).chunk_count(0), 0);
        assert_eq!(Plan::for_device(100, 4, 0).streams, 1);
    }

    #[test]
    fn chunks_cover_the_job_exactly() {
        for (len, chunks) in [(10, 3), (9, 3), (1, 5), (0, 4), (100, 1)] {
            let plan = Plan::with_chunks(len, chunks, 2);
            let ranges: Vec<_> = plan.chunks(len).collect();
            assert!(ranges.len() <= chunks.max(1));
            let covered: Vec<usize> = ranges.iter().flat_map(|r| r.clone()).collect();
            assert_eq!(
                covered,
                (0..len).collect::<Vec<_>>(),
                "len {len} chunks {chunks}"
            );
        }
    }
}
