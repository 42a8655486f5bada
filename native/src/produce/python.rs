//! The PyO3 wrappers of the Produce codec, exported by `aioproducer/protocol/produce.py` under
//! the same names: Python objects in, the pure functions of `encode` and `decode`, Python objects
//! out. The named tuples (`ProduceResponse`, `PartitionResponse`, `NodeEndpoint`) stay defined in
//! `produce.py`; they are made here with `tuple.__new__`, which skips the Python-level `__new__`
//! a NamedTuple generates.

use pyo3::buffer::PyBuffer;
use pyo3::exceptions::{PyIndexError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBytes, PyList, PySlice, PyString, PyTuple};

use super::decode::{decode, NodeEndpoint, PartitionResponse, ProduceResponse};
use super::encode::{PartitionData, ProduceRequest, Records, TopicData};
use super::{supported, unsupported_message, DecodeError};
use crate::guarded;

/// What Python sees of the codec: `aioproducer.errors`' two exceptions, `tuple.__new__` and the
/// three named tuples of `aioproducer.protocol.produce` (imported at the first call, when that
/// module has long finished importing this one).
pub(crate) struct Types {
    protocol_error: Py<PyAny>,
    unsupported_version: Py<PyAny>,
    tuple_new: Py<PyAny>,
    produce_response: Py<PyAny>,
    partition_response: Py<PyAny>,
    node_endpoint: Py<PyAny>,
}

static TYPES: PyOnceLock<Types> = PyOnceLock::new();

pub(crate) fn types(py: Python<'_>) -> PyResult<&Types> {
    TYPES.get_or_try_init(py, || {
        let errors = py.import("aioproducer.errors")?;
        let produce = py.import("aioproducer.protocol.produce")?;
        Ok(Types {
            protocol_error: errors.getattr("ProtocolError")?.unbind(),
            unsupported_version: errors.getattr("UnsupportedVersionError")?.unbind(),
            tuple_new: py.get_type::<PyTuple>().getattr("__new__")?.unbind(),
            produce_response: produce.getattr("ProduceResponse")?.unbind(),
            partition_response: produce.getattr("PartitionResponse")?.unbind(),
            node_endpoint: produce.getattr("NodeEndpoint")?.unbind(),
        })
    })
}

/// An exception of class `cls` (one of [`Types`]) with `message`.
fn error(py: Python<'_>, cls: &Py<PyAny>, message: String) -> PyErr {
    match cls.bind(py).call1((message,)) {
        Ok(exc) => PyErr::from_value(exc),
        Err(e) => e,
    }
}

pub(crate) fn unsupported(py: Python<'_>, version: i64) -> PyErr {
    match types(py) {
        Ok(t) => error(py, &t.unsupported_version, unsupported_message(version)),
        Err(e) => e,
    }
}

// ================================================================== encoding

/// A partition's records as the request holds them while it is encoded.
enum Held<'py> {
    Null,
    /// `bytes`, what `RecordBatchBuilder.build()` returns: read in place.
    Bytes(Bound<'py, PyBytes>),
    /// Any other buffer (`bytearray`, `memoryview`): its bytes copied out, and the object.
    Copied(Vec<u8>, Bound<'py, PyAny>),
    /// A batch in two pieces, `(header, section)` (a batch sent in place, see
    /// `PyRecordBatchBuilder::build_in_place`), always spliced, never read here; their total length.
    Pieces(Bound<'py, PyAny>, Bound<'py, PyAny>, usize),
}

impl<'py> Held<'py> {
    fn records(&self) -> Records<'_> {
        match self {
            Held::Null => Records::Null,
            Held::Bytes(b) => Records::Bytes(b.as_bytes()),
            Held::Copied(v, _) => Records::Bytes(v),
            Held::Pieces(_, _, len) => Records::Spliced(*len),
        }
    }

    /// The objects to send by reference, in order, when the batch is spliced in.
    fn objects(&self) -> Vec<&Bound<'py, PyAny>> {
        match self {
            Held::Null => vec![],
            Held::Bytes(b) => vec![b.as_any()],
            Held::Copied(_, o) => vec![o],
            Held::Pieces(header, section, _) => vec![header, section],
        }
    }
}

