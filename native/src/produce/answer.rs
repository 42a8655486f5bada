//! `ProduceAnswer`: a Produce response as the connection read it, its bytes checked once and the
//! five fields the completion reads per partition kept natively, so that a response the producer
//! completes never becomes Python objects (issue #42: one native call per response, its bytes in).
//!
//! Why not the named tuples of `decode_produce_response` on the hot path: building them (a
//! `PartitionResponse` of ten fields per partition, the topic's `str`, the lists) was most of the
//! decoder's 1.7 µs for a response of one or two partitions, and the completion then read five of
//! those fields back from each tuple. Here the decode is the same pure function
//! (`decode::decode`), run once when the answer is made (so a malformed response still fails the
//! connection's read, as before); what Python asks of it afterwards (`partitions`,
//! `node_endpoints`: the sender's decisions on errors, the test kit, a test's fake) is decoded
//! again from the kept bytes and made into the same named tuples, only then.
//!
//! Cost (timeit, best of 5, v9, 2026-12-03, quiet 2-core machine): see `read_produce_response`.

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};

use super::decode::{decode, PartitionResponse, ProduceResponse};
use super::python::{decode_error, endpoints_list, partitions_list, to_python, types, unsupported, Types};
use super::supported;
use crate::guarded;

/// One partition's answer, what the completion reads: where its topic's name lies in the
/// payload, and four numbers.
#[derive(Debug, Clone, Copy)]
pub(crate) struct AnswerPart {
    pub topic: (usize, usize),
    pub partition: i32,
    pub error_code: i16,
    pub base_offset: i64,
    pub log_append_time_ms: i64,
}

/// A decoded Produce response that keeps its bytes: ``correlation_id`` and ``throttle_time_ms``
/// read natively, ``partitions`` and ``node_endpoints`` as ``decode_produce_response`` gives them
/// (made when asked). ``RecordQueues.complete`` reads its partitions without Python objects.
#[pyclass(frozen, module = "aioproducer._native", name = "ProduceAnswer")]
pub struct ProduceAnswer {
    version: i64,
    payload: Py<PyBytes>,
    #[pyo3(get)]
    correlation_id: i32,
    #[pyo3(get)]
    throttle_time_ms: i32,
    parts: Vec<AnswerPart>,
}

impl ProduceAnswer {
    /// `response`, decoded from `decoded` (bytes equal to `payload`'s), with `payload` kept. Each
    /// part's topic is kept as where it lies in `decoded`: the same place in `payload`.
    fn kept(version: i64, response: &ProduceResponse<'_>, decoded: &[u8], payload: &Bound<'_, PyBytes>) -> Self {
        ProduceAnswer {
            version,
            correlation_id: response.correlation_id,
            throttle_time_ms: response.throttle_time_ms,
            parts: response.partitions.iter().map(|p| part(decoded, p)).collect(),
            payload: payload.clone().unbind(),
        }
    }

    /// The partitions' answers, in the order the broker wrote them.
    pub(crate) fn parts(&self) -> &[AnswerPart] {
        &self.parts
    }

    /// The payload the answers' topic names lie in.
    pub(crate) fn payload<'py>(&self, py: Python<'py>) -> &Bound<'py, PyBytes> {
        self.payload.bind(py)
    }

    /// The name of `part`'s topic. The payload was checked to be UTF-8 there when decoded.
    pub(crate) fn topic<'a>(payload: &'a [u8], part: &AnswerPart) -> &'a str {
        std::str::from_utf8(&payload[part.topic.0..part.topic.1]).unwrap_or_default()
    }

    /// `make` applied to the response decoded again from the kept bytes (what Python asks for
    /// beyond the five fields: made only when asked).
    fn redecoded<'py, T>(&self, py: Python<'py>, name: &'static str, make: impl FnOnce(&Types, &ProduceResponse<'_>) -> PyResult<T>) -> PyResult<T> {
        guarded(name, || {
            let response = decode(self.version, self.payload.bind(py).as_bytes()).map_err(|e| decode_error(py, self.version, e))?;
            make(types(py)?, &response)
        })
    }
}

/// Where `text` (borrowed from `payload`) lies in it.
fn span(payload: &[u8], text: &str) -> (usize, usize) {
    let start = (text.as_ptr() as usize).saturating_sub(payload.as_ptr() as usize);
    (start, start + text.len())
}

fn part(payload: &[u8], p: &PartitionResponse<'_>) -> AnswerPart {
    AnswerPart {
        topic: span(payload, p.topic),
        partition: p.partition,
        error_code: p.error_code,
        base_offset: p.base_offset,
        log_append_time_ms: p.log_append_time_ms,
    }
}

#[pymethods]
impl ProduceAnswer {
    /// Every partition's answer, a ``PartitionResponse`` each, in wire order (made at each call).
    #[getter]
    fn partitions<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        self.redecoded(py, "ProduceAnswer.partitions", |t, r| partitions_list(py, t, &r.partitions))
    }

    /// v10+ (KIP-951): the ``NodeEndpoint`` of each leader the partitions name (made at each call).
    #[getter]
    fn node_endpoints<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        self.redecoded(py, "ProduceAnswer.node_endpoints", |t, r| endpoints_list(py, t, &r.node_endpoints))
    }

    /// The ``ProduceResponse`` named tuple ``decode_produce_response`` makes of the same bytes.
    fn to_response<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.redecoded(py, "ProduceAnswer.to_response", |t, r| to_python(py, t, r))
    }

    fn __repr__(&self) -> PyResult<String> {
        guarded("ProduceAnswer.__repr__", || {
            Ok(format!(
                "ProduceAnswer(v{}, correlation_id={}, {} partitions, throttle_time_ms={})",
                self.version,
                self.correlation_id,
                self.parts.len(),
                self.throttle_time_ms
            ))
        })
    }
}

