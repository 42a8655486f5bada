//! Java's `Utils.murmur2`: the hash the default partitioner applies to a record's key.

use pyo3::prelude::*;

use crate::guarded;

/// Java's `Utils.murmur2` of `data` (seed 0x9747b28c), signed as Java returns it.
pub fn murmur2_java(data: &[u8]) -> i32 {
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    let mut h: u32 = 0x9747_b28c ^ data.len() as u32;
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        let mut k = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M) ^ k;
    }
    let tail = chunks.remainder();
    if tail.len() == 3 {
        h ^= u32::from(tail[2]) << 16;
    }
    if tail.len() >= 2 {
        h ^= u32::from(tail[1]) << 8;
    }
    if !tail.is_empty() {
        h ^= u32::from(tail[0]);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// The partition of a keyed record: Java's `Utils.toPositive(murmur2(key)) % numPartitions`.
pub fn partition_for_key(key: &[u8], num_partitions: u32) -> u32 {
    (murmur2_java(key) as u32 & 0x7fff_ffff) % num_partitions
}

/// Java's `Utils.murmur2` of `data`, signed as Java returns it.
#[pyfunction]
pub fn murmur2(data: &[u8]) -> PyResult<i32> {
    guarded("murmur2", || Ok(murmur2_java(data)))
}

/// The partition Java's default partitioner gives a serialized key (`BuiltInPartitioner.partitionForKey`).
#[pyfunction(name = "partition_for_key")]
pub fn py_partition_for_key(key: &[u8], num_partitions: i64) -> PyResult<i64> {
    guarded("partition_for_key", || match u32::try_from(num_partitions) {
        Ok(n) if n > 0 => Ok(i64::from(partition_for_key(key, n))),
        _ => Err(pyo3::exceptions::PyValueError::new_err(format!("num_partitions must be >= 1, got {num_partitions}"))),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_vectors() {
        // Kafka's UtilsTest.testMurmur2.
        assert_eq!(murmur2_java(b"21"), -973932308);
        assert_eq!(murmur2_java(b"foobar"), -790332482);
        assert_eq!(murmur2_java(b"a-little-bit-long-string"), -985981536);
        assert_eq!(murmur2_java(b"a-little-bit-longer-string"), -1486304829);
        assert_eq!(murmur2_java(b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8"), -58897971);
        assert_eq!(murmur2_java(b"abc"), 479470107);
    }

    #[test]
    fn positive_partition() {
        assert_eq!(partition_for_key(b"21", 7), ((-973932308i32 as u32 & 0x7fff_ffff) % 7));
    }
}