/// Record batches at least this large are chunks of their own, by reference, instead of being
/// copied into the frame (`protocol/produce.py` exports it): a large request then goes to the
/// connection's writer thread without a copy on the event loop's thread, which reads the chunks in
/// place; smaller batches are cheaper to copy than to carry as a list element.
pub const SPLICE_THRESHOLD: usize = 4096;

/// The `ValueError` of a value that does not fit, naming where it was.
fn bad_value(version: i64, field: std::fmt::Arguments<'_>, why: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(format!("cannot encode Produce v{version}: {field}: {why}"))
}

/// An integer argument of the request, `ValueError` naming it if it does not fit its type.
fn int<'a, 'py, T: FromPyObject<'a, 'py>>(version: i64, value: &'a Bound<'py, PyAny>, field: std::fmt::Arguments<'_>) -> PyResult<T>
where
    T::Error: std::fmt::Display,
{
    value.extract::<T>().map_err(|e| bad_value(version, field, e))
}

/// A nullable string argument, `ValueError` naming it if it is neither str nor None.
fn text<'a>(version: i64, value: &'a Bound<'_, PyAny>, field: std::fmt::Arguments<'_>) -> PyResult<Option<&'a str>> {
    if value.is_none() {
        return Ok(None);
    }
    let string = value.cast::<PyString>().map_err(|_| bad_value(version, field, "not a str"))?;
    string.to_str().map(Some).map_err(|e| bad_value(version, field, e))
}

/// The two items of a `(a, b)` tuple, `ValueError` naming `field` if it is not one.
fn pair<'py>(version: i64, item: &Bound<'py, PyAny>, field: std::fmt::Arguments<'_>) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
    match item.cast::<PyTuple>() {
        Ok(t) if t.len() == 2 => Ok((t.get_item(0)?, t.get_item(1)?)),
        _ => Err(bad_value(version, field, "not a pair (tuple of 2)")),
    }
}

fn records<'py>(version: i64, value: Bound<'py, PyAny>, t: usize, p: usize) -> PyResult<Held<'py>> {
    if value.is_none() {
        return Ok(Held::Null);
    }
    if let Ok(pieces) = value.cast::<PyTuple>() {
        let field = format_args!("topic_data[{t}] partition {p} records");
        if pieces.len() != 2 {
            return Err(bad_value(version, field, "pieces of a batch are a (header, section) pair"));
        }
        let (header, section) = (pieces.get_item(0)?, pieces.get_item(1)?);
        let mut len = 0;
        for piece in [&header, &section] {
            let view = PyBuffer::<u8>::get(piece).map_err(|e| bad_value(version, field, e))?;
            if !view.is_c_contiguous() {
                return Err(bad_value(version, field, "a piece of a batch is not a contiguous buffer"));
            }
            len += view.len_bytes();
        }
        return Ok(Held::Pieces(header, section, len));
    }
    match value.cast_into::<PyBytes>() {
        Ok(bytes) => Ok(Held::Bytes(bytes)),
        Err(e) => {
            let value = e.into_inner();
            let copied = PyBuffer::<u8>::get(&value).and_then(|b| b.to_vec(value.py()));
            copied.map(|v| Held::Copied(v, value)).map_err(|e| bad_value(version, format_args!("topic_data[{t}] partition {p} records"), e))
        }
    }
}

/// A partition's records in a request the sender built (`produce_topic_data`).
pub(crate) enum RequestRecords {
    /// The batch built: its bytes.
    Built(Py<PyBytes>),
    /// The batch sent in place: its header, a view of its section, and their total length.
    InPlace(Py<PyBytes>, Py<PyAny>, usize),
}

impl RequestRecords {
    fn held<'py>(&self, py: Python<'py>) -> Held<'py> {
        match self {
            RequestRecords::Built(bytes) => Held::Bytes(bytes.bind(py).clone()),
            RequestRecords::InPlace(header, section, len) => Held::Pieces(header.bind(py).clone().into_any(), section.bind(py).clone(), *len),
        }
    }

    fn to_object<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        match self {
            RequestRecords::Built(bytes) => Ok(bytes.bind(py).clone().into_any()),
            RequestRecords::InPlace(header, section, _) => Ok((header.bind(py), section.bind(py)).into_pyobject(py)?.into_any()),
        }
    }
}

/// A topic of a request the sender built: its name, and its partitions' indexes and records.
pub(crate) type RequestTopic = (Py<PyAny>, Vec<(i32, RequestRecords)>);

