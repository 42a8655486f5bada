//! The Produce request, v3-v12, as one frame: `[size][api key][version][correlation id]` then
//! the rest of the request header and the body.
//!
//! Request header v1 (v3-v8) and v2 (v9+): `client_id` is a classic nullable STRING in both (an
//! INT16 length), v2 adds an empty tagged-field section. The body: `transactional_id` (v3+,
//! nullable), `acks` INT16, `timeout_ms` INT32, then `topic_data`: each topic's `name` and its
//! `partition_data`, each partition's `index` INT32 and `records` (nullable bytes). Classic
//! versions write INT32 array counts, INT16 string lengths and INT32 bytes lengths; flexible
//! ones (v9+) write each as an unsigned varint of length + 1 (0 for null) and end every struct
//! (partition, topic, body) with an empty tagged-field section (one 0 byte).
//!
//! Two steps, so the frame goes straight into a buffer of its exact size (a Python `bytes`, no
//! copy after): [`ProduceRequest::frame_size`] checks every length and sizes the frame;
//! [`ProduceRequest::write`] writes it and cannot fail.

use super::{supported, EncodeError, FIRST_FLEXIBLE_VERSION, PRODUCE_API_KEY};

/// One partition's records field.
#[derive(Debug, Clone, Copy)]
pub enum Records<'a> {
    /// A null `records` field (the generic codec allows it).
    Null,
    /// Bytes copied into the frame, or left out of it by reference at `splice_at` bytes or more.
    Bytes(&'a [u8]),
    /// `len` bytes always left out of the frame: the caller sends them by reference, in pieces
    /// (a batch's header and its section in place).
    Spliced(usize),
}

impl Records<'_> {
    /// The field's length (None: null).
    fn len(&self) -> Option<usize> {
        match self {
            Records::Null => None,
            Records::Bytes(b) => Some(b.len()),
            Records::Spliced(len) => Some(*len),
        }
    }

    /// How many of its bytes stay out of the frame's own bytes when batches of `splice_at` bytes
    /// or more are spliced.
    pub fn spliced_len(&self, splice_at: usize) -> usize {
        match self {
            Records::Null => 0,
            Records::Bytes(b) => {
                if b.len() >= splice_at {
                    b.len()
                } else {
                    0
                }
            }
            Records::Spliced(len) => *len,
        }
    }
}

/// One partition's index and records.
#[derive(Debug, Clone, Copy)]
pub struct PartitionData<'a> {
    pub index: i32,
    pub records: Records<'a>,
}

/// One topic and its partitions, in the order the broker answers them.
#[derive(Debug, Clone, Copy)]
pub struct TopicData<'a> {
    pub name: &'a str,
    pub partitions: &'a [PartitionData<'a>],
}

/// A whole Produce request. `version` is checked by [`ProduceRequest::frame_size`].
#[derive(Debug, Clone, Copy)]
pub struct ProduceRequest<'a> {
    pub version: i64,
    pub correlation_id: i32,
    pub client_id: Option<&'a str>,
    pub transactional_id: Option<&'a str>,
    pub acks: i16,
    pub timeout_ms: i32,
    pub topics: &'a [TopicData<'a>],
}

/// The largest length a classic STRING's INT16 prefix holds.
const INT16_MAX: usize = i16::MAX as usize;
/// The largest length a classic array's or bytes' INT32 prefix holds (and the frame's size).
const INT32_MAX: usize = i32::MAX as usize;
/// The largest value an unsigned varint of Kafka's carries (32 bits).
const UVARINT_MAX: usize = u32::MAX as usize;