/// Read a Produce response payload (the frame without its size prefix) of `version` into a
/// `ProduceAnswer`: the whole body decoded and checked, as ``decode_produce_response`` does (the
/// same ``ProtocolError`` and ``UnsupportedVersionError``), its bytes kept (``bytes`` by
/// reference; any other bytes-like object copied once).
//
// Cost, timeit best of 5, v9, 2026-12-03 (quiet 2-core machine), against
// `decode_produce_response` of the same bytes: one partition 0.39 µs (1.66), two 0.45 µs (2.44).
#[pyfunction]
pub fn read_produce_response<'py>(py: Python<'py>, version: i64, payload: &Bound<'py, PyAny>) -> PyResult<ProduceAnswer> {
    guarded("read_produce_response", || {
        if supported(version).is_none() {
            return Err(unsupported(py, version));
        }
        let payload = match payload.cast::<PyBytes>() {
            Ok(bytes) => bytes.clone(),
            Err(_) => PyBytes::new(py, &pyo3::buffer::PyBuffer::<u8>::get(payload)?.to_vec(py)?),
        };
        let response = decode(version, payload.as_bytes()).map_err(|e| decode_error(py, version, e))?;
        Ok(ProduceAnswer::kept(version, &response, payload.as_bytes(), &payload))
    })
}

/// The first Produce version whose answer carries a throttle the client must honour itself
/// (KIP-219); the connection's state machine emits it (`PRODUCE_CLIENT_THROTTLE_VERSION`).
const CLIENT_THROTTLE_VERSION: i64 = 6;

/// The Produce answers at the front of `data[pos:]`, read in one call: the connection's hot path
/// (``ClientConnection._parse``). While the oldest request in flight (the head of `in_flight`,
/// a deque of the state machine's ``_Pending``) is a Produce request that takes the
/// hand-written codec and `data` holds its whole frame, the frame is checked (its size within
/// `max_response_size`, its correlation id the request's), read into a `ProduceAnswer` and the
/// request taken off `in_flight`; then one `produce_answered(tokens, answers)` is appended to
/// `events` for all the requests taken, in order. Returns the position after the last frame
/// taken and how many were.
///
/// It stops, taking nothing more, at the first frame it does not take whole: not all read yet,
/// a size or correlation id that is wrong, a body that does not decode, an answer that asks the
/// client to hold off (throttled), or a head that is not such a request. The caller's general
/// path then reads that frame one step at a time, and says what is wrong with it; so the only
/// rules here are the general path's, and this call takes nothing it would decide otherwise.
/// The caller checks the rest of the fast path's conditions (the connection READY, no `acks=0`
/// request's answer possibly in the stream) before the call; nothing here changes them.
///
/// Why: a read holds about five answers, and each went through four Python calls between the
/// read and its event (the frame's slice, the match, the decode's call, the event's emission);
/// since 2026-12-04 they share one event, not one each (a Python object made and handled per
/// answer).
#[pyfunction]
pub fn read_produce_answers(
    in_flight: &Bound<'_, PyAny>,
    data: &Bound<'_, PyAny>,
    pos: usize,
    max_response_size: i64,
    events: &Bound<'_, PyList>,
    produce_answered: &Bound<'_, PyAny>,
) -> PyResult<(usize, usize)> {
    guarded("read_produce_answers", || {
        let py = data.py();
        let Ok(bytes) = data.cast::<PyBytes>() else { return Ok((pos, 0)) };
        let data = bytes.as_bytes();
        let (mut pos, mut taken) = (pos, 0);
        let (tokens, answers) = (PyList::empty(py), PyList::empty(py));
        while let Some(frame) = data.get(pos..).and_then(whole_frame(max_response_size)) {
            if in_flight.len()? == 0 {
                break;
            }
            let head = in_flight.get_item(0)?;
            if !head.getattr(intern!(py, "fast_produce"))?.is_truthy()? {
                break;
            }
            let correlation_id: i32 = head.getattr(intern!(py, "correlation_id"))?.extract()?;
            let version: i64 = head.getattr(intern!(py, "version"))?.extract()?;
            if frame[..4] != correlation_id.to_be_bytes() || supported(version).is_none() {
                break;
            }
            let Ok(response) = decode(version, frame) else { break };
            if version >= CLIENT_THROTTLE_VERSION && response.throttle_time_ms > 0 {
                break;
            }
            let answer = ProduceAnswer::kept(version, &response, frame, &PyBytes::new(py, frame));
            let token = head.getattr(intern!(py, "token"))?;
            in_flight.call_method0(intern!(py, "popleft"))?;
            tokens.append(token)?;
            answers.append(Py::new(py, answer)?)?;
            pos += 4 + frame.len();
            taken += 1;
        }
        if taken > 0 {
            events.append(produce_answered.call1((tokens, answers))?)?;
        }
        Ok((pos, taken))
    })
}

/// The payload of the frame `rest` starts with, if all of it is there and its size is one a
/// response may have (4 to `max_response_size` bytes: a correlation id at least).
fn whole_frame(max_response_size: i64) -> impl Fn(&[u8]) -> Option<&[u8]> {
    move |rest| {
        let size = i64::from(i32::from_be_bytes(rest.get(..4)?.try_into().ok()?));
        if !(4..=max_response_size).contains(&size) {
            return None;
        }
        rest.get(4..4 + usize::try_from(size).ok()?)
    }
}