/// A Produce request's topic data as the sender builds it (`produce_topic_data`): the topics in
/// the order they first appear, each with its partitions and their records. The encoder reads it
/// as it is (`encode_produce_request`), without the list form's lists, tuples and buffer views (a
/// section's length is known from its batch); to anything else it is that list form,
/// ``[(topic, [(partition, records), ...]), ...]``, made on each read (a sequence).
#[pyclass(module = "aioproducer._native", frozen, sequence)]
pub struct ProduceTopicData {
    pub(crate) topics: Vec<RequestTopic>,
}

#[pymethods]
impl ProduceTopicData {
    fn __len__(&self) -> PyResult<usize> {
        guarded("ProduceTopicData.__len__", || Ok(self.topics.len()))
    }

    /// Topic `index` in the list form, `(topic, [(partition, records), ...])`, or a list of them
    /// for a slice.
    fn __getitem__<'py>(&self, py: Python<'py>, index: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        guarded("ProduceTopicData.__getitem__", || {
            if let Ok(slice) = index.cast::<PySlice>() {
                let picked = slice.indices(self.topics.len() as isize)?;
                let items =
                    (0..picked.slicelength).map(|k| self.topic(py, (picked.start + k as isize * picked.step) as usize)).collect::<PyResult<Vec<_>>>()?;
                return Ok(PyList::new(py, items)?.into_any());
            }
            let index: isize = index.extract()?;
            let at = if index < 0 { index + self.topics.len() as isize } else { index };
            match usize::try_from(at).ok().filter(|at| *at < self.topics.len()) {
                Some(at) => Ok(self.topic(py, at)?.into_any()),
                None => Err(PyIndexError::new_err("ProduceTopicData index out of range")),
            }
        })
    }
}

impl ProduceTopicData {
    fn topic<'py>(&self, py: Python<'py>, at: usize) -> PyResult<Bound<'py, PyTuple>> {
        let (topic, partitions) = &self.topics[at];
        let items = partitions.iter().map(|(partition, records)| Ok((*partition, records.to_object(py)?))).collect::<PyResult<Vec<_>>>()?;
        (topic.bind(py), PyList::new(py, items)?).into_pyobject(py)
    }
}

/// The topics' names and partition counts, and every partition's index and records, in order.
type Collected<'py> = (Vec<(Bound<'py, PyAny>, usize)>, Vec<(i32, Held<'py>)>);

fn collect<'py>(version: i64, topic_data: &Bound<'py, PyAny>) -> PyResult<Collected<'py>> {
    if let Ok(built) = topic_data.cast::<ProduceTopicData>() {
        let py = topic_data.py();
        let mut topics = Vec::with_capacity(built.get().topics.len());
        let mut partitions = Vec::new();
        for (name, parts) in &built.get().topics {
            topics.push((name.bind(py).clone(), parts.len()));
            partitions.extend(parts.iter().map(|(index, records)| (*index, records.held(py))));
        }
        return Ok((topics, partitions));
    }
    let mut topics = Vec::new();
    let mut partitions = Vec::new();
    let iter = topic_data.try_iter().map_err(|e| bad_value(version, format_args!("topic_data"), e))?;
    for (t, item) in iter.enumerate() {
        let (name, parts) = pair(version, &item?, format_args!("topic_data[{t}]"))?;
        let before = partitions.len();
        let parts = parts.try_iter().map_err(|e| bad_value(version, format_args!("topic_data[{t}] partitions"), e))?;
        for (p, part) in parts.enumerate() {
            let (index, value) = pair(version, &part?, format_args!("topic_data[{t}] partition {p}"))?;
            let index: i32 = int(version, &index, format_args!("topic_data[{t}] partition {p} index"))?;
            partitions.push((index, records(version, value, t, p)?));
        }
        topics.push((name, partitions.len() - before));
    }
    Ok((topics, partitions))
}