impl ProduceRequest<'_> {
    /// The frame's size in bytes, size prefix included; `Err` if a value does not fit its field
    /// or the version is not spoken. Cost: a walk over the topics and partitions, no copy.
    pub fn frame_size(&self) -> Result<usize, EncodeError> {
        let Some(version) = supported(self.version) else {
            return Err(EncodeError::UnsupportedVersion(self.version));
        };
        let flexible = version >= FIRST_FLEXIBLE_VERSION;
        let sizer = Sizer { flexible, version };
        // size, api key, version, correlation id; client id; acks, timeout
        let mut size = 12 + sizer.classic_string(self.client_id, &"client_id")? + 6;
        size += sizer.string(self.transactional_id, &"transactional_id")?;
        size += sizer.array(self.topics.len(), &"topic_data")?;
        for (t, topic) in self.topics.iter().enumerate() {
            size += sizer.string(Some(topic.name), &format_args!("topic_data[{t}] name"))?;
            size += sizer.array(topic.partitions.len(), &format_args!("topic_data[{t}] partitions"))?;
            for (p, partition) in topic.partitions.iter().enumerate() {
                size += 4 + sizer.bytes(partition.records.len(), &format_args!("topic_data[{t}] partition {p} records"))?;
            }
            if flexible {
                size += topic.partitions.len() + 1; // tagged fields: each partition's, the topic's
            }
        }
        if flexible {
            size += 2; // tagged fields: the header's, the body's
        }
        if size - 4 > INT32_MAX {
            return Err(EncodeError::Value(format!("cannot encode Produce v{version}: the request's {} bytes exceed INT32", size - 4)));
        }
        Ok(size)
    }

    /// Write the frame into `out`, which must be exactly [`ProduceRequest::frame_size`] long
    /// (a shorter one is a bug: the slice indexing panics, which `guarded` turns into an error).
    pub fn write(&self, out: &mut [u8]) {
        self.write_spliced(out.len(), out, usize::MAX);
    }

    /// Write the frame of `frame_size` bytes without the record batches of `splice_at` bytes or
    /// more (their length prefixes are written): `out` is `frame_size` minus their lengths long.
    /// Returns where each left-out batch goes in `out`, in order, for the caller to send it by
    /// reference between the pieces (a connection's writer thread reads chunks in place).
    pub fn write_spliced(&self, frame_size: usize, out: &mut [u8], splice_at: usize) -> Vec<usize> {
        let version = self.version as i16;
        let flexible = version >= FIRST_FLEXIBLE_VERSION;
        let mut w = Writer { out, pos: 0, flexible, splice_at, spliced: Vec::new() };
        w.int32((frame_size - 4) as i32);
        w.int16(PRODUCE_API_KEY);
        w.int16(version);
        w.int32(self.correlation_id);
        w.classic_string(self.client_id);
        if flexible {
            w.out[w.pos] = 0; // request header v2: no tagged fields
            w.pos += 1;
        }
        w.string(self.transactional_id);
        w.int16(self.acks);
        w.int32(self.timeout_ms);
        w.array(self.topics.len());
        for topic in self.topics {
            w.string(Some(topic.name));
            w.array(topic.partitions.len());
            for partition in topic.partitions {
                w.int32(partition.index);
                w.records(partition.records);
                w.no_tagged_fields();
            }
            w.no_tagged_fields();
        }
        w.no_tagged_fields();
        debug_assert_eq!(w.pos, w.out.len(), "frame_size and write disagree");
        w.spliced
    }

    /// The frame in a new buffer: [`ProduceRequest::frame_size`] then [`ProduceRequest::write`].
    pub fn encode(&self) -> Result<Vec<u8>, EncodeError> {
        let mut out = vec![0; self.frame_size()?];
        self.write(&mut out);
        Ok(out)
    }
}

/// The bytes of an unsigned varint.
fn uvarint_size(value: usize) -> usize {
    match value {
        0..=0x7f => 1,
        0x80..=0x3fff => 2,
        0x4000..=0x1f_ffff => 3,
        0x20_0000..=0xfff_ffff => 4,
        _ => 5,
    }
}

/// Sizes of the fields whose encoding depends on the version, checking that each length fits.
struct Sizer {
    flexible: bool,
    version: i16,
}

impl Sizer {
    fn too_long(&self, field: &dyn std::fmt::Display, len: usize, kind: &str) -> EncodeError {
        EncodeError::Value(format!("cannot encode Produce v{}: {field} is {len} long, too long for {kind}", self.version))
    }

    /// A classic (nullable) STRING: INT16 length, -1 for null.
    fn classic_string(&self, value: Option<&str>, field: &dyn std::fmt::Display) -> Result<usize, EncodeError> {
        let len = value.map_or(0, str::len);
        if len > INT16_MAX {
            return Err(self.too_long(field, len, "a STRING (INT16 length)"));
        }
        Ok(2 + len)
    }

    /// A (nullable) STRING in this version's encoding.
    fn string(&self, value: Option<&str>, field: &dyn std::fmt::Display) -> Result<usize, EncodeError> {
        if !self.flexible {
            return self.classic_string(value, field);
        }
        self.compact(value.map(str::len), field)
    }

    /// Nullable BYTES in this version's encoding.
    fn bytes(&self, value: Option<usize>, field: &dyn std::fmt::Display) -> Result<usize, EncodeError> {
        if self.flexible {
            return self.compact(value, field);
        }
        let len = value.unwrap_or(0);
        if len > INT32_MAX {
            return Err(self.too_long(field, len, "BYTES (INT32 length)"));
        }
        Ok(4 + len)
    }

