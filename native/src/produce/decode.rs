//! The Produce response, v3-v12, read from its payload (the frame without its size prefix).
//!
//! Classic versions (v3-v8, response header v0): INT32 array counts, INT16 string lengths, no
//! tagged fields. Flexible ones (v9+, response header v1: a tagged-field section after the
//! correlation id): compact lengths (unsigned varint of length + 1, 0 for null) and a
//! tagged-field section after every struct. Fields a version lacks hold their schema default:
//! `log_start_offset` -1 before v5, no `record_errors` and a null `error_message` before v8, no
//! leader hints (-1, -1, no endpoints) before v10.
//!
//! The contract is the generic codec's (`messages.decode_response`), which the Python tests hold
//! this to on mutated and random input: every truncation or malformed value is a
//! [`DecodeError::Malformed`], never a panic; bytes after a complete body are ignored. Malformed
//! means: a varint longer than 5 bytes or over 32 bits, a negative or null length where the field
//! is not nullable, an array count larger than the bytes left (it can only be garbage, and is
//! refused before anything is allocated for it), a string that is not UTF-8, tagged fields out of
//! order or repeated, and a known tagged field (`current_leader`, `node_endpoints`, v10+) whose
//! payload is not exactly its struct. Unknown tags are skipped, and so is tag 0 before v10.

use super::{supported, DecodeError, FIRST_FLEXIBLE_VERSION, FIRST_LEADER_HINTS_VERSION};

/// One `record_errors` entry (v8+, KIP-467): the index of a record that made the batch fail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordError<'a> {
    pub batch_index: i32,
    pub message: Option<&'a str>,
}

/// One partition's answer, with its topic's name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionResponse<'a> {
    pub topic: &'a str,
    pub partition: i32,
    pub error_code: i16,
    pub base_offset: i64,
    /// The broker's append time when the topic uses LogAppendTime, else -1.
    pub log_append_time_ms: i64,
    /// v5+; -1 before.
    pub log_start_offset: i64,
    /// v8+; empty before.
    pub record_errors: Vec<RecordError<'a>>,
    /// v8+; None before.
    pub error_message: Option<&'a str>,
    /// v10+ (KIP-951) `current_leader`: the new leader's id and epoch on NOT_LEADER_OR_FOLLOWER, else -1.
    pub leader_id: i32,
    pub leader_epoch: i32,
}

/// v10+ (KIP-951): where a leader named in a partition's `leader_id` can be reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeEndpoint<'a> {
    pub node_id: i32,
    pub host: &'a str,
    pub port: i32,
    pub rack: Option<&'a str>,
}

/// A decoded Produce response, flattened: every partition of every topic, in wire order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProduceResponse<'a> {
    pub correlation_id: i32,
    pub partitions: Vec<PartitionResponse<'a>>,
    pub throttle_time_ms: i32,
    pub node_endpoints: Vec<NodeEndpoint<'a>>,
}

/// Decode a Produce response payload of `version`; bytes after a complete body are ignored.
pub fn decode(version: i64, data: &[u8]) -> Result<ProduceResponse<'_>, DecodeError> {
    let Some(version) = supported(version) else {
        return Err(DecodeError::UnsupportedVersion(version));
    };
    let mut r = Reader { data, pos: 0 };
    let correlation_id = r.int32()?;
    if version >= FIRST_FLEXIBLE_VERSION {
        decode_flexible(&mut r, version, correlation_id)
    } else {
        decode_classic(&mut r, version, correlation_id)
    }
}

/// The smallest partition entry on the wire (v3: index, error code, two offsets): caps what a
/// count read from the wire may reserve.
const MIN_PARTITION_SIZE: usize = 22;

