//! RecordBatch v2 (magic 2): the builder every record of the producer is appended to.
//!
//! The layout (the Kafka protocol guide, "Record Batch"; Java's `DefaultRecordBatch`,
//! `DefaultRecord`, `MemoryRecordsBuilder`): a 61-byte header, then the records section,
//! compressed as one blob when the batch has a codec.
//!
//! ```text
//! baseOffset i64 | batchLength i32 | partitionLeaderEpoch i32 | magic i8 (=2) | crc u32
//! | attributes i16 | lastOffsetDelta i32 | baseTimestamp i64 | maxTimestamp i64
//! | producerId i64 | producerEpoch i16 | baseSequence i32 | recordCount i32 | records...
//! ```
//!
//! A record is `length varint | attributes i8 | timestampDelta varlong | offsetDelta varint
//! | key | value | headers`, each blob a zigzag varint length (-1: null) and its bytes.
//! `batchLength` counts the bytes after itself; the CRC-32C covers `attributes` to the end.
//!
//! Two layers. [`Builder`] is sans-I/O and knows no Python: bytes in, the records section out,
//! with the size bookkeeping that decides whether a record fits (Java's `hasRoomFor`, exactly
//! as the Python builder before it decided). [`PyRecordBatchBuilder`] is the object a
//! `ProducerBatch` owns: the builder, plus what a batch's life needs per batch (compression
//! through `aioproducer.protocol.compression`, the built bytes cached for a retry, release).
//!
//! Measured (benchmarks/native_spike.py, 100 B keyed records, 2-core machine): one Python call
//! of `try_append` costs 0.076 µs, of which the encoding itself is a few ns; the pure-Python
//! builder it replaces cost 0.53 µs.

use std::os::raw::c_int;

use crate::spare;

use pyo3::exceptions::{PyBufferError, PyRuntimeError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::pybacked::{PyBackedBytes, PyBackedStr};
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBytes, PyList, PyMemoryView, PyString};

use crate::guarded;

/// Size of the batch header (baseOffset .. recordCount).
pub const RECORD_BATCH_OVERHEAD: usize = 61;
/// `attributes` is the first byte the CRC covers.
const CRC_START: usize = 21;
/// `batchLength` counts the bytes after this offset.
const LENGTH_END: usize = 12;
/// Values longer than this are checked against the batch's room before they are encoded.
const LARGE_VALUE: usize = 1024;
const MAGIC: u8 = 2;
const TRANSACTIONAL_BIT: i16 = 0x10;
/// The timestamp of an empty builder.
pub const NO_TIMESTAMP: i64 = -1;
/// Wire codec ids (attributes bits 0-2).
pub const CODEC_NONE: u8 = 0;
pub(crate) const CODEC_GZIP: u8 = 1;
pub(crate) const CODEC_LZ4: u8 = 3;
pub(crate) const CODEC_ZSTD: u8 = 4;
/// Java's `MemoryRecordsBuilder.COMPRESSION_RATE_ESTIMATION_FACTOR`: the estimated compressed
/// size is inflated by 5 % so that a batch rarely overshoots `batch.size` once compressed.
const COMPRESSION_RATE_ESTIMATION_FACTOR: f64 = 1.05;
/// No write limit: `append` forces a record in whatever its size.
const NO_LIMIT: i64 = 1 << 62;
/// How many appended bytes the kept CRC may lag behind (see `Builder::crc`).
const CRC_STRIDE: usize = 4096;
/// The most rows a batch's per-record list reserves at its first record (`records_that_fit`):
/// 1,024 rows of 40 bytes; a batch of smaller records grows past it by doubling.
const ROWS_RESERVE_MAX: usize = 1024;

/// How many records of `record_bytes` each a batch of `batch_size` bytes holds at most, at least
/// one and at most `ROWS_RESERVE_MAX`.
fn records_that_fit(batch_size: i64, record_bytes: usize) -> usize {
    (usize::try_from(batch_size).unwrap_or(0) / record_bytes.max(1)).clamp(1, ROWS_RESERVE_MAX)
}

/// The most a builder reserves for its records section at its first record (see `first_reserve`).
const FIRST_RESERVE_MAX: usize = 1 << 20;

/// The CRC-32C (Castagnoli) polynomial without its x^32 term, bit-reflected as the CRC register
/// holds it: bit 31 is the coefficient of x^0, bit 0 that of x^31.
const CRC32C_REFLECTED: u32 = 0x82F6_3B78;

/// `v(x) * x mod P(x)`, reflected as [`CRC32C_REFLECTED`].
const fn times_x(v: u32) -> u32 {
    (v >> 1) ^ (CRC32C_REFLECTED & (v & 1).wrapping_neg())
}

/// `j(x) * x^4 mod P(x)` for `j` below 16 (its four coefficients of x^28..x^31 pushed past x^31,
/// reduced): with `v >> 4`, what multiplying any `v` by x^4 gives.
const TIMES_X4_REDUCTION: [u32; 16] = {
    let mut table = [0u32; 16];
    let mut j = 0;
    while j < 16 {
        table[j] = times_x(times_x(times_x(times_x(j as u32))));
        j += 1;
    }
    table
};

/// `a(x) * b(x) mod P(x)` over GF(2), both reflected as [`CRC32C_REFLECTED`].
///
/// Four bits of `a` a step (Horner's rule from its highest coefficients, `b`'s sixteen nibble
/// multiples made first): about 130 instructions, where a bit a step with a branch on each was
/// about 480 (callgrind, stop 66), the branch mispredicted half the time on a CRC's bits.
const fn gf2_multiply(a: u32, b: u32) -> u32 {
    // `multiples[d]` is d(x) * b(x), a nibble's bit 3 its x^0 (reflected as the register is).
    let mut multiples = [0u32; 16];
    multiples[8] = b;
    multiples[4] = times_x(b);
    multiples[2] = times_x(multiples[4]);
    multiples[1] = times_x(multiples[2]);
    let mut d: usize = 3;
    while d < 16 {
        let lowest = d & d.wrapping_neg();
        if lowest != d {
            multiples[d] = multiples[d ^ lowest] ^ multiples[lowest];
        }
        d += 1;
    }
    // a's low nibble holds its coefficients of x^28..x^31, its high nibble those of x^0..x^3.
    let mut product = multiples[(a & 0xF) as usize];
    let mut shift = 4;
    while shift < 32 {
        product = (product >> 4) ^ TIMES_X4_REDUCTION[(product & 0xF) as usize] ^ multiples[((a >> shift) & 0xF) as usize];
        shift += 4;
    }
    product
}

/// `x^0`, reflected: the product's identity.
const X0: u32 = 1 << 31;

/// `x^(8 * d * 256^p) mod P(x)` at `[p][d]`: what appending `d * 256^p` zero bytes does to a CRC
/// register, for each byte `d` of a length at each position `p` (8 KB, made at compile time).
const ZERO_BYTES_DIGITS: [[u32; 256]; 8] = {
    let mut table = [[X0; 256]; 8];
    let mut base = 1 << (31 - 8); // x^8: one zero byte, then 256^p of them
    let mut p = 0;
    while p < 8 {
        let mut d = 1;
        while d < 256 {
            table[p][d] = gf2_multiply(table[p][d - 1], base);
            d += 1;
        }
        base = gf2_multiply(table[p][255], base); // x^(8 * 256^(p + 1))
        p += 1;
    }
    table
};