/// Encode a whole Produce request frame (size prefix, header, body) as chunks for the connection's
/// `writelines`: one `bytes`, or, when record batches of ``SPLICE_THRESHOLD`` bytes or more are
/// there, `bytes` pieces with each such batch between them by reference (it must not change until
/// the frame is written).
///
/// Byte for byte what ``messages.encode_request(PRODUCE, version, correlation_id, client_id,
/// body)`` produces for the body ``{"transactional_id": ..., "acks": ..., "timeout_ms": ...,
/// "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": records},
/// ...]}, ...]}``; ``topic_data`` is ``[(topic, [(partition, records), ...]), ...]``, records
/// ``bytes`` (read in place) or any other bytes-like object (copied), or None, or a batch's two
/// pieces ``(header, section)`` (two buffers, always sent by reference). ``ValueError``
/// naming the argument when a value does not fit its field; ``UnsupportedVersionError`` for a
/// version outside v3-v12.
//
// Cost, with the join asyncio's `writelines` does on Python 3.11 (none for a one-element list),
// timeit best of 5, median of 7 rounds in turn with the Python encoder this replaced, 2026-12-02,
// shared 2-core machine (load 2.5-3.5): v9, one 100 B batch 0.47 µs (Python 1.82); six 10 KB
// batches, spliced, 2.8 µs (6.0); sixty 16 KB batches (a 1 MB request) 32.7 µs (61.0), of which
// the join's copy is 14-19 µs (measured apart), a copy a frame for the writer thread never makes.
#[pyfunction(name = "encode_produce_request")]
#[allow(clippy::too_many_arguments)] // the request's fields, as the Python API has always taken them
pub fn py_encode_produce_request<'py>(
    py: Python<'py>,
    version: i64,
    correlation_id: &Bound<'py, PyAny>,
    client_id: &Bound<'py, PyAny>,
    transactional_id: &Bound<'py, PyAny>,
    acks: &Bound<'py, PyAny>,
    timeout_ms: &Bound<'py, PyAny>,
    topic_data: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyList>> {
    guarded("encode_produce_request", || {
        if supported(version).is_none() {
            return Err(unsupported(py, version));
        }
        let (topics, held) = collect(version, topic_data)?;
        let partitions: Vec<PartitionData<'_>> = held.iter().map(|(index, records)| PartitionData { index: *index, records: records.records() }).collect();
        let mut topic_data = Vec::with_capacity(topics.len());
        let mut start = 0;
        for (t, (name, count)) in topics.iter().enumerate() {
            let name = text(version, name, format_args!("topic_data[{t}] name"))?
                .ok_or_else(|| bad_value(version, format_args!("topic_data[{t}] name"), "None is not a topic name"))?;
            topic_data.push(TopicData { name, partitions: &partitions[start..start + count] });
            start += count;
        }
        let request = ProduceRequest {
            version,
            correlation_id: int(version, correlation_id, format_args!("correlation_id"))?,
            client_id: text(version, client_id, format_args!("client_id"))?,
            transactional_id: text(version, transactional_id, format_args!("transactional_id"))?,
            acks: int(version, acks, format_args!("acks"))?,
            timeout_ms: int(version, timeout_ms, format_args!("timeout_ms"))?,
            topics: &topic_data,
        };
        let size = request.frame_size().map_err(|e| match e {
            super::EncodeError::UnsupportedVersion(v) => unsupported(py, v),
            super::EncodeError::Value(message) => PyValueError::new_err(message),
        })?;
        let spliced: usize = partitions.iter().map(|p| p.records.spliced_len(SPLICE_THRESHOLD)).sum();
        if spliced == 0 {
            let frame = PyBytes::new_with(py, size, |out| {
                request.write(out);
                Ok(())
            })?;
            return PyList::new(py, [frame]);
        }
        let mut own = vec![0; size - spliced];
        let at = request.write_spliced(size, &mut own, SPLICE_THRESHOLD);
        let big = held.iter().filter(|(_, r)| r.records().spliced_len(SPLICE_THRESHOLD) > 0).map(|(_, r)| r.objects());
        let chunks = PyList::empty(py);
        let mut start = 0;
        for (end, objects) in at.into_iter().zip(big) {
            chunks.append(PyBytes::new(py, &own[start..end]))?;
            for object in objects {
                chunks.append(object)?;
            }
            start = end;
        }
        if start < own.len() {
            chunks.append(PyBytes::new(py, &own[start..]))?;
        }
        Ok(chunks)
    })
}

// ================================================================== decoding