/// v3-v8: INT32 counts, INT16 string lengths, no tagged fields; response header v0.
fn decode_classic<'a>(r: &mut Reader<'a>, version: i16, correlation_id: i32) -> Result<ProduceResponse<'a>, DecodeError> {
    let mut partitions = Vec::new();
    let topics = r.array_length()?;
    for _ in 0..topics {
        let at = r.pos;
        let size = r.int16()?;
        if size < 0 {
            return Err(malformed(format!("null or negative length {size} for a topic name at offset {at}")));
        }
        let topic = r.text(size as usize)?;
        let count = r.array_length()?;
        partitions.reserve(count.min(r.remaining() / MIN_PARTITION_SIZE));
        for _ in 0..count {
            let mut p = partition_head(r, topic, version)?;
            if version >= 8 {
                for _ in 0..r.array_length()? {
                    p.record_errors.push(RecordError { batch_index: r.int32()?, message: r.nullable_string()? });
                }
                p.error_message = r.nullable_string()?;
            }
            partitions.push(p);
        }
    }
    let throttle_time_ms = r.int32()?;
    Ok(ProduceResponse { correlation_id, partitions, throttle_time_ms, node_endpoints: Vec::new() })
}

/// v9+: compact lengths, a tagged-field section after every struct; response header v1.
fn decode_flexible<'a>(r: &mut Reader<'a>, version: i16, correlation_id: i32) -> Result<ProduceResponse<'a>, DecodeError> {
    let leader_hints = version >= FIRST_LEADER_HINTS_VERSION;
    let mut partitions = Vec::new();
    r.tagged_fields()?; // response header v1
    let topics = r.compact_array_length()?;
    for _ in 0..topics {
        let topic = r.compact_string()?;
        let count = r.compact_array_length()?;
        partitions.reserve(count.min(r.remaining() / MIN_PARTITION_SIZE));
        for _ in 0..count {
            let mut p = partition_head(r, topic, version)?;
            for _ in 0..r.compact_array_length()? {
                let (batch_index, message) = (r.int32()?, r.compact_nullable_string()?);
                r.tagged_fields()?;
                p.record_errors.push(RecordError { batch_index, message });
            }
            p.error_message = r.compact_nullable_string()?;
            if let (Some(payload), true) = (r.tagged_fields()?, leader_hints) {
                (p.leader_id, p.leader_epoch) = current_leader(payload)?;
            }
            partitions.push(p);
        }
        r.tagged_fields()?; // topic
    }
    let throttle_time_ms = r.int32()?;
    let mut node_endpoints = Vec::new();
    if let (Some(payload), true) = (r.tagged_fields()?, leader_hints) {
        node_endpoints = decode_node_endpoints(payload)?;
    }
    Ok(ProduceResponse { correlation_id, partitions, throttle_time_ms, node_endpoints })
}

/// A partition's fields that every version has, in wire order (`log_start_offset` from v5), the
/// others at their defaults for the caller to read.
fn partition_head<'a>(r: &mut Reader<'a>, topic: &'a str, version: i16) -> Result<PartitionResponse<'a>, DecodeError> {
    Ok(PartitionResponse {
        topic,
        partition: r.int32()?,
        error_code: r.int16()?,
        base_offset: r.int64()?,
        log_append_time_ms: r.int64()?,
        log_start_offset: if version >= 5 { r.int64()? } else { -1 },
        record_errors: Vec::new(),
        error_message: None,
        leader_id: -1,
        leader_epoch: -1,
    })
}

/// The `current_leader` tagged struct (v10+): leader id and epoch, then its own tagged fields.
fn current_leader(payload: &[u8]) -> Result<(i32, i32), DecodeError> {
    let mut r = Reader { data: payload, pos: 0 };
    let leader = (r.int32()?, r.int32()?);
    r.tagged_fields()?;
    r.expect_end("current_leader")?;
    Ok(leader)
}