/// The CRC-32C of `a` then `b` from the CRC-32C of each and `b`'s length, without reading `b`.
///
/// Why not `crc32c::crc32c_combine`: it took about 14 µs for a 10 KB `b` (2026-12-04: the
/// sender's `produce_topic_data` went from 9.4 to 37.6 µs a request of two 10 KB batches with
/// it). This takes one multiplication per nonzero byte of `b`'s length (two below 64 KB) and one
/// more. Stop 66 (callgrind, lengths of 14,000-16,000 bytes): 4,500 instructions a call with one
/// multiplication a bit set in the length, a bit a step, 400 now (the loop's 400 a record at 1 KB
/// before: 3.5 % of it). The algebra (a CRC register is a polynomial; appending n bytes
/// multiplies it by x^(8n) modulo P, and the initial and final inversions cancel between the two
/// halves) is the textbook one.
pub fn crc32c_concat(crc_a: u32, crc_b: u32, len_b: usize) -> u32 {
    let mut shift = X0;
    let (mut n, mut p) = (len_b as u64, 0);
    while n != 0 {
        let d = (n & 0xFF) as usize;
        if d != 0 {
            shift = gf2_multiply(ZERO_BYTES_DIGITS[p][d], shift);
        }
        n >>= 8;
        p += 1;
    }
    gf2_multiply(shift, crc_a) ^ crc_b
}

/// A record header as the builder takes it: UTF-8 key bytes and an optional value.
pub type Header<'a> = (&'a [u8], Option<&'a [u8]>);

#[inline]
fn zigzag(n: i64) -> u64 {
    ((n << 1) ^ (n >> 63)) as u64
}

/// Encoded size of a zigzag varint/varlong (Java's `ByteUtils.sizeOfVarlong`).
#[inline]
pub fn varint_size(n: i64) -> usize {
    let v = zigzag(n);
    if v == 0 {
        1
    } else {
        (64 - v.leading_zeros() as usize).div_ceil(7)
    }
}

/// Kafka's varint/varlong: zigzag, then 7 bits a byte, the low group first.
#[inline]
fn put_varint(buf: &mut Vec<u8>, n: i64) {
    let mut v = zigzag(n);
    while v > 0x7F {
        buf.push((v as u8 & 0x7F) | 0x80);
        v >>= 7;
    }
    buf.push(v as u8);
}

#[inline]
fn blob_size(blob: Option<&[u8]>) -> usize {
    match blob {
        None => 1,
        Some(b) => varint_size(b.len() as i64) + b.len(),
    }
}

#[inline]
fn put_blob(buf: &mut Vec<u8>, blob: Option<&[u8]>) {
    match blob {
        None => put_varint(buf, -1),
        Some(b) => {
            put_varint(buf, b.len() as i64);
            buf.extend_from_slice(b);
        }
    }
}

/// Java's `DefaultRecord.MAX_RECORD_OVERHEAD`: worst-case varints of a record's framing (length 5,
/// attributes 1, timestamp delta 10, offset delta 5).
pub const MAX_RECORD_OVERHEAD: usize = 21;