/// Decode a Produce response payload (the frame without its size prefix) of the given version.
///
/// The same data as ``messages.decode_response(PRODUCE, version, payload)``, as the named tuples
/// of ``aioproducer.protocol.produce`` and with the topic level flattened into each partition.
/// Raises ``ProtocolError`` for truncated or malformed input, and nothing else; bytes after a
/// complete body are ignored. ``payload``: ``bytes`` (read in place) or any bytes-like object.
//
// Cost, measured as the encoder's: v9, one partition 0.54 µs (the Python decoder this replaced:
// 3.18); six partitions 1.62 µs (5.17); v10, sixty partitions 12.3 µs (28.3): about 0.2 µs for
// each partition after the first.
#[pyfunction(name = "decode_produce_response")]
pub fn py_decode_produce_response<'py>(py: Python<'py>, version: i64, payload: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    guarded("decode_produce_response", || {
        let t = types(py)?;
        let copied;
        let data = match payload.cast::<PyBytes>() {
            Ok(bytes) => bytes.as_bytes(),
            Err(_) => {
                copied = PyBuffer::<u8>::get(payload)?.to_vec(py)?;
                &copied[..]
            }
        };
        decode(version, data).map_err(|e| decode_error(py, version, e)).and_then(|response| to_python(py, t, &response))
    })
}

/// The Python exception of a response that did not decode.
pub(crate) fn decode_error(py: Python<'_>, version: i64, e: DecodeError) -> PyErr {
    match (types(py), e) {
        (Err(e), _) => e,
        (Ok(t), DecodeError::UnsupportedVersion(v)) => error(py, &t.unsupported_version, unsupported_message(v)),
        (Ok(t), DecodeError::Malformed(why)) => error(py, &t.protocol_error, format!("malformed or truncated Produce v{version} response: {why}")),
    }
}

/// The response as `ProduceResponse(correlation_id, [PartitionResponse, ...], throttle_time_ms,
/// [NodeEndpoint, ...])`; the partitions of a topic share one `str` for its name.
pub(crate) fn to_python<'py>(py: Python<'py>, t: &Types, response: &ProduceResponse<'_>) -> PyResult<Bound<'py, PyAny>> {
    let fields =
        (response.correlation_id, partitions_list(py, t, &response.partitions)?, response.throttle_time_ms, endpoints_list(py, t, &response.node_endpoints)?);
    t.tuple_new.bind(py).call1((t.produce_response.bind(py), fields))
}

/// The partitions as a list of `PartitionResponse`; the partitions of a topic share one `str`.
pub(crate) fn partitions_list<'py>(py: Python<'py>, t: &Types, answers: &[PartitionResponse<'_>]) -> PyResult<Bound<'py, PyList>> {
    let new = t.tuple_new.bind(py);
    let mut topic: Option<(*const u8, Bound<'py, PyString>)> = None;
    let mut partitions = Vec::with_capacity(answers.len());
    for p in answers {
        let name = match &topic {
            Some((ptr, name)) if *ptr == p.topic.as_ptr() => name.clone(),
            _ => {
                let name = PyString::new(py, p.topic);
                topic = Some((p.topic.as_ptr(), name.clone()));
                name
            }
        };
        partitions.push(new.call1((t.partition_response.bind(py), partition(py, name, p)?))?);
    }
    PyList::new(py, partitions)
}

/// The node endpoints as a list of `NodeEndpoint`.
pub(crate) fn endpoints_list<'py>(py: Python<'py>, t: &Types, endpoints: &[NodeEndpoint<'_>]) -> PyResult<Bound<'py, PyList>> {
    let new = t.tuple_new.bind(py);
    let mut made = Vec::with_capacity(endpoints.len());
    for e in endpoints {
        made.push(new.call1((t.node_endpoint.bind(py), endpoint(py, e)?))?);
    }
    PyList::new(py, made)
}

fn partition<'py>(py: Python<'py>, topic: Bound<'py, PyString>, p: &PartitionResponse<'_>) -> PyResult<Bound<'py, PyTuple>> {
    let record_errors =
        if p.record_errors.is_empty() { PyTuple::empty(py) } else { PyTuple::new(py, p.record_errors.iter().map(|e| (e.batch_index, e.message)))? };
    (topic, p.partition, p.error_code, p.base_offset, p.log_append_time_ms, p.log_start_offset, record_errors, p.error_message, p.leader_id, p.leader_epoch)
        .into_pyobject(py)
}

fn endpoint<'py>(py: Python<'py>, e: &NodeEndpoint<'_>) -> PyResult<Bound<'py, PyTuple>> {
    (e.node_id, e.host, e.port, e.rack).into_pyobject(py)
}