    /// An array's count in this version's encoding (the elements are sized by the caller).
    fn array(&self, count: usize, field: &dyn std::fmt::Display) -> Result<usize, EncodeError> {
        if self.flexible {
            return Ok(self.compact(Some(count), field)? - count);
        }
        if count > INT32_MAX {
            return Err(self.too_long(field, count, "an ARRAY (INT32 count)"));
        }
        Ok(4)
    }

    /// A compact length prefix (length + 1, 0 for null) and the `len` bytes after it.
    fn compact(&self, len: Option<usize>, field: &dyn std::fmt::Display) -> Result<usize, EncodeError> {
        match len {
            None => Ok(1),
            Some(len) if len >= UVARINT_MAX => Err(self.too_long(field, len, "a compact length (unsigned 32-bit varint)")),
            Some(len) => Ok(uvarint_size(len + 1) + len),
        }
    }
}

/// Writes into a buffer sized by [`ProduceRequest::frame_size`]: nothing here checks a length.
struct Writer<'b> {
    out: &'b mut [u8],
    pos: usize,
    flexible: bool,
    /// Record batches this long or longer are left out, their positions kept in `spliced`.
    splice_at: usize,
    spliced: Vec<usize>,
}

impl Writer<'_> {
    #[inline]
    fn put(&mut self, bytes: &[u8]) {
        let end = self.pos + bytes.len();
        self.out[self.pos..end].copy_from_slice(bytes);
        self.pos = end;
    }

    fn int16(&mut self, value: i16) {
        self.put(&value.to_be_bytes());
    }

    fn int32(&mut self, value: i32) {
        self.put(&value.to_be_bytes());
    }

    fn uvarint(&mut self, mut value: usize) {
        while value > 0x7f {
            self.out[self.pos] = (value & 0x7f) as u8 | 0x80;
            self.pos += 1;
            value >>= 7;
        }
        self.out[self.pos] = value as u8;
        self.pos += 1;
    }

    fn classic_string(&mut self, value: Option<&str>) {
        match value {
            None => self.int16(-1),
            Some(s) => {
                self.int16(s.len() as i16);
                self.put(s.as_bytes());
            }
        }
    }

    fn string(&mut self, value: Option<&str>) {
        if self.flexible {
            self.compact(value.map(str::as_bytes));
        } else {
            self.classic_string(value);
        }
    }

    /// A partition's `records`: nullable bytes, left out (but for the length) from `splice_at` bytes.
    fn records(&mut self, value: Records<'_>) {
        let Some(len) = value.len() else {
            if self.flexible {
                self.uvarint(0);
            } else {
                self.int32(-1);
            }
            return;
        };
        if self.flexible {
            self.uvarint(len + 1);
        } else {
            self.int32(len as i32);
        }
        match value {
            Records::Bytes(b) if b.len() < self.splice_at => self.put(b),
            _ => self.spliced.push(self.pos),
        }
    }

    fn compact(&mut self, value: Option<&[u8]>) {
        match value {
            None => self.uvarint(0),
            Some(b) => {
                self.uvarint(b.len() + 1);
                self.put(b);
            }
        }
    }

    fn array(&mut self, count: usize) {
        if self.flexible {
            self.uvarint(count + 1);
        } else {
            self.int32(count as i32);
        }
    }

    /// A flexible struct's empty tagged-field section; nothing in a classic version.
    fn no_tagged_fields(&mut self) {
        if self.flexible {
            self.out[self.pos] = 0;
            self.pos += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request<'a>(version: i64, topics: &'a [TopicData<'a>]) -> ProduceRequest<'a> {
        ProduceRequest { version, correlation_id: 7, client_id: Some("c"), transactional_id: None, acks: -1, timeout_ms: 30000, topics }
    }

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    }

    const RECORDS: &[u8] = b"\xaa\xbb\xcc";

    #[test]
    fn classic_v8_golden() {
        let partitions = [PartitionData { index: 2, records: Records::Bytes(RECORDS) }, PartitionData { index: 3, records: Records::Null }];
        let topics = [TopicData { name: "t", partitions: &partitions }];
        let frame = request(8, &topics).encode().unwrap();
        let want = hex("00000031 0000 0008 00000007 0001 63  ffff ffff 00007530
             00000001 0001 74 00000002  00000002 00000003 aabbcc  00000003 ffffffff");
        assert_eq!(frame, want);
    }

    #[test]
    fn flexible_v9_golden() {
        let partitions = [PartitionData { index: 2, records: Records::Bytes(RECORDS) }, PartitionData { index: 3, records: Records::Null }];
        let topics = [TopicData { name: "t", partitions: &partitions }];
        let mut req = request(9, &topics);
        req.transactional_id = Some("x");
        let frame = req.encode().unwrap();
        let want = hex("00000029 0000 0009 00000007 0001 63 00  02 78 ffff 00007530
             02 02 74 03  00000002 04 aabbcc 00  00000003 00 00  00  00");
        assert_eq!(frame, want);
    }

    #[test]
    fn size_prefix_is_the_rest_of_the_frame() {
        let big = vec![5u8; 300];
        let partitions = [PartitionData { index: 0, records: Records::Bytes(&big) }];
        let topics = [TopicData { name: "orders", partitions: &partitions }, TopicData { name: "u", partitions: &[] }];
        for version in 3..=12 {
            let frame = request(version, &topics).encode().unwrap();
            assert_eq!(i32::from_be_bytes(frame[..4].try_into().unwrap()) as usize, frame.len() - 4, "v{version}");
            assert_eq!(&frame[4..8], &[0, 0, 0, version as u8]);
        }
    }

    #[test]
    fn compact_lengths_are_varints_of_length_plus_one() {
        let records = vec![1u8; 200]; // 201 = 0xc9 0x01
        let partitions = [PartitionData { index: 0, records: Records::Bytes(&records) }];
        let topics = [TopicData { name: "t", partitions: &partitions }];
        let frame = request(9, &topics).encode().unwrap();
        let at = frame.len() - 3 - 200 - 2;
        assert_eq!(&frame[at..at + 2], &[0xc9, 0x01]);
        assert_eq!(uvarint_size(0x7f), 1);
        assert_eq!(uvarint_size(0x80), 2);
        assert_eq!(uvarint_size(UVARINT_MAX), 5);
    }

    #[test]
    fn values_that_do_not_fit_are_errors_naming_the_field() {
        let long = "t".repeat(40000);
        let topics = [TopicData { name: &long, partitions: &[] }];
        let Err(EncodeError::Value(message)) = request(8, &topics).frame_size() else { panic!("a 40,000-byte name fits INT16") };
        assert!(message.contains("topic_data[0] name"), "{message}");
        assert!(request(9, &topics).frame_size().is_ok()); // compact: fits
        let mut req = request(3, &[]);
        req.client_id = Some(&long);
        assert!(matches!(req.frame_size(), Err(EncodeError::Value(m)) if m.contains("client_id")));
        req.version = 12; // client_id stays a classic STRING in header v2
        assert!(matches!(req.frame_size(), Err(EncodeError::Value(_))));
    }

    #[test]
    fn records_in_pieces_are_always_left_out_with_the_length_of_all_of_them() {
        let (header, section, small) = (vec![7u8; 61], vec![9u8; 100], vec![1u8; 10]);
        let whole_batch = [&header[..], &section[..]].concat();
        let as_bytes = [PartitionData { index: 0, records: Records::Bytes(&whole_batch) }, PartitionData { index: 1, records: Records::Bytes(&small) }];
        let in_pieces = [PartitionData { index: 0, records: Records::Spliced(161) }, PartitionData { index: 1, records: Records::Bytes(&small) }];
        for version in [3, 9] {
            let whole = request(version, &[TopicData { name: "t", partitions: &as_bytes }]).encode().unwrap();
            let topics = [TopicData { name: "t", partitions: &in_pieces }];
            let req = request(version, &topics);
            assert_eq!(req.frame_size().unwrap(), whole.len());
            let mut own = vec![0; whole.len() - 161];
            let at = req.write_spliced(whole.len(), &mut own, 4096); // under the threshold, spliced all the same
            assert_eq!(at.len(), 1);
            let joined = [&own[..at[0]], &header[..], &section[..], &own[at[0]..]].concat();
            assert_eq!(joined, whole, "v{version}");
        }
    }

    #[test]
    fn spliced_batches_leave_their_bytes_out_and_say_where_they_go() {
        let (big, small) = (vec![9u8; 5000], vec![1u8; 10]);
        let partitions = [PartitionData { index: 0, records: Records::Bytes(&big) }, PartitionData { index: 1, records: Records::Bytes(&small) }];
        let topics = [TopicData { name: "t", partitions: &partitions }];
        for version in [3, 9] {
            let req = request(version, &topics);
            let whole = req.encode().unwrap();
            let mut own = vec![0; whole.len() - big.len()];
            let at = req.write_spliced(whole.len(), &mut own, 4096);
            assert_eq!(at.len(), 1);
            let joined = [&own[..at[0]], &big[..], &own[at[0]..]].concat();
            assert_eq!(joined, whole, "v{version}");
        }
    }

    #[test]
    fn unsupported_versions_are_refused() {
        for version in [-1, 0, 2, 13, i64::MAX] {
            assert_eq!(request(version, &[]).frame_size(), Err(EncodeError::UnsupportedVersion(version)));
        }
    }
}