/// Key, value and headers as encoded in a record (each blob with its length varint).
fn key_value_headers_size(key: Option<&[u8]>, value: Option<&[u8]>, headers: &[Header<'_>]) -> usize {
    let mut size = blob_size(key) + blob_size(value) + varint_size(headers.len() as i64);
    for (hk, hv) in headers {
        size += blob_size(Some(hk)) + blob_size(*hv);
    }
    size
}

/// Size of a record's body: everything after its length prefix.
fn record_body_size(offset_delta: i64, timestamp_delta: i64, key: Option<&[u8]>, value: Option<&[u8]>, headers: &[Header<'_>]) -> usize {
    1 // record attributes
        + varint_size(timestamp_delta)
        + varint_size(offset_delta)
        + key_value_headers_size(key, value, headers)
}

/// Upper bound of a batch holding just this record (Java's `estimateSizeInBytesUpperBound`; the
/// Python `estimate_size_in_bytes_upper_bound` of protocol/records.py for `send()`'s records).
pub fn size_upper_bound(key: Option<&[u8]>, value: Option<&[u8]>, headers: &[Header<'_>]) -> usize {
    RECORD_BATCH_OVERHEAD + MAX_RECORD_OVERHEAD + key_value_headers_size(key, value, headers)
}

/// Exact encoded size of one record, its length prefix included (Java's `DefaultRecord.sizeInBytes`).
pub fn record_size(offset_delta: i64, timestamp_delta: i64, key: Option<&[u8]>, value: Option<&[u8]>, headers: &[Header<'_>]) -> usize {
    let body = record_body_size(offset_delta, timestamp_delta, key, value, headers);
    varint_size(body as i64) + body
}

/// The sans-I/O builder: records in, the uncompressed records section out.
#[derive(Debug)]
pub struct Builder {
    /// Room for the records section: `batch.size` - 61 (Java's `writeLimit`); may be negative.
    records_limit: i64,
    /// Uncompressed section size -> estimated wire size; None when the section is sent as it is.
    factor: Option<f64>,
    buf: Vec<u8>,
    /// What the section's buffer reserves at the first record: room for the whole batch
    /// (`batch.size` - 61, at most `FIRST_RESERVE_MAX`), or the record if it is larger. Java's
    /// pool hands a batch a `batch.size` buffer too, and the batch's memory is reserved for that
    /// size already (`buffer.memory`). Without it the buffer grew by doubling: at 1 KB records
    /// five reallocations a batch (py-spy put them at 3.4 % of the event loop's samples in the
    /// peers' layout). Measured, a builder filled with 1 KB records (16), best of 7, 2026-12-03:
    /// 3.17-3.37 µs a batch before, 2.31-2.39 after; with 100 B records (145) unchanged, 17.2 µs;
    /// callgrind's count for the whole `medium` run did not move (20,751 and 20,818 a record).
    first_reserve: usize,
    count: i32,
    base_ts: i64,
    max_ts: i64,
    /// The CRC-32C of `buf[..crc_len]`, kept while the section is sent as it is (no `factor`):
    /// extended once `CRC_STRIDE` bytes are appended, while they are still in the cache from the
    /// copy in, so that sending the batch in place (`PyRecordBatchBuilder::build_in_place`) reads
    /// at most the last few KB of them on the event loop's thread (see there for what it saves).
    /// Per stride rather than per record: a call per 100 B record cost about as much as the
    /// bytes (the full-buffer scenario ran 3-4 % slower, 2026-12-04).
    crc: u32,
    crc_len: usize,
}

impl Builder {
    /// A builder for batches of at most `batch_size` bytes; `factor` as in [`Builder::used`].
    pub fn new(batch_size: i64, factor: Option<f64>) -> Self {
        let records_limit = batch_size - RECORD_BATCH_OVERHEAD as i64;
        let first_reserve = usize::try_from(records_limit).unwrap_or(0).min(FIRST_RESERVE_MAX);
        Builder { records_limit, factor, buf: Vec::new(), first_reserve, count: 0, base_ts: NO_TIMESTAMP, max_ts: NO_TIMESTAMP, crc: 0, crc_len: 0 }
    }

    pub fn record_count(&self) -> i32 {
        self.count
    }

    pub fn section(&self) -> &[u8] {
        &self.buf
    }

    /// What the section weighs against the limit: exact when uncompressed, else estimated
    /// (Python's `int(len * factor)`: truncated).
    #[inline]
    fn used(&self) -> i64 {
        match self.factor {
            None => self.buf.len() as i64,
            Some(f) => (self.buf.len() as f64 * f) as i64,
        }
    }

    /// Java's `hasRoomFor`: true when empty (a record larger than `batch.size` gets a batch of
    /// its own), else whether the estimated size plus the record's exact size stays within
    /// the limit (the new record's compression is not counted).
    pub fn has_room_for(&self, timestamp_ms: i64, key: Option<&[u8]>, value: Option<&[u8]>, headers: &[Header<'_>]) -> bool {
        if self.count == 0 {
            return true;
        }
        let size = record_size(self.count as i64, timestamp_ms.wrapping_sub(self.base_ts), key, value, headers);
        self.used() + size as i64 <= self.records_limit
    }

    /// Appends if [`Builder::has_room_for`] says so: the record's offset delta, or -1 when full.
    pub fn try_append(&mut self, timestamp_ms: i64, key: Option<&[u8]>, value: Option<&[u8]>, headers: &[Header<'_>]) -> i64 {
        let od = self.count;
        if od > 0 {
            if let Some(v) = value {
                // A large value that cannot fit is refused before its size is computed: a lower
                // bound of what the check below adds, so it refuses nothing that fits.
                if v.len() > LARGE_VALUE && self.used() + v.len() as i64 > self.records_limit {
                    return -1;
                }
            }
        }
        let delta = if od > 0 { timestamp_ms.wrapping_sub(self.base_ts) } else { 0 };
        let body = record_body_size(od as i64, delta, key, value, headers);
        let size = varint_size(body as i64) + body;
        if od > 0 {
            if self.used() + size as i64 > self.records_limit {
                return -1;
            }
            if timestamp_ms > self.max_ts {
                self.max_ts = timestamp_ms;
            }
        } else {
            self.base_ts = timestamp_ms;
            self.max_ts = timestamp_ms;
        }
        let buf = &mut self.buf;
        if buf.capacity() == 0 {
            *buf = spare::take(size.max(self.first_reserve));
        } else {
            buf.reserve(size);
        }
        put_varint(buf, body as i64);
        buf.push(0);
        put_varint(buf, delta);
        put_varint(buf, od as i64);
        put_blob(buf, key);
        put_blob(buf, value);
        put_varint(buf, headers.len() as i64);
        for (hk, hv) in headers {
            put_blob(buf, Some(hk));
            put_blob(buf, *hv);
        }
        if self.factor.is_none() && buf.len() - self.crc_len >= CRC_STRIDE {
            self.crc = crc32c::crc32c_append(self.crc, &buf[self.crc_len..]);
            self.crc_len = buf.len();
        }
        self.count = od + 1;
        od as i64
    }

    /// Appends whatever the size (the first record of a batch for a record past `batch.size`).
    pub fn append(&mut self, timestamp_ms: i64, key: Option<&[u8]>, value: Option<&[u8]>, headers: &[Header<'_>]) -> i64 {
        let limit = self.records_limit;
        self.records_limit = NO_LIMIT;
        let od = self.try_append(timestamp_ms, key, value, headers);
        self.records_limit = limit;
        od
    }

    /// The CRC-covered part of the header (attributes .. recordCount).
    fn header_tail(&self, attributes: i16, producer_id: i64, producer_epoch: i16, base_sequence: i32) -> [u8; RECORD_BATCH_OVERHEAD - CRC_START] {
        let mut tail = [0u8; RECORD_BATCH_OVERHEAD - CRC_START];
        let mut at = 0;
        let mut put = |b: &[u8]| {
            tail[at..at + b.len()].copy_from_slice(b);
            at += b.len();
        };
        put(&attributes.to_be_bytes());
        put(&(self.count - 1).to_be_bytes());
        put(&self.base_ts.to_be_bytes());
        put(&self.max_ts.to_be_bytes());
        put(&producer_id.to_be_bytes());
        put(&producer_epoch.to_be_bytes());
        put(&base_sequence.to_be_bytes());
        put(&self.count.to_be_bytes());
        tail
    }

    /// Writes the batch (header, then `payload`, the records section as sent) into `out`,
    /// which is exactly `61 + payload.len()` bytes.
    pub fn write_batch(&self, out: &mut [u8], payload: &[u8], state: &ProducerState, codec: u8) {
        self.write_header(&mut out[..RECORD_BATCH_OVERHEAD], payload.len(), |crc| crc32c::crc32c_append(crc, payload), state, codec);
        out[RECORD_BATCH_OVERHEAD..].copy_from_slice(payload);
    }

    /// Writes the 61-byte header of an uncompressed batch whose section is `buf` as it is, with
    /// the CRC kept at each append: reads none of the section.
    pub fn write_header_in_place(&self, out: &mut [u8], state: &ProducerState) {
        debug_assert!(self.factor.is_none(), "the CRC is kept for an uncompressed section only");
        let (section_crc, len) = (crc32c::crc32c_append(self.crc, &self.buf[self.crc_len..]), self.buf.len());
        self.write_header(out, len, |crc| crc32c_concat(crc, section_crc, len), state, CODEC_NONE);
    }

    /// The header for a payload of `payload_len` bytes; `crc_of_payload` extends the header's
    /// CRC over the payload.
    fn write_header(&self, out: &mut [u8], payload_len: usize, crc_of_payload: impl FnOnce(u32) -> u32, state: &ProducerState, codec: u8) {
        let attributes = i16::from(codec) | if state.is_transactional { TRANSACTIONAL_BIT } else { 0 };
        let tail = self.header_tail(attributes, state.producer_id, state.producer_epoch, state.base_sequence);
        let crc = crc_of_payload(crc32c::crc32c(&tail));
        let batch_length = (RECORD_BATCH_OVERHEAD - LENGTH_END + payload_len) as i32;
        out[0..8].copy_from_slice(&state.base_offset.to_be_bytes());
        out[8..12].copy_from_slice(&batch_length.to_be_bytes());
        out[12..16].copy_from_slice(&(-1i32).to_be_bytes()); // partitionLeaderEpoch: the broker sets it
        out[16] = MAGIC;
        out[17..21].copy_from_slice(&crc.to_be_bytes());
        out[CRC_START..RECORD_BATCH_OVERHEAD].copy_from_slice(&tail);
    }

    /// Drops the section's bytes (the counts and timestamps stay).
    pub fn clear(&mut self) {
        spare::give_back(std::mem::take(&mut self.buf));
        self.crc = 0;
        self.crc_len = 0;
    }
}

/// Producer state and base offset, the header fields that a retry may change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerState {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub is_transactional: bool,
    pub base_offset: i64,
}

/// Where the records section is once the builder is closed for appends.
enum Closed {
    /// Compressed in another thread and installed (`install_compressed`): not built yet.
    Compressed(Py<PyBytes>),
    /// Bytes 61.. of `last_built`: a batch in flight holds its bytes once.
    InBuilt,
    /// Uncompressed and sent in place (`build_in_place`): the section stays in `core.buf`, read
    /// through buffer views, behind a header made per producer state.
    InPlace,
    /// `release()` dropped the bytes.
    Released,
}

/// One record decoded from a section: timestamp delta, key, value, headers.
type DecodedRecord<'a> = (i64, Option<&'a [u8]>, Option<&'a [u8]>, Vec<Header<'a>>);

/// Why a records section could not be decoded.
#[derive(Debug, PartialEq, Eq)]
pub struct DecodeError(&'static str);

impl From<DecodeError> for PyErr {
    fn from(err: DecodeError) -> PyErr {
        PyValueError::new_err(err.0)
    }
}

fn read_varint(data: &[u8], pos: &mut usize) -> Result<i64, DecodeError> {
    let mut v: u64 = 0;
    let mut shift = 0;
    loop {
        let b = *data.get(*pos).ok_or(DecodeError("truncated records section"))?;
        *pos += 1;
        v |= u64::from(b & 0x7F) << shift;
        if b & 0x80 == 0 {
            return Ok(((v >> 1) as i64) ^ -((v & 1) as i64));
        }
        shift += 7;
        if shift > 63 {
            return Err(DecodeError("varint longer than 10 bytes in records section"));
        }
    }
}

fn read_blob<'a>(data: &'a [u8], pos: &mut usize) -> Result<Option<&'a [u8]>, DecodeError> {
    let n = read_varint(data, pos)?;
    if n < 0 {
        return Ok(None);
    }
    let end = pos.checked_add(n as usize).filter(|end| *end <= data.len());
    let end = end.ok_or(DecodeError("truncated records section"))?;
    let blob = &data[*pos..end];
    *pos = end;
    Ok(Some(blob))
}

/// Decodes `count` records of an uncompressed section (the rare path: splitting a batch).
fn decode_section(data: &[u8], count: i32) -> Result<Vec<DecodedRecord<'_>>, DecodeError> {
    let mut pos = 0;
    let mut out = Vec::with_capacity(count.max(0) as usize);
    for _ in 0..count {
        let _length = read_varint(data, &mut pos)?;
        pos += 1; // attributes
        let ts_delta = read_varint(data, &mut pos)?;
        let _offset_delta = read_varint(data, &mut pos)?;
        let key = read_blob(data, &mut pos)?;
        let value = read_blob(data, &mut pos)?;
        let n_headers = read_varint(data, &mut pos)?;
        let mut headers = Vec::with_capacity(n_headers.max(0) as usize);
        for _ in 0..n_headers {
            let hk = read_blob(data, &mut pos)?.unwrap_or_default();
            let hv = read_blob(data, &mut pos)?;
            headers.push((hk, hv));
        }
        out.push((ts_delta, key, value, headers));
    }
    Ok(out)
}

static COMPRESSION: PyOnceLock<Py<PyModule>> = PyOnceLock::new();
static RECORD: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// `aioproducer.record_types.Record`, the named tuple `records()` gives back.
fn record_type(py: Python<'_>) -> PyResult<&Bound<'_, PyAny>> {
    Ok(RECORD.get_or_try_init(py, || py.import("aioproducer.record_types")?.getattr("Record").map(Bound::unbind))?.bind(py))
}

fn compression(py: Python<'_>) -> PyResult<&Bound<'_, PyModule>> {
    Ok(COMPRESSION.get_or_try_init(py, || py.import("aioproducer.protocol.compression").map(Bound::unbind))?.bind(py))
}

/// Headers as Python passes them (`(str, bytes | None)` pairs), held for the call.
type PyHeaders = Vec<(PyBackedStr, Option<PyBackedBytes>)>;

fn header_slices(headers: &Option<PyHeaders>) -> Vec<Header<'_>> {
    match headers {
        None => Vec::new(),
        Some(hs) => hs.iter().map(|(k, v)| (k.as_bytes(), v.as_deref())).collect(),
    }
}

/// Accumulates records for one partition and builds a magic-2 batch.
///
/// Owned by one `ProducerBatch`, touched only from the event loop's thread (the compression
/// thread reads the section through a read-only buffer, see `section_to_compress`). Open
/// (`try_append`, `append`) until `build` closes it; `build` may be called again with other
/// producer state, and then only re-packs the header and the CRC over the cached section
/// (Java's `ProducerBatch.resetProducerState`).
#[pyclass(name = "RecordBatchBuilder", module = "aioproducer._native")]
pub struct PyRecordBatchBuilder {
    core: Builder,
    codec: u8,
    level: Option<i64>,
    batch_size: i64,
    /// None while open for appends.
    closed: Option<Closed>,
    /// Records section size before compression, set when closed.
    uncompressed_size: usize,
    last_state: Option<ProducerState>,
    last_built: Option<Py<PyBytes>>,
    /// Buffer views of the open section handed out (`section_to_compress`): while any is
    /// alive the section may not grow or be dropped.
    exports: usize,
}

impl PyRecordBatchBuilder {
    pub fn create(codec: u8, batch_size: i64, level: Option<i64>, ratio: f64) -> Self {
        let factor = (codec != CODEC_NONE).then_some(ratio * COMPRESSION_RATE_ESTIMATION_FACTOR);
        PyRecordBatchBuilder {
            core: Builder::new(batch_size, factor),
            codec,
            level,
            batch_size,
            closed: None,
            uncompressed_size: 0,
            last_state: None,
            last_built: None,
            exports: 0,
        }
    }

    /// How many records of `record_bytes` each the batch holds at most (`batch.size` over the
    /// record's size), at least one: what a batch's per-record lists reserve at its first record.
    pub fn records_that_fit(&self, record_bytes: usize) -> usize {
        records_that_fit(self.batch_size, record_bytes)
    }

    /// The door the native data plane appends through (one record): the offset delta, or -1
    /// when the batch is full, closed, or its section is being read by the compression thread.
    pub fn append_record(&mut self, timestamp_ms: i64, key: Option<&[u8]>, value: Option<&[u8]>, headers: &[Header<'_>]) -> i64 {
        if self.closed.is_some() || self.exports > 0 {
            return -1;
        }
        self.core.try_append(timestamp_ms, key, value, headers)
    }

    fn closed_section_len(&self, py: Python<'_>) -> usize {
        match &self.closed {
            None => 0,
            Some(Closed::Compressed(b)) => b.bind(py).as_bytes().len(),
            Some(Closed::InBuilt) => self.last_built.as_ref().map_or(0, |b| b.bind(py).as_bytes().len() - RECORD_BATCH_OVERHEAD),
            Some(Closed::InPlace) => self.core.buf.len(),
            Some(Closed::Released) => 0,
        }
    }

    fn drop_section_if_unviewed(&mut self) {
        if self.exports == 0 {
            self.core.clear();
        }
    }

    /// How many records it holds.
    /// How far its records' timestamps spread (the largest minus the first's; 0 when empty).
    pub fn timestamp_spread(&self) -> i64 {
        self.core.max_ts - self.core.base_ts
    }

    /// See `release`: its record bytes dropped, its counts and timestamps kept.
    pub fn release_records(&mut self) {
        self.closed = Some(Closed::Released);
        self.drop_section_if_unviewed();
        self.last_built = None;
        self.last_state = None;
    }

    pub fn count(&self) -> i32 {
        self.core.count
    }

    /// Header plus uncompressed records section (`uncompressed_size_in_bytes`).
    pub fn uncompressed_len(&self) -> usize {
        RECORD_BATCH_OVERHEAD + if self.closed.is_none() { self.core.buf.len() } else { self.uncompressed_size }
    }

    /// Wire size of the batch: exact once built or when uncompressed, else estimated. O(1).
    pub fn wire_size(&self, py: Python<'_>) -> usize {
        if self.closed.is_some() {
            return RECORD_BATCH_OVERHEAD + self.closed_section_len(py);
        }
        RECORD_BATCH_OVERHEAD + self.core.used().max(0) as usize
    }

    pub fn compression_ratio_of(&self, py: Python<'_>) -> f64 {
        if self.closed.is_none() || self.uncompressed_size == 0 {
            return 1.0;
        }
        self.closed_section_len(py) as f64 / self.uncompressed_size as f64
    }

    /// The records section as sent, uncompressed if `decompressed`.
    fn sent_section<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let sent = match &self.closed {
            None | Some(Closed::Released) => return Ok(None),
            Some(Closed::Compressed(b)) => b.bind(py).as_bytes(),
            Some(Closed::InPlace) => &self.core.buf,
            Some(Closed::InBuilt) => match &self.last_built {
                Some(b) => &b.bind(py).as_bytes()[RECORD_BATCH_OVERHEAD..],
                None => return Ok(None),
            },
        };
        let decompressed = compression(py)?.getattr("decompress")?.call1((self.codec, PyBytes::new(py, sent)))?;
        Ok(Some(decompressed.cast_into::<PyBytes>()?))
    }
}

#[pymethods]
impl PyRecordBatchBuilder {
    #[new]
    #[pyo3(signature = (compression_type = 0, batch_size = 16384, compression_level = None, *, estimated_compression_ratio = 1.0))]
    fn new(py: Python<'_>, compression_type: i64, batch_size: i64, compression_level: Option<i64>, estimated_compression_ratio: f64) -> PyResult<Self> {
        guarded("RecordBatchBuilder.__new__", || {
            if !matches!(u8::try_from(compression_type), Ok(CODEC_NONE | CODEC_GZIP | CODEC_LZ4 | CODEC_ZSTD)) {
                // Unknown ids and snappy (an optional library): the Python check says which, and how to fix it.
                compression(py)?.getattr("check_available")?.call1((compression_type,))?;
            }
            Ok(Self::create(compression_type as u8, batch_size, compression_level, estimated_compression_ratio))
        })
    }

    #[getter]
    fn compression_type(&self) -> PyResult<u8> {
        guarded("RecordBatchBuilder.compression_type", || Ok(self.codec))
    }

    #[getter]
    fn compression_level(&self) -> PyResult<Option<i64>> {
        guarded("RecordBatchBuilder.compression_level", || Ok(self.level))
    }

    #[getter]
    fn batch_size(&self) -> PyResult<i64> {
        guarded("RecordBatchBuilder.batch_size", || Ok(self.batch_size))
    }

    #[getter]
    fn record_count(&self) -> PyResult<i32> {
        guarded("RecordBatchBuilder.record_count", || Ok(self.count()))
    }

    /// Timestamp of the first record (deltas are relative to it); -1 when empty.
    #[getter]
    fn base_timestamp(&self) -> PyResult<i64> {
        guarded("RecordBatchBuilder.base_timestamp", || Ok(self.core.base_ts))
    }

    /// Largest record timestamp; -1 when empty.
    #[getter]
    fn max_timestamp(&self) -> PyResult<i64> {
        guarded("RecordBatchBuilder.max_timestamp", || Ok(self.core.max_ts))
    }

    /// True once `build` (or `install_compressed`) closed it: no more appends.
    #[getter]
    fn is_closed(&self) -> PyResult<bool> {
        guarded("RecordBatchBuilder.is_closed", || Ok(self.closed.is_some()))
    }

    /// Header plus uncompressed records section.
    #[getter]
    fn uncompressed_size_in_bytes(&self) -> PyResult<usize> {
        guarded("RecordBatchBuilder.uncompressed_size_in_bytes", || Ok(self.uncompressed_len()))
    }

    /// Wire size of the batch: exact once built or when uncompressed, else estimated. O(1).
    #[getter]
    fn estimated_size_in_bytes(&self, py: Python<'_>) -> PyResult<usize> {
        guarded("RecordBatchBuilder.estimated_size_in_bytes", || Ok(self.wire_size(py)))
    }

    /// Compressed / uncompressed section size once closed (1.0 before, or when empty).
    #[getter]
    fn compression_ratio(&self, py: Python<'_>) -> PyResult<f64> {
        guarded("RecordBatchBuilder.compression_ratio", || Ok(self.compression_ratio_of(py)))
    }

    /// How many bytes the first `build` would compress (0: none, or closed already). O(1).
    #[getter]
    fn bytes_to_compress(&self) -> PyResult<usize> {
        guarded("RecordBatchBuilder.bytes_to_compress", || Ok(if self.closed.is_some() || self.codec == CODEC_NONE { 0 } else { self.core.buf.len() }))
    }

    #[pyo3(signature = (timestamp_ms, key, value, headers = None))]
    fn has_room_for(&self, timestamp_ms: i64, key: Option<&[u8]>, value: Option<&[u8]>, headers: Option<PyHeaders>) -> PyResult<bool> {
        guarded("RecordBatchBuilder.has_room_for", || Ok(self.closed.is_none() && self.core.has_room_for(timestamp_ms, key, value, &header_slices(&headers))))
    }

    /// Append if the record fits: its offset delta, or -1 when full or closed (Java's `tryAppend`).
    #[pyo3(signature = (timestamp_ms, key, value, headers = None))]
    fn try_append(&mut self, timestamp_ms: i64, key: Option<&[u8]>, value: Option<&[u8]>, headers: Option<PyHeaders>) -> PyResult<i64> {
        guarded("RecordBatchBuilder.try_append", || Ok(self.append_record(timestamp_ms, key, value, &header_slices(&headers))))
    }

    /// Append whatever the size; its offset delta. RuntimeError once closed (a caller's bug).
    #[pyo3(signature = (timestamp_ms, key, value, headers = None))]
    fn append(&mut self, timestamp_ms: i64, key: Option<&[u8]>, value: Option<&[u8]>, headers: Option<PyHeaders>) -> PyResult<i64> {
        guarded("RecordBatchBuilder.append", || {
            if self.closed.is_some() {
                return Err(PyRuntimeError::new_err("record batch is closed for appends: it was already built"));
            }
            if self.exports > 0 {
                return Err(PyRuntimeError::new_err("record batch is being compressed: it cannot grow"));
            }
            Ok(self.core.append(timestamp_ms, key, value, &header_slices(&headers)))
        })
    }

    /// Keyless `values[start:]`, one timestamp, while each is `bytes` and fits: the index of
    /// the first value not appended (`send_many`'s bulk path; offsets are consecutive).
    #[pyo3(signature = (timestamp_ms, values, start = 0))]
    fn try_append_values(&mut self, timestamp_ms: i64, values: &Bound<'_, PyList>, start: usize) -> PyResult<usize> {
        guarded("RecordBatchBuilder.try_append_values", || {
            let mut i = start;
            let stop = values.len();
            while i < stop {
                let Ok(item) = values.get_item(i) else { break };
                let Ok(value) = item.cast::<PyBytes>() else { break };
                if self.append_record(timestamp_ms, None, Some(value.as_bytes()), &[]) < 0 {
                    break;
                }
                i += 1;
            }
            Ok(i)
        })
    }

    /// Close the builder and return the batch with this producer state.
    ///
    /// The section is compressed on the first call and cached; later calls (a retry after an
    /// epoch bump or a sequence reset) only re-pack the header and recompute the CRC.
    #[pyo3(signature = (producer_id = -1, producer_epoch = -1, base_sequence = -1, is_transactional = false, base_offset = 0))]
    fn build<'py>(
        slf: &Bound<'py, Self>,
        producer_id: i64,
        producer_epoch: i16,
        base_sequence: i32,
        is_transactional: bool,
        base_offset: i64,
    ) -> PyResult<Bound<'py, PyBytes>> {
        guarded("RecordBatchBuilder.build", || {
            Self::build_with(slf, ProducerState { producer_id, producer_epoch, base_sequence, is_transactional, base_offset })
        })
    }

    /// A read-only view of the section the first `build` would compress, or None if it would
    /// not compress. No copy: the compression thread reads it while the builder stays with
    /// its owner, which refuses appends until the view is released; the result comes back
    /// through `install_compressed`.
    fn section_to_compress<'py>(slf: &Bound<'py, Self>) -> PyResult<Option<Bound<'py, PyMemoryView>>> {
        guarded("RecordBatchBuilder.section_to_compress", || {
            {
                let this = slf.borrow();
                if this.closed.is_some() || this.codec == CODEC_NONE || this.core.count == 0 {
                    return Ok(None);
                }
            }
            Ok(Some(PyMemoryView::from(slf.as_any())?))
        })
    }

    /// Close the builder with `section` (from `section_to_compress`) compressed elsewhere.
    ///
    /// Ignored if the builder was closed or grew since: `build` then compresses what it
    /// holds itself, so a stale result can never drop a record.
    fn install_compressed(&mut self, section: &Bound<'_, PyAny>, compressed: Bound<'_, PyBytes>) -> PyResult<()> {
        guarded("RecordBatchBuilder.install_compressed", || {
            let section_len = section.len()?;
            if self.closed.is_none() && self.core.buf.len() == section_len && self.core.count > 0 {
                self.uncompressed_size = section_len;
                self.closed = Some(Closed::Compressed(compressed.unbind()));
                self.drop_section_if_unviewed();
            }
            Ok(())
        })
    }

    /// Drop the record bytes once the batch is acknowledged or failed; keeps counts and
    /// timestamps. A finished batch stays reachable from the futures users hold, so without
    /// this every finished batch would pin its bytes for as long as any of them lives.
    fn release(&mut self) -> PyResult<()> {
        guarded("RecordBatchBuilder.release", || {
            self.release_records();
            Ok(())
        })
    }

    /// The appended records in order, as `Record(timestamp, key, value, headers)`: decodes
    /// (and decompresses) the section, for the rare split path.
    fn records<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyAny>>> {
        guarded("RecordBatchBuilder.records", || {
            let sent = self.sent_section(py)?;
            let section: &[u8] = match (&sent, &self.closed) {
                (Some(s), _) => s.as_bytes(),
                (None, None) => &self.core.buf,
                (None, Some(_)) => return Err(PyRuntimeError::new_err("the record batch was released: its records are gone")),
            };
            let base_ts = self.core.base_ts;
            let record = record_type(py)?;
            decode_section(section, self.core.count)?
                .into_iter()
                .map(|(delta, key, value, headers)| {
                    let hs = headers
                        .into_iter()
                        .map(|(k, v)| {
                            let key = PyString::new(py, std::str::from_utf8(k).map_err(|e| PyValueError::new_err(e.to_string()))?);
                            Ok((key, v.map(|v| PyBytes::new(py, v))))
                        })
                        .collect::<PyResult<Vec<_>>>()?;
                    record.call1((base_ts + delta, key.map(|k| PyBytes::new(py, k)), value.map(|v| PyBytes::new(py, v)), PyList::new(py, hs)?))
                })
                .collect()
        })
    }

    /// Redistribute the records into new open builders of at most `max_batch_size` (Java's
    /// `ProducerBatch.split`, after MESSAGE_TOO_LARGE): same codec and level; a single
    /// record larger than `max_batch_size` still gets a builder of its own.
    fn split(&self, py: Python<'_>, max_batch_size: i64) -> PyResult<Vec<Py<PyRecordBatchBuilder>>> {
        guarded("RecordBatchBuilder.split", || {
            let ratio = if self.closed.is_some() { self.compression_ratio_of(py) } else { 1.0 };
            let sent = self.sent_section(py)?;
            let section: &[u8] = match (&sent, &self.closed) {
                (Some(s), _) => s.as_bytes(),
                (None, None) => &self.core.buf,
                (None, Some(_)) => return Err(PyRuntimeError::new_err("the record batch was released: its records are gone")),
            };
            let mut out: Vec<PyRecordBatchBuilder> = Vec::new();
            for (delta, key, value, headers) in decode_section(section, self.core.count)? {
                let ts = self.core.base_ts + delta;
                let appended = out.last_mut().is_some_and(|b| b.core.try_append(ts, key, value, &headers) >= 0);
                if !appended {
                    let mut piece = PyRecordBatchBuilder::create(self.codec, max_batch_size, self.level, ratio.max(1.0));
                    piece.core.append(ts, key, value, &headers);
                    out.push(piece);
                }
            }
            out.into_iter().map(|b| Py::new(py, b)).collect()
        })
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        guarded("RecordBatchBuilder.__repr__", || {
            Ok(format!(
                "RecordBatchBuilder(codec={}, records={}, size~{}/{}, closed={})",
                self.codec,
                self.core.count,
                self.wire_size(py),
                self.batch_size,
                if self.closed.is_some() { "True" } else { "False" }
            ))
        })
    }

    /// The open section, read-only, for the compressor (no copy), or the section sent in place.
    unsafe fn __getbuffer__(mut slf: PyRefMut<'_, Self>, view: *mut ffi::Py_buffer, flags: c_int) -> PyResult<()> {
        guarded("RecordBatchBuilder.__getbuffer__", || {
            if flags & ffi::PyBUF_WRITABLE == ffi::PyBUF_WRITABLE {
                return Err(PyBufferError::new_err("a record batch's section is read-only"));
            }
            if !matches!(slf.closed, None | Some(Closed::InPlace)) {
                return Err(PyBufferError::new_err("the record batch is closed: its section was compressed or built"));
            }
            let (ptr, len) = (slf.core.buf.as_ptr(), slf.core.buf.len());
            // SAFETY: `view` is the buffer the caller asked to fill; `ptr`/`len` are the section's,
            // which stays allocated and unchanged while `exports` > 0 (appends are refused, and
            // `clear` waits for the last view's release).
            let rc = unsafe { ffi::PyBuffer_FillInfo(view, slf.as_ptr(), ptr as *mut _, len as ffi::Py_ssize_t, 1, flags) };
            if rc != 0 {
                return Err(PyErr::fetch(slf.py()));
            }
            slf.exports += 1;
            Ok(())
        })
    }

    unsafe fn __releasebuffer__(mut slf: PyRefMut<'_, Self>, _view: *mut ffi::Py_buffer) -> PyResult<()> {
        guarded("RecordBatchBuilder.__releasebuffer__", || {
            slf.exports -= 1;
            // A section compressed, built or released elsewhere was kept only for this view; a
            // section sent in place is the batch's records until it is released.
            if matches!(slf.closed, Some(Closed::Compressed(_) | Closed::InBuilt | Closed::Released)) {
                slf.drop_section_if_unviewed();
            }
            Ok(())
        })
    }
}