/// The `node_endpoints` tagged array (v10+).
fn decode_node_endpoints(payload: &[u8]) -> Result<Vec<NodeEndpoint<'_>>, DecodeError> {
    let mut r = Reader { data: payload, pos: 0 };
    let count = r.compact_array_length()?;
    let mut endpoints = Vec::with_capacity(count.min(r.remaining() / 11)); // id, host, port, rack, tags
    for _ in 0..count {
        let (node_id, host, port, rack) = (r.int32()?, r.compact_string()?, r.int32()?, r.compact_nullable_string()?);
        r.tagged_fields()?;
        endpoints.push(NodeEndpoint { node_id, host, port, rack });
    }
    r.expect_end("node_endpoints")?;
    Ok(endpoints)
}

fn malformed(message: String) -> DecodeError {
    DecodeError::Malformed(message)
}

/// A position in a payload; every read checks what is left and fails, never panics.
struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn remaining(&self) -> usize {
        self.data.len() - self.pos
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if n > self.remaining() {
            return Err(malformed(format!("truncated: need {n} bytes at offset {}, {} left", self.pos, self.remaining())));
        }
        let bytes = &self.data[self.pos..self.pos + n];
        self.pos += n;
        Ok(bytes)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let mut out = [0; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    fn int16(&mut self) -> Result<i16, DecodeError> {
        self.array().map(i16::from_be_bytes)
    }

    fn int32(&mut self) -> Result<i32, DecodeError> {
        self.array().map(i32::from_be_bytes)
    }

    fn int64(&mut self) -> Result<i64, DecodeError> {
        self.array().map(i64::from_be_bytes)
    }

    /// An unsigned 32-bit varint: at most 5 bytes, as Kafka's.
    fn uvarint(&mut self) -> Result<usize, DecodeError> {
        let mut result: u64 = 0;
        for shift in (0..35).step_by(7) {
            let [byte] = self.array()?;
            result |= u64::from(byte & 0x7f) << shift;
            if byte < 0x80 {
                if result > u64::from(u32::MAX) {
                    return Err(malformed(format!("unsigned varint overflows 32 bits at offset {}", self.pos)));
                }
                return Ok(result as usize);
            }
        }
        Err(malformed(format!("unsigned varint longer than 5 bytes at offset {}", self.pos)))
    }

    fn text(&mut self, size: usize) -> Result<&'a str, DecodeError> {
        let at = self.pos;
        let bytes = self.take(size)?;
        std::str::from_utf8(bytes).map_err(|e| malformed(format!("string at offset {at} is not UTF-8: {e}")))
    }

    /// A classic nullable STRING: INT16 length, -1 for null.
    fn nullable_string(&mut self) -> Result<Option<&'a str>, DecodeError> {
        let size = self.int16()?;
        match size {
            -1 => Ok(None),
            0.. => self.text(size as usize).map(Some),
            _ => Err(malformed(format!("negative string length {size} at offset {}", self.pos - 2))),
        }
    }

    fn compact_nullable_string(&mut self) -> Result<Option<&'a str>, DecodeError> {
        match self.uvarint()? {
            0 => Ok(None),
            size => self.text(size - 1).map(Some),
        }
    }

    fn compact_string(&mut self) -> Result<&'a str, DecodeError> {
        match self.uvarint()? {
            0 => Err(malformed(format!("null for non-nullable compact string at offset {}", self.pos - 1))),
            size => self.text(size - 1),
        }
    }

    /// A non-nullable ARRAY count; a count larger than the bytes left can only be garbage.
    fn array_length(&mut self) -> Result<usize, DecodeError> {
        let count = self.int32()?;
        if count < 0 || count as usize > self.remaining() {
            return Err(malformed(format!("invalid array length {count} at offset {}", self.pos - 4)));
        }
        Ok(count as usize)
    }

    /// A non-nullable COMPACT_ARRAY count (prefix 0 would be null).
    fn compact_array_length(&mut self) -> Result<usize, DecodeError> {
        let start = self.pos;
        let count = self.uvarint()?;
        if count == 0 || count - 1 > self.remaining() {
            return Err(malformed(format!("invalid compact array length at offset {start}")));
        }
        Ok(count - 1)
    }

    /// A tagged-field section; returns tag 0's payload if present (the only tag Produce knows),
    /// having checked that the tags strictly increase and that each payload is there.
    fn tagged_fields(&mut self) -> Result<Option<&'a [u8]>, DecodeError> {
        let count = self.uvarint()?;
        let mut tag_zero = None;
        let mut last: Option<usize> = None;
        for _ in 0..count {
            let tag = self.uvarint()?;
            if last.is_some_and(|last| tag <= last) {
                return Err(malformed(format!("tagged field {tag} out of order after {} at offset {}", last.unwrap_or(0), self.pos)));
            }
            last = Some(tag);
            let size = self.uvarint()?;
            if size > self.remaining() {
                return Err(malformed(format!("truncated tagged field {tag} at offset {}", self.pos)));
            }
            let payload = self.take(size)?;
            if tag == 0 {
                tag_zero = Some(payload);
            }
        }
        Ok(tag_zero)
    }

    /// A tagged struct is exactly its payload: bytes left over are malformed.
    fn expect_end(&self, field: &str) -> Result<(), DecodeError> {
        match self.remaining() {
            0 => Ok(()),
            left => Err(malformed(format!("tagged field {field} has {left} trailing bytes"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    }

    /// v8, one partition of topic "t": index 0, no error, base offset 5, log start 0, no record errors.
    const V8: &str = "00000001  00000001 0001 74  00000001 00000000 0000 0000000000000005 ffffffffffffffff 0000000000000000
                      00000000 ffff  00000064";
    /// v10, the same partition with a current_leader (2, 7), and a body with node_endpoints [(2, "h", 9092, null)].
    const V10: &str = "00000003 00  02 02 74  02 00000000 0000 0000000000000005 ffffffffffffffff 0000000000000000
                       01 00  01 00 09 00000002 00000007 00  00  00000000  01 00 0d 02 00000002 02 68 00002384 00 00";

    fn one(version: i64, payload: &[u8]) -> PartitionResponse<'_> {
        let mut response = decode(version, payload).unwrap();
        assert_eq!(response.partitions.len(), 1);
        response.partitions.pop().unwrap()
    }

    #[test]
    fn classic_v8_golden() {
        let payload = hex(V8);
        let response = decode(8, &payload).unwrap();
        assert_eq!((response.correlation_id, response.throttle_time_ms), (1, 100));
        let p = &response.partitions[0];
        assert_eq!((p.topic, p.partition, p.error_code, p.base_offset, p.log_append_time_ms, p.log_start_offset), ("t", 0, 0, 5, -1, 0));
        assert_eq!((p.record_errors.len(), p.error_message, p.leader_id, p.leader_epoch), (0, None, -1, -1));
    }

    #[test]
    fn log_start_offset_from_v5_only() {
        // v3/v4: the same bytes without log_start_offset and the v8 fields.
        let payload = hex("00000001 00000001 0001 74 00000001 00000000 0000 0000000000000005 ffffffffffffffff 00000064");
        for version in [3, 4] {
            let p = one(version, &payload);
            assert_eq!((p.log_start_offset, p.base_offset), (-1, 5));
            assert_eq!(decode(version, &payload).unwrap().throttle_time_ms, 100);
        }
        assert!(decode(5, &payload).is_err()); // v5 reads 8 more bytes: the throttle time is gone
    }

    #[test]
    fn flexible_v10_golden_with_leader_hints() {
        let payload = hex(V10);
        let response = decode(10, &payload).unwrap();
        assert_eq!((response.partitions[0].leader_id, response.partitions[0].leader_epoch), (2, 7));
        assert_eq!(response.node_endpoints, vec![NodeEndpoint { node_id: 2, host: "h", port: 9092, rack: None }]);
        let v9 = decode(9, &payload).unwrap(); // tag 0 is unknown in v9: skipped
        assert_eq!((v9.partitions[0].leader_id, v9.node_endpoints.len()), (-1, 0));
    }

    #[test]
    fn flexible_record_errors_each_end_with_tagged_fields() {
        let payload = hex("00000001 00  02 02 74 02  00000000 0057 ffffffffffffffff ffffffffffffffff 0000000000000007
             03 00000004 04 626164 00  00000009 00 00  02 6d  00  00  00000064 00");
        for version in [9, 12] {
            let p = one(version, &payload);
            assert_eq!((p.error_code, p.log_start_offset, p.error_message), (87, 7, Some("m")));
            assert_eq!(p.record_errors, vec![RecordError { batch_index: 4, message: Some("bad") }, RecordError { batch_index: 9, message: None }]);
            assert_eq!(decode(version, &payload).unwrap().throttle_time_ms, 100);
        }
    }

    #[test]
    fn a_known_tagged_struct_with_bytes_left_over_is_malformed() {
        let longer = V10.replace("01 00 09 00000002 00000007 00", "01 00 0a 00000002 00000007 00 00");
        assert!(matches!(decode(10, &hex(&longer)), Err(DecodeError::Malformed(m)) if m.contains("current_leader")));
        assert!(decode(9, &hex(&longer)).is_ok()); // unknown before v10: skipped whole
    }

    #[test]
    fn every_truncation_is_an_error_and_trailing_bytes_are_ignored() {
        for (version, text) in [(8, V8), (10, V10)] {
            let payload = hex(text);
            for cut in 0..payload.len() {
                assert!(matches!(decode(version, &payload[..cut]), Err(DecodeError::Malformed(_))), "v{version} cut at {cut}");
            }
            let mut longer = payload.clone();
            longer.extend_from_slice(&[0, 1, 2]);
            assert_eq!(decode(version, &longer).unwrap(), decode(version, &payload).unwrap());
        }
    }

    #[test]
    fn any_byte_mutated_decodes_or_fails_without_panicking() {
        for (version, text) in [(8, V8), (10, V10)] {
            let payload = hex(text);
            for at in 0..payload.len() {
                for value in [0x00, 0x01, 0x7f, 0x80, 0xff] {
                    let mut mutated = payload.clone();
                    mutated[at] = value;
                    let _ = decode(version, &mutated);
                }
            }
        }
    }

    #[test]
    fn malformed_varints_lengths_and_tags() {
        let body = |tags: &str| hex(&format!("00000001 00 01 00000000 {tags}"));
        for tags in [
            "01 8080808010 00",   // tag 2**32: over 32 bits
            "01 808080808000 00", // 6 bytes
            "02 01 00 01 00",     // tag 1 twice
            "01 05 02 ff",        // payload past the end
        ] {
            assert!(matches!(decode(9, &body(tags)), Err(DecodeError::Malformed(_))), "{tags}");
        }
        assert!(decode(9, &body("01 ffffffff0f 00")).is_ok()); // tag 2**32 - 1
        assert!(decode(10, &body("01 00 01 00")).is_err()); // node_endpoints: null
        assert!(decode(10, &body("01 00 02 01 00")).is_err()); // node_endpoints: [] and a byte left over
        assert_eq!(decode(10, &body("01 00 01 01")).unwrap().node_endpoints, vec![]);
        // A classic array count larger than the bytes left, a null topic name, a bad string length.
        assert!(decode(8, &hex("00000001 7fffffff")).is_err());
        assert!(decode(8, &hex("00000001 00000001 ffff 00000000 00000000")).is_err());
        assert!(decode(8, &hex(&V8.replace("ffff  00000064", "fffe  00000064"))).is_err());
        assert!(decode(8, &hex(&V8.replace("0001 74", "0001 ff"))).is_err()); // not UTF-8
    }

    #[test]
    fn unsupported_versions_are_refused() {
        assert_eq!(decode(2, b"\0\0\0\x01"), Err(DecodeError::UnsupportedVersion(2)));
        assert_eq!(decode(13, b"\0\0\0\x01"), Err(DecodeError::UnsupportedVersion(13)));
    }
}
