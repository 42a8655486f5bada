//! The Produce request encoder and response decoder: the producer's hot path, per request.
//!
//! Why not the declarative codec of `aioproducer/protocol/messages.py`? It is general (any API,
//! any version, bodies as dicts) and pays for it on every message: a dict built or read per
//! struct and a closure call per field. A Produce request is sent per node and per drain pass,
//! and with large records (one record per batch) there is one request for every two or three
//! records, so that generality was paid every few records: 20-35 µs per request and response
//! (timeit, three 10 KB batches, v8/v10). This module writes and reads the same bytes with
//! straight-line code and no intermediate objects:
//!
//! * [`encode::ProduceRequest`] sizes the whole frame first ([`encode::ProduceRequest::frame_size`])
//!   and writes it into one buffer of that size ([`encode::ProduceRequest::write`]): size prefix,
//!   request header, body, the record batches copied in. Or it leaves the batches of a threshold
//!   or more out ([`encode::ProduceRequest::write_spliced`]) and says where they go: Python then
//!   gets the frame as chunks, those batches by reference between `bytes` pieces, so that a large
//!   request reaches the connection's writer thread (which reads chunks in place) with no copy on
//!   the event loop's thread; a frame without such batches is one `bytes`.
//! * [`decode::decode`] reads a response into [`decode::ProduceResponse`]: one
//!   [`decode::PartitionResponse`] per partition in the order the broker wrote them, the topic
//!   level flattened into each partition, strings borrowed from the payload.
//!
//! The wire layout is the one declared in `messages._PRODUCE_REQUEST` / `_PRODUCE_RESPONSE`
//! (Kafka's `ProduceRequest.json` / `ProduceResponse.json`) for every version aioproducer speaks,
//! v3 to v12: v3 adds the transactional id, v5 `log_start_offset`, v8 `record_errors` and
//! `error_message`, v9 the flexible (compact, tagged) encoding with request header v2 and response
//! header v1, v10 the KIP-951 leader hints as tagged fields (`current_leader`, tag 0 of a
//! partition; `node_endpoints`, tag 0 of the body); v11 only adds an error code, v12 none (it
//! changes only what a broker does with a transactional request). `tests/unit/test_produce_codec.py`
//! holds both directions to byte-for-byte and value-for-value equality with the generic codec,
//! for every version.
//!
//! Errors follow the generic codec's contract: decoding fails only with [`DecodeError`]
//! (`aioproducer.errors.ProtocolError` in Python) for truncated or malformed input, never a
//! panic (bytes after a complete body are ignored, as for every response); encoding a value that
//! does not fit fails with [`EncodeError::Value`] (`ValueError`); a version outside v3-v12 is
//! `UnsupportedVersion` (`aioproducer.errors.UnsupportedVersionError`).
//!
//! Pure functions over bytes (`encode`, `decode`): no sockets, no Python; `python` holds the
//! PyO3 wrappers that `aioproducer/protocol/produce.py` exports.

pub mod answer;
pub mod decode;
pub mod encode;
pub mod python;

/// The Produce API's key.
pub const PRODUCE_API_KEY: i16 = 0;
/// The Produce versions this codec speaks (the same range as `messages.SUPPORTED_VERSIONS`).
pub const MIN_VERSION: i16 = 3;
pub const MAX_VERSION: i16 = 12;
/// From this version on, Produce uses compact strings/arrays/bytes and tagged fields (KIP-482).
pub const FIRST_FLEXIBLE_VERSION: i16 = 9;
/// From this version on, the response carries the KIP-951 leader hints as tagged fields.
pub const FIRST_LEADER_HINTS_VERSION: i16 = 10;

/// Why a request did not encode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EncodeError {
    /// A version outside v3-v12.
    UnsupportedVersion(i64),
    /// A value that does not fit its field, named in the message.
    Value(String),
}

/// Why a response did not decode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeError {
    /// A version outside v3-v12.
    UnsupportedVersion(i64),
    /// Truncated or malformed input, with the offset where it went wrong.
    Malformed(String),
}

/// `Some(version)` if this codec speaks it.
pub fn supported(version: i64) -> Option<i16> {
    (i64::from(MIN_VERSION)..=i64::from(MAX_VERSION)).contains(&version).then_some(version as i16)
}

/// What an unsupported version's error says, in both directions.
pub fn unsupported_message(version: i64) -> String {
    format!("Produce v{version} is not supported (aioproducer speaks v{MIN_VERSION}-v{MAX_VERSION})")
}