/// A batch sent in place (`build_in_place`): its header, a view of its section, their total length.
pub type InPlace<'py> = (Bound<'py, PyBytes>, Bound<'py, PyMemoryView>, usize);

// ------------------------------------------------------------------ the twins of protocol/records.py

// The record-size formula and the varint exist in Python too (`protocol/records.py`,
// `protocol/primitives.py`): the accumulator sizes `send()`'s records with the Python formula and
// `send_arrow()`'s rows with this one. These expose the Rust side so that one test
// (tests/unit/test_native_twins.py) checks each pair against each other over sizes, headers and
// timestamps; the producer calls none of them.

impl PyRecordBatchBuilder {
    /// `build` for a `NativeBatch` (`records()`): its producer state, base offset 0.
    pub fn build_for<'py>(
        slf: &Bound<'py, Self>,
        producer_id: i64,
        producer_epoch: i16,
        base_sequence: i32,
        is_transactional: bool,
    ) -> PyResult<Bound<'py, PyBytes>> {
        Self::build_with(slf, ProducerState { producer_id, producer_epoch, base_sequence, is_transactional, base_offset: 0 })
    }

    /// The batch with `state` as two pieces sent one after the other, its header (61 bytes, made
    /// now) and a read-only view of its section where the records were appended, with their
    /// total length (so that the request's encoding needs no view to learn it); None when it
    /// must be built (`build_for`): compressed, built already, empty, or a section under
    /// `min_section` bytes (cheaper to copy than to carry as two chunks).
    ///
    /// Why: `build` copies the section into new bytes after a CRC over it, and by then the
    /// section is cold: a batch waits in the accumulator behind up to `buffer.memory` of others.
    /// Built, a 10 KB batch made 30 MB earlier took 3.3-3.4 µs of the event loop's thread, a CRC
    /// over the same cold section alone 2.3, a build while still in the cache 1.2 (3,000
    /// batches, 2026-12-04). In place, the CRC was taken at each append (while the record was in
    /// the cache from its copy in) and the section is read once, by the socket's writer.
    /// The builder is closed for appends from here, and keeps the section while any view lives.
    pub fn build_in_place<'py>(slf: &Bound<'py, Self>, state: ProducerState, min_section: usize) -> PyResult<Option<InPlace<'py>>> {
        let py = slf.py();
        let (header, len) = {
            let mut this = slf.borrow_mut();
            let open = match this.closed {
                None => true,
                Some(Closed::InPlace) => false,
                _ => return Ok(None),
            };
            if this.codec != CODEC_NONE || this.core.count == 0 || this.core.buf.len() < min_section {
                return Ok(None);
            }
            if open {
                this.uncompressed_size = this.core.buf.len();
                this.closed = Some(Closed::InPlace);
            }
            let core = &this.core;
            let header = PyBytes::new_with(py, RECORD_BATCH_OVERHEAD, |out| {
                core.write_header_in_place(out, &state);
                Ok(())
            })?;
            (header, RECORD_BATCH_OVERHEAD + core.buf.len())
        };
        Ok(Some((header, PyMemoryView::from(slf.as_any())?, len)))
    }

    /// `build`'s work: the batch with `state`, compressed once, cached per state.
    fn build_with<'py>(slf: &Bound<'py, Self>, state: ProducerState) -> PyResult<Bound<'py, PyBytes>> {
        let py = slf.py();
        let compressed: Option<Bound<'py, PyBytes>> = {
            let this = slf.borrow();
            if this.core.count == 0 {
                return Err(PyRuntimeError::new_err("cannot build an empty record batch"));
            }
            if this.last_state == Some(state) {
                if let Some(built) = &this.last_built {
                    return Ok(built.bind(py).clone());
                }
            }
            match &this.closed {
                Some(Closed::Released) => return Err(PyRuntimeError::new_err("cannot build a released record batch")),
                None if this.codec != CODEC_NONE => {
                    let (codec, level) = (this.codec, this.level);
                    drop(this); // the view below borrows the builder
                    let view = PyMemoryView::from(slf.as_any())?;
                    let out = compression(py)?.getattr("compress")?.call1((codec, &view, level))?;
                    view.call_method0("release")?;
                    Some(out.cast_into::<PyBytes>()?)
                }
                _ => None,
            }
        };
        let mut this = slf.borrow_mut();
        let this = &mut *this;
        let built = {
            let section: &[u8] = match (&compressed, &this.closed) {
                (Some(c), _) => c.as_bytes(),
                (None, None | Some(Closed::InPlace)) => &this.core.buf,
                (None, Some(Closed::Compressed(c))) => c.bind(py).as_bytes(),
                (None, Some(Closed::InBuilt)) => match &this.last_built {
                    Some(b) => &b.bind(py).as_bytes()[RECORD_BATCH_OVERHEAD..],
                    None => return Err(PyRuntimeError::new_err("record batch lost its bytes")),
                },
                (None, Some(Closed::Released)) => return Err(PyRuntimeError::new_err("cannot build a released record batch")),
            };
            let (core, codec) = (&this.core, this.codec);
            PyBytes::new_with(py, RECORD_BATCH_OVERHEAD + section.len(), |out| {
                core.write_batch(out, section, &state, codec);
                Ok(())
            })?
        };
        if matches!(this.closed, None | Some(Closed::InPlace)) {
            this.uncompressed_size = this.core.buf.len();
        }
        this.closed = Some(Closed::InBuilt);
        this.drop_section_if_unviewed();
        this.last_state = Some(state);
        this.last_built = Some(built.clone().unbind());
        Ok(built)
    }
}

/// `size_upper_bound`: the Python twin is `estimate_size_in_bytes_upper_bound`.
#[pyfunction(name = "estimate_size_in_bytes_upper_bound")]
#[pyo3(signature = (key, value, headers = None))]
pub fn py_size_upper_bound(key: Option<&[u8]>, value: Option<&[u8]>, headers: Option<PyHeaders>) -> PyResult<usize> {
    guarded("estimate_size_in_bytes_upper_bound", || Ok(size_upper_bound(key, value, &header_slices(&headers))))
}

/// `record_size`: the Python twin is `record_size_in_bytes`.
#[pyfunction(name = "record_size_in_bytes")]
#[pyo3(signature = (offset_delta, timestamp_delta, key, value, headers = None))]
pub fn py_record_size(offset_delta: i64, timestamp_delta: i64, key: Option<&[u8]>, value: Option<&[u8]>, headers: Option<PyHeaders>) -> PyResult<usize> {
    guarded("record_size_in_bytes", || Ok(record_size(offset_delta, timestamp_delta, key, value, &header_slices(&headers))))
}

/// `put_varint`'s bytes for `value`: the Python twin is `protocol.primitives.write_varlong`.
#[pyfunction(name = "write_varlong")]
pub fn py_write_varlong(py: Python<'_>, value: i64) -> PyResult<Bound<'_, PyBytes>> {
    guarded("write_varlong", || {
        let mut buf = Vec::with_capacity(10);
        put_varint(&mut buf, value);
        Ok(PyBytes::new(py, &buf))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_s_rows_reserve_what_fits_of_the_first_record_s_size_bounded() {
        assert_eq!(records_that_fit(16384, 1024 + 8), 15);
        assert_eq!(records_that_fit(16384, 10 * 1024), 1); // each record a batch of its own
        assert_eq!(records_that_fit(16384, 0), 1024); // empty records: the bound
        assert_eq!(records_that_fit(1 << 20, 100), 1024);
        assert_eq!(records_that_fit(0, 100), 1);
        assert_eq!(records_that_fit(-5, 100), 1);
    }

    #[test]
    fn the_first_record_reserves_the_whole_batch_and_the_rest_never_reallocate() {
        let value = [7u8; 1000];
        let mut b = Builder::new(16384, None);
        assert!(b.try_append(1, None, Some(&value), &[]) == 0);
        let reserved = b.buf.capacity();
        assert_eq!(reserved, 16384 - RECORD_BATCH_OVERHEAD);
        let mut appended = 1;
        while b.try_append(1, None, Some(&value), &[]) >= 0 {
            appended += 1;
        }
        assert_eq!((appended, b.buf.capacity()), (16, reserved));
        // A record larger than the batch reserves its own size; a huge batch.size is capped.
        let mut big = Builder::new(16384, None);
        big.append(1, None, Some(&[0u8; 40_000]), &[]);
        assert!(big.buf.capacity() < 40_100);
        let mut huge = Builder::new(64 << 20, None);
        huge.try_append(1, None, Some(b"v"), &[]);
        assert_eq!(huge.buf.capacity(), FIRST_RESERVE_MAX);
    }

    #[test]
    fn crc_of_a_concatenation_from_the_crcs_of_its_halves() {
        let data: Vec<u8> = (0..70_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
        let sweep = (0..2_100).map(|len| (7, 7 + len));
        let cases = [(0, 0), (0, 5), (5, 5), (40, 41), (40, 10_280), (17, 70_000), (65_536, 70_000), (1, 65_537), (3, 3 + 0xFFFF), (9, 9 + 0x1111)];
        for (split, end) in cases.into_iter().chain(sweep) {
            let (a, b) = (&data[..split], &data[split..end]);
            let expected = crc32c::crc32c(&data[..end]);
            assert_eq!(crc32c_concat(crc32c::crc32c(a), crc32c::crc32c(b), b.len()), expected, "{split}..{end}");
            assert_eq!(crc32c::crc32c_combine(crc32c::crc32c(a), crc32c::crc32c(b), b.len()), expected);
        }
    }

    #[test]
    fn varints() {
        let mut b = Vec::new();
        for (n, want) in [(0i64, &[0u8][..]), (-1, &[1]), (1, &[2]), (63, &[0x7e]), (64, &[0x80, 1])] {
            b.clear();
            put_varint(&mut b, n);
            assert_eq!(b, want);
            assert_eq!(varint_size(n), want.len());
        }
        assert_eq!(varint_size(i64::MIN), 10);
        assert_eq!(varint_size(i64::MAX), 10);
    }

    #[test]
    fn record_length_prefix_matches_body() {
        for value_len in [0usize, 1, 50, 57, 58, 63, 64, 100, 8000, 8191, 8192, 20000] {
            let value = vec![7u8; value_len];
            let mut b = Builder::new(1 << 30, None);
            let size = record_size(0, 0, None, Some(&value), &[]);
            b.try_append(0, None, Some(&value), &[]);
            assert_eq!(b.section().len(), size);
            let mut pos = 0;
            let body = read_varint(b.section(), &mut pos).unwrap() as usize;
            assert_eq!(pos + body, size, "value of {value_len} B");
        }
    }

    #[test]
    fn refuses_past_the_limit_but_never_the_first() {
        let mut b = Builder::new(100, None);
        assert_eq!(b.try_append(5, None, Some(&[0u8; 500]), &[]), 0);
        assert_eq!(b.try_append(5, None, Some(b"x"), &[]), -1);
        let mut b = Builder::new(100, None);
        assert_eq!(b.try_append(5, Some(b"k"), Some(b"v"), &[(b"h", None)]), 0);
        assert_eq!(b.try_append(4, Some(b"k"), Some(b"v"), &[]), 1);
        assert_eq!((b.base_ts, b.max_ts), (5, 5));
    }

    #[test]
    fn decodes_what_it_encodes() {
        let mut b = Builder::new(1 << 20, None);
        b.try_append(10, Some(b"key"), None, &[(b"a", Some(b"1")), (b"b", None)]);
        b.try_append(7, None, Some(b""), &[]);
        let records = decode_section(b.section(), 2).unwrap();
        assert_eq!(records[0], (0, Some(&b"key"[..]), None, vec![(&b"a"[..], Some(&b"1"[..])), (&b"b"[..], None)]));
        assert_eq!(records[1], (-3, None, Some(&b""[..]), vec![]));
    }
}
