//! `RecordQueues` (issue #42, slice 3): the accumulator's data, one per producer: per partition
//! the deque of native [`ProducerBatch`]es, and the loops over them (`ready`, `drain`, `expired`,
//! the retry's insertion), so that a sender pass crosses into Rust once per call, not per batch.
//!
//! Python keeps every decision: which partition a record goes to (the dense index it assigns a
//! topic-partition, looked up once per `send()`), when to drain and which nodes (connections,
//! in-flight limits, throttling), retries and their backoff, idempotence's sequence and epoch
//! state machine, transactions, the metadata. `RecordAccumulator` (accumulator.py) holds one of
//! these and is its only caller.
//!
//! The scans never call back into Python for a partition's leader: each partition keeps the
//! leader Python last told it (`set_leaders`), and Python tells it again only for partitions it
//! has not told under the current metadata (`take_unsynced`; a new metadata snapshot begins a
//! new generation, `new_generation`).
//!
//! Topics and partitions are as the accumulator's dicts were: a topic becomes active when a batch
//! is queued for it and leaves when `ready` finds all its deques empty; the scans walk the active
//! topics in the order they became active and their partitions in the order they were added, so
//! the drain's rotation is over a stable order (Java's `drainIndex`).
//!
//! The keyed record's lane (`try_append_keyed`) is the accumulator's door for its commonest
//! record, without the door's Python frame: `send()`'s arguments as given, taken when they are a
//! `bytes` key and value and nothing else, to a topic with a metadata snapshot and a partition
//! the door has seen, with no `on_delivery` or the one the door checked last, appended to the
//! partition's open batch (or a new one the lane opens). Its partition is Java's rule for a key
//! (`murmur::partition_for_key`), as the door's; anything else (headers, a partition or a
//! timestamp given, a key or value not exactly `bytes`, a new topic or partition, a batch it
//! cannot open, a callback not checked yet) is refused with None, and `send()` goes through the
//! door.

use std::collections::{HashMap, VecDeque};

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PySet, PyString};

use crate::batch::{try_append_record, FutureRecordMetadata, ProducerBatch, PyHeaders};
use crate::batch_builder::{size_upper_bound, PyRecordBatchBuilder, CODEC_GZIP, CODEC_LZ4, CODEC_NONE, CODEC_ZSTD};
use crate::budget::MemoryBudget;
use crate::counters::RequestCounters;
use crate::guarded;
use crate::murmur::partition_for_key;
use crate::produce::python::ProduceTopicData;

/// No leader known for a partition (Python's None, or a negative id).
const NO_LEADER: i64 = -1;

/// One topic: its name, its partitions' indices in the order they were added, and whether it may
/// have queued batches (what the scans walk).
struct TopicQueues {
    name: Py<PyString>,
    parts: Vec<usize>,
    /// Each partition number's index (`NO_INDEX` until the accumulator adds it): the keyed lane's lookup.
    by_partition: Vec<usize>,
    active: bool,
}

/// A partition number the accumulator has not added yet.
const NO_INDEX: usize = usize::MAX;

/// One topic-partition: its deque of batches (the open one last), its leader as last told, the
/// generation it was told in, and whether it is muted (`max.in.flight.requests.per.connection=1`
/// ordering: a request of it is in flight).
struct PartitionQueue {
    topic: usize,
    partition: i64,
    batches: VecDeque<Py<ProducerBatch>>,
    leader: i64,
    generation: u64,
    muted: bool,
}

/// What the keyed lane needs to open a batch itself (`RecordQueues::set_lane`): the accumulator's
/// own objects, each still written only by its owner (the pool through its methods, the
/// incomplete set as the accumulator's `_queued` adds to it).
struct Lane {
    /// The `BufferPool`'s figures (`BufferPool.budget`): the lane charges and reserves through them.
    budget: Py<MemoryBudget>,
    /// The producer's lifecycle (read only): `accepting`.
    lifecycle: Py<PyAny>,
    /// The accumulator's config (`make_batch` reads it) and its effective `batch.size`.
    config: Py<PyAny>,
    batch_size: usize,
    /// The accumulator's clock (ms), the loop its batches complete on, their log.
    clock: Py<PyAny>,
    event_loop: Py<PyAny>,
    log: Py<PyAny>,
    /// The accumulator's incomplete batches, and its call that wakes the sender.
    incomplete: Py<PySet>,
    wakeup: Py<PyAny>,
}

/// The accumulator's queues; see the module's documentation.
#[pyclass(module = "aioproducer._native")]
pub struct RecordQueues {
    topics: Vec<TopicQueues>,
    parts: Vec<PartitionQueue>,
    /// Topic ids that may have queued batches, in the order they became active.
    active: Vec<usize>,
    /// Per node, where the next drain starts (rotated by one each drain, so none starves).
    drain_index: HashMap<i64, usize>,
    /// The metadata generation (`new_generation`), and the partitions whose leader is not known
    /// under it though a scan may need it (added, or their topic became active again).
    generation: u64,
    unsynced: Vec<usize>,
    /// The last `on_delivery` a new batch charged for, and its charge (`ProducerBatch::callback_charge`),
    /// handed from each batch `open_batch` makes to the next: a batch's own cache lives only as
    /// long as its records run, and a 10 KB record is a batch of its own, so without this every
    /// record called batch.py's `_callback_bytes` (about 1 µs). Written by `open_batch` only;
    /// holds one callable alive until another replaces it or the queues are cleared.
    last_charge: Option<(Py<PyAny>, i64)>,
    /// Topic name to id, as `add_topic` assigned them (written there only): the keyed lane's
    /// lookup, a dict so that an equal name finds it whatever its object.
    topic_ids: Py<PyDict>,
    /// Set by `set_lane` (the accumulator, once its loop is known and when nothing per batch needs
    /// Python: no transactional id), cleared by `__clear__`: the keyed lane then opens batches too.
    lane: Option<Lane>,
}

/// Whether a batch is waiting out its retry backoff at `now`.
fn backing_off(batch: &ProducerBatch, now: f64) -> bool {
    batch.attempts > 0 && now - batch.last_attempt_ms < batch.retry_backoff_ms
}

/// Java's rule for a partition's first batch at `now`: `(sendable, backing off, ms left)`. It may
/// go when it is full (another batch follows it, or it reached `batch_size`), when `force`, or
/// once its linger passed, and never while it backs off; `ms left` is what remains of the linger
/// or the backoff (negative once passed). `ready` and `drain_next` decide by it alike.
fn head_state(py: Python<'_>, part: &PartitionQueue, batch: &ProducerBatch, now: f64, linger_ms: f64, batch_size: usize, force: bool) -> (bool, bool, f64) {
    let waited = now - batch.last_attempt_ms;
    let backoff = backing_off(batch, now);
    let time_to_wait = if backoff { batch.retry_backoff_ms } else { linger_ms };
    let full = part.batches.len() > 1 || batch.builder.bind(py).borrow().wire_size(py) >= batch_size;
    (!backoff && (full || force || waited >= time_to_wait), backoff, time_to_wait - waited)
}

/// Whether someone awaits the batch's records (`await future` or a done-callback: `gather()`).
fn awaited(py: Python<'_>, batch: &ProducerBatch) -> bool {
    let non_empty = |list: &Option<Py<PyList>>| list.as_ref().is_some_and(|l| !l.bind(py).is_empty());
    non_empty(&batch.waiters) || non_empty(&batch.done_callbacks)
}

impl RecordQueues {
    /// Marks `topic` active (a batch was queued), its partitions not told under this generation to be told.
    fn activate(&mut self, topic: usize) {
        let entry = &mut self.topics[topic];
        if entry.active {
            return;
        }
        entry.active = true;
        self.active.push(topic);
        for &index in &entry.parts {
            if self.parts[index].generation != self.generation {
                self.unsynced.push(index);
            }
        }
    }

    fn part(&self, index: usize) -> PyResult<&PartitionQueue> {
        self.parts.get(index).ok_or_else(|| pyo3::exceptions::PyIndexError::new_err(format!("no partition queue {index}")))
    }

    fn part_mut(&mut self, index: usize) -> PyResult<&mut PartitionQueue> {
        self.parts.get_mut(index).ok_or_else(|| pyo3::exceptions::PyIndexError::new_err(format!("no partition queue {index}")))
    }

    /// See `new_batch`.
    #[allow(clippy::too_many_arguments)] // the batch's making
    fn make_batch(
        &self,
        py: Python<'_>,
        index: usize,
        config: &Bound<'_, PyAny>,
        now: f64,
        reserved: i64,
        event_loop: Py<PyAny>,
        log: Py<PyAny>,
    ) -> PyResult<Py<ProducerBatch>> {
        let part = self.part(index)?;
        let codec: u8 = config.getattr(intern!(py, "compression_type"))?.extract()?;
        let batch_size: i64 = config.getattr(intern!(py, "batch_size"))?.extract()?;
        let level: Option<i64> = config.getattr(intern!(py, "compression_level"))?.extract()?;
        let delivery_timeout_ms: f64 = config.getattr(intern!(py, "delivery_timeout_ms"))?.extract()?;
        let builder = if matches!(codec, CODEC_NONE | CODEC_GZIP | CODEC_LZ4 | CODEC_ZSTD) {
            Py::new(py, PyRecordBatchBuilder::create(codec, batch_size, level, 1.0))?
        } else {
            // Snappy (an optional library) or an unknown id: the builder's constructor says which, and how to fix it.
            py.get_type::<PyRecordBatchBuilder>().call1((codec, batch_size, level))?.cast_into::<PyRecordBatchBuilder>()?.unbind()
        };
        let topic = self.topics[part.topic].name.clone_ref(py).into_any();
        Py::new(py, ProducerBatch::empty(py, topic, part.partition, builder, now, reserved, event_loop, Some(log), delivery_timeout_ms)?)
    }

    /// The partitions of the active topics led by `node`, in scan order.
    fn led_by(&self, node: i64) -> Vec<usize> {
        let mut led = Vec::new();
        for &topic in &self.active {
            led.extend(self.topics[topic].parts.iter().copied().filter(|&i| self.parts[i].leader == node));
        }
        led
    }

    /// The lane's batch opening (`set_lane`), as the accumulator's `_open_batch` opens one: None,
    /// with nothing taken, when the record is larger than `batch.size` (the door sizes and checks
    /// it), the producer no longer accepts records, or memory must be waited for; the door then
    /// says why or waits. Else the partition's open batch is settled (its charge to the pool), a
    /// batch's memory reserved (`BufferPool.try_allocate`), the batch made with the record and
    /// queued, tracked as incomplete, and the sender woken. At 10 KB every record opens a batch:
    /// this spares the door's seven Python calls for it (measured in `benchmarks/README.md`,
    /// "The keyed lane opens its batch").
    fn open_keyed(
        &mut self,
        py: Python<'_>,
        index: usize,
        timestamp: i64,
        key: &[u8],
        value: &[u8],
        on_delivery: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Option<Py<FutureRecordMetadata>>> {
        let Some(lane) = &self.lane else { return Ok(None) };
        let batch_size = lane.batch_size;
        if size_upper_bound(Some(key), Some(value), &[]) > batch_size {
            return Ok(None);
        }
        if !lane.lifecycle.bind(py).getattr(intern!(py, "accepting"))?.is_truthy()? {
            return Ok(None);
        }
        let (config, clock) = (lane.config.clone_ref(py), lane.clock.clone_ref(py));
        let (event_loop, log, incomplete, wakeup) =
            (lane.event_loop.clone_ref(py), lane.log.clone_ref(py), lane.incomplete.clone_ref(py), lane.wakeup.clone_ref(py));
        let charge = self.parts[index].batches.back().map_or(0, |b| b.bind(py).borrow_mut().settle_now(py));
        let reserved = i64::try_from(batch_size).unwrap_or(i64::MAX);
        {
            // The pool's `charge` and `try_allocate`, in its order (`BufferPool`'s rules).
            let mut budget = lane.budget.bind(py).try_borrow_mut()?;
            if charge > 0 {
                budget.overdraw(charge);
            }
            if !budget.reserve(reserved) {
                return Ok(None);
            }
        }
        let now: f64 = clock.bind(py).call0()?.extract()?;
        let (future, batch) =
            self.open_batch(py, index, config.bind(py), now, reserved, event_loop, log, timestamp, Some(key), Some(value), None, on_delivery)?;
        incomplete.bind(py).add(batch)?;
        wakeup.bind(py).call0()?;
        Ok(Some(future))
    }

    /// The partitions a drain of `led` (in rotation order from `start`) may take a batch from at
    /// `now`, with that first batch: not muted, not empty, not backing off.
    fn heads(&self, py: Python<'_>, led: &[usize], start: usize, now: f64) -> Vec<(usize, Py<ProducerBatch>)> {
        let count = led.len();
        let mut heads = Vec::with_capacity(count);
        for i in 0..count {
            let index = led[(start + i) % count];
            let part = &self.parts[index];
            let Some(first) = part.batches.front() else { continue };
            if part.muted || backing_off(&first.borrow(py), now) {
                continue;
            }
            heads.push((index, first.clone_ref(py)));
        }
        heads
    }
}

/// How a completion unmutes partition queue `index` of `queues` (borrowed only for that: a
/// callback may `send()` meanwhile).
fn unmuter<'a>(queues: &'a Bound<'_, RecordQueues>) -> impl Fn(usize) -> PyResult<()> + Copy + 'a {
    move |index| {
        queues.try_borrow_mut()?.part_mut(index)?.muted = false;
        Ok(())
    }
}

#[pymethods]
impl RecordQueues {
    #[new]
    fn new(py: Python<'_>) -> PyResult<Self> {
        guarded("RecordQueues.__new__", || {
            Ok(RecordQueues {
                topic_ids: PyDict::new(py).unbind(),
                topics: Vec::new(),
                parts: Vec::new(),
                active: Vec::new(),
                drain_index: HashMap::new(),
                generation: 0,
                unsynced: Vec::new(),
                last_charge: None,
                lane: None,
            })
        })
    }

    // -- the indices Python assigns ----------------------------------------------------
    /// A new topic's id (the accumulator's `topic_info`, once per topic).
    fn add_topic(&mut self, name: Bound<'_, PyString>) -> PyResult<usize> {
        guarded("RecordQueues.add_topic", || {
            let id = self.topics.len();
            self.topic_ids.bind(name.py()).set_item(&name, id)?;
            self.topics.push(TopicQueues { name: name.unbind(), parts: Vec::new(), by_partition: Vec::new(), active: false });
            Ok(id)
        })
    }

    /// A new partition's index (the accumulator, once per topic-partition): its leader unknown until told.
    fn add_partition(&mut self, topic: usize, partition: i64) -> PyResult<usize> {
        guarded("RecordQueues.add_partition", || {
            let index = self.parts.len();
            let entry = self.topics.get_mut(topic).ok_or_else(|| pyo3::exceptions::PyIndexError::new_err(format!("no topic {topic}")))?;
            entry.parts.push(index);
            if let Ok(number) = usize::try_from(partition) {
                if entry.by_partition.len() <= number {
                    entry.by_partition.resize(number + 1, NO_INDEX);
                }
                entry.by_partition[number] = index;
            }
            self.parts.push(PartitionQueue { topic, partition, batches: VecDeque::new(), leader: NO_LEADER, generation: u64::MAX, muted: false });
            if entry.active {
                self.unsynced.push(index);
            }
            Ok(index)
        })
    }

    // -- the leaders -------------------------------------------------------------------
    /// A new metadata snapshot: every partition's leader is to be told again before a scan uses it;
    /// returns the partitions of the active topics (to be told now).
    fn new_generation(&mut self) -> PyResult<Vec<usize>> {
        guarded("RecordQueues.new_generation", || {
            self.generation += 1;
            self.unsynced.clear();
            Ok(self.active.iter().flat_map(|&t| self.topics[t].parts.iter().copied()).collect())
        })
    }

    /// The partitions to be told their leader under the current generation (usually none).
    fn take_unsynced(&mut self) -> PyResult<Vec<usize>> {
        guarded("RecordQueues.take_unsynced", || Ok(std::mem::take(&mut self.unsynced)))
    }

    /// Each of `indices` is led by the node at the same place of `leaders` (None or negative: unknown).
    fn set_leaders(&mut self, indices: Vec<usize>, leaders: Vec<Option<i64>>) -> PyResult<()> {
        guarded("RecordQueues.set_leaders", || {
            if indices.len() != leaders.len() {
                return Err(pyo3::exceptions::PyValueError::new_err("set_leaders: indices and leaders differ in length"));
            }
            let generation = self.generation;
            for (index, leader) in indices.into_iter().zip(leaders) {
                let part = self.part_mut(index)?;
                part.leader = leader.filter(|&l| l >= 0).unwrap_or(NO_LEADER);
                part.generation = generation;
            }
            Ok(())
        })
    }

    // -- the deques --------------------------------------------------------------------
    /// Appends a record to the partition's open batch (its last): the record's future, or None
    /// when there is no open batch or it has no room (the accumulator then opens one). The
    /// per-record door's one native call, as `ProducerBatch.try_append`.
    #[pyo3(signature = (index, timestamp, key, value, headers, on_delivery))]
    #[allow(clippy::too_many_arguments)] // a record, as `send()` passes it
    fn try_append(
        &self,
        py: Python<'_>,
        index: usize,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: Option<PyHeaders>,
        on_delivery: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Option<Py<FutureRecordMetadata>>> {
        guarded("RecordQueues.try_append", || {
            let Some(last) = self.part(index)?.batches.back() else { return Ok(None) };
            try_append_record(last.bind(py), timestamp, key, value, headers.as_deref(), on_delivery)
        })
    }

    /// The keyed record's lane (see the module's documentation): `send()`'s arguments as the
    /// caller gave them, and the intake's metadata snapshots (`partitions_by_topic`: topic ->
    /// `TopicPartitions`, read here, written by the intake and the engine only); the record's
    /// future, or None when it must go through the accumulator's door: headers, a partition or
    /// a timestamp given, a topic not exactly a `str` or with no snapshot, a key or value not
    /// exactly `bytes`, and what the lane itself refuses. The timestamp is the wall clock's now
    /// in milliseconds, as the door's caller reads it (`time.time_ns() // 1_000_000`).
    ///
    /// Why `send()`'s arguments and every check here: the tests `send()` made before this call
    /// (the routes, `type(value) is bytes`, the snapshot's lookup, the partition count) cost
    /// about 25 instructions a bytecode, some 1,400 a record of the door's 6,611 at 1 KB; with
    /// them here the door costs 5,840 (callgrind, no network, stop 66). Measured against the door
    /// (`instructions.py`, `small`): see `docs/design/native-batches.md`, stops 58 and 66.
    #[allow(clippy::too_many_arguments)] // `send()`'s arguments, one each
    fn try_append_keyed(
        &mut self,
        py: Python<'_>,
        partitions_by_topic: &Bound<'_, PyDict>,
        topic: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        key: &Bound<'_, PyAny>,
        headers: &Bound<'_, PyAny>,
        partition: &Bound<'_, PyAny>,
        timestamp_ms: &Bound<'_, PyAny>,
        on_delivery: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Option<Py<FutureRecordMetadata>>> {
        guarded("RecordQueues.try_append_keyed", || {
            if !(headers.is_none() && partition.is_none() && timestamp_ms.is_none()) {
                return Ok(None);
            }
            let (Ok(topic), Ok(key), Ok(value)) = (topic.cast_exact::<PyString>(), key.cast_exact::<PyBytes>(), value.cast_exact::<PyBytes>()) else {
                return Ok(None);
            };
            let Some(snapshot) = partitions_by_topic.get_item(topic)? else { return Ok(None) };
            let num_partitions: i64 = snapshot.getattr(intern!(py, "num_partitions"))?.extract()?;
            let (key, value) = (key.as_bytes(), value.as_bytes());
            if let Some(callback) = on_delivery {
                // Only a callable the door checked: every new batch's is, and the last one's is kept.
                match &self.last_charge {
                    Some((checked, _)) if checked.bind(py).is(callback) => {}
                    _ => return Ok(None),
                }
            }
            let Some(id) = self.topic_ids.bind(py).get_item(topic)? else { return Ok(None) };
            let Ok(partitions) = u32::try_from(num_partitions) else { return Ok(None) };
            if partitions == 0 {
                return Ok(None);
            }
            let number = partition_for_key(key, partitions) as usize;
            let index = self.topics.get(id.extract::<usize>()?).and_then(|t| t.by_partition.get(number)).copied().unwrap_or(NO_INDEX);
            let Some(queue) = self.parts.get(index) else { return Ok(None) };
            let Some(timestamp) = wall_clock_ms() else { return Ok(None) };
            if let Some(last) = queue.batches.back() {
                if let Some(future) = try_append_record(last.bind(py), timestamp, Some(key), Some(value), None, on_delivery)? {
                    return Ok(Some(future));
                }
            }
            self.open_keyed(py, index, timestamp, key, value, on_delivery)
        })
    }

    /// Lets the keyed lane open batches (`open_keyed`) with the accumulator's objects; see `Lane`.
    #[allow(clippy::too_many_arguments)] // the accumulator's objects, one each
    fn set_lane(
        &mut self,
        budget: Py<MemoryBudget>,
        lifecycle: Py<PyAny>,
        config: Py<PyAny>,
        batch_size: usize,
        clock: Py<PyAny>,
        event_loop: Py<PyAny>,
        log: Py<PyAny>,
        incomplete: Py<PySet>,
        wakeup: Py<PyAny>,
    ) -> PyResult<()> {
        guarded("RecordQueues.set_lane", || {
            self.lane = Some(Lane { budget, lifecycle, config, batch_size, clock, event_loop, log, incomplete, wakeup });
            Ok(())
        })
    }

    /// Settles the partition's open batch, which refused a record and will not grow any more: the
    /// bytes to charge the pool (0 without one, or when settled already).
    fn settle_last(&self, py: Python<'_>, index: usize) -> PyResult<i64> {
        guarded("RecordQueues.settle_last", || Ok(self.part(index)?.batches.back().map_or(0, |b| b.bind(py).borrow_mut().settle_now(py))))
    }

    /// A new empty batch for the partition (not queued: `send_arrow()` fills it first), holding
    /// `reserved` bytes of `buffer.memory`, made at `now` on `event_loop`; `config` is the
    /// accumulator's (compression type and level, `batch.size`, `delivery.timeout.ms`).
    #[allow(clippy::too_many_arguments)] // the batch's making, as the accumulator decides it
    fn new_batch(
        &self,
        py: Python<'_>,
        index: usize,
        config: &Bound<'_, PyAny>,
        now: f64,
        reserved: i64,
        event_loop: Py<PyAny>,
        log: Py<PyAny>,
    ) -> PyResult<Py<ProducerBatch>> {
        guarded("RecordQueues.new_batch", || self.make_batch(py, index, config, now, reserved, event_loop, log))
    }

    /// `try_append`'s other half (the open batch refused the record, memory is reserved): a new
    /// batch made as `new_batch`, the record appended and the batch queued as the partition's open
    /// one, in one call; `(future, batch)`.
    #[allow(clippy::too_many_arguments)] // the batch's making and the record
    fn open_batch(
        &mut self,
        py: Python<'_>,
        index: usize,
        config: &Bound<'_, PyAny>,
        now: f64,
        reserved: i64,
        event_loop: Py<PyAny>,
        log: Py<PyAny>,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: Option<PyHeaders>,
        on_delivery: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<(Py<FutureRecordMetadata>, Py<ProducerBatch>)> {
        guarded("RecordQueues.open_batch", || {
            let batch = self.make_batch(py, index, config, now, reserved, event_loop, log)?;
            if on_delivery.is_some() {
                if let Some((callback, bytes)) = &self.last_charge {
                    batch.borrow_mut(py).seed_charge(callback.clone_ref(py), *bytes);
                }
            }
            let future = try_append_record(batch.bind(py), timestamp, key, value, headers.as_deref(), on_delivery)?
                .ok_or_else(|| pyo3::exceptions::PyAssertionError::new_err("a new batch refused its first record"))?;
            if on_delivery.is_some() {
                self.last_charge = batch.borrow(py).charge_seed(py);
            }
            let part = &mut self.parts[index];
            part.batches.push_back(batch.clone_ref(py));
            let topic = part.topic;
            self.activate(topic);
            Ok((future, batch))
        })
    }

    /// The partition's open batch (its last), if any.
    fn last(&self, py: Python<'_>, index: usize) -> PyResult<Option<Py<ProducerBatch>>> {
        guarded("RecordQueues.last", || Ok(self.part(index)?.batches.back().map(|b| b.clone_ref(py))))
    }

    /// Queues a new batch as the partition's open one.
    fn append(&mut self, index: usize, batch: Py<ProducerBatch>) -> PyResult<()> {
        guarded("RecordQueues.append", || {
            let part = self.part_mut(index)?;
            part.batches.push_back(batch);
            let topic = part.topic;
            self.activate(topic);
            Ok(())
        })
    }

    /// Takes `batch` out if it is the partition's open one (the fake producer's "drain"); whether it was.
    fn remove_open(&mut self, py: Python<'_>, index: usize, batch: &Bound<'_, ProducerBatch>) -> PyResult<bool> {
        guarded("RecordQueues.remove_open", || {
            let part = self.part_mut(index)?;
            if part.batches.back().is_some_and(|b| b.bind(py).is(batch)) {
                part.batches.pop_back();
                return Ok(true);
            }
            Ok(false)
        })
    }

    /// Queues a batch to be retried: before the new batches and, when numbered, among the
    /// numbered ones by base sequence (so that a partition's batches go out in sequence order).
    fn insert_retry(&mut self, py: Python<'_>, index: usize, batch: Py<ProducerBatch>) -> PyResult<()> {
        guarded("RecordQueues.insert_retry", || {
            let sequence = batch.borrow(py).base_sequence;
            let part = self.part_mut(index)?;
            let at = if sequence == crate::batch::NO_SEQUENCE {
                0
            } else {
                part.batches
                    .iter()
                    .take_while(|b| {
                        let b = b.borrow(py);
                        b.base_sequence != crate::batch::NO_SEQUENCE && b.base_sequence < sequence
                    })
                    .count()
            };
            part.batches.insert(at, batch);
            let topic = part.topic;
            self.activate(topic);
            Ok(())
        })
    }

    /// The partition's queued batches, oldest first (a copy: tests, the fake producer, reports).
    fn batches(&self, py: Python<'_>, index: usize) -> PyResult<Vec<Py<ProducerBatch>>> {
        guarded("RecordQueues.batches", || Ok(self.part(index)?.batches.iter().map(|b| b.clone_ref(py)).collect()))
    }

    /// Whether any batch is queued.
    fn has_undrained(&self) -> PyResult<bool> {
        guarded("RecordQueues.has_undrained", || Ok(self.active.iter().any(|&t| self.topics[t].parts.iter().any(|&i| !self.parts[i].batches.is_empty()))))
    }

    /// The ids of the topics that may have queued batches (adaptive partitioning's statistics).
    fn active_topics(&self) -> PyResult<Vec<usize>> {
        guarded("RecordQueues.active_topics", || Ok(self.active.clone()))
    }

    /// A topic's partitions as `(partition, queued batches)`, in the order they were added.
    fn queue_lengths(&self, topic: usize) -> PyResult<Vec<(i64, usize)>> {
        guarded("RecordQueues.queue_lengths", || {
            let entry = self.topics.get(topic).ok_or_else(|| pyo3::exceptions::PyIndexError::new_err(format!("no topic {topic}")))?;
            Ok(entry.parts.iter().map(|&i| (self.parts[i].partition, self.parts[i].batches.len())).collect())
        })
    }

    // -- muting (the drain mutes, under `guarantee_order`) --------------------------
    fn unmute(&mut self, index: usize) -> PyResult<()> {
        guarded("RecordQueues.unmute", || {
            self.part_mut(index)?.muted = false;
            Ok(())
        })
    }

    // -- the response ------------------------------------------------------------------
    /// A Produce response's completion (`complete.rs`): `batches` are the request's, in the order
    /// it carried them (`produce_topic_data`), `response` the answer (a `ProduceAnswer`, read
    /// natively, or any object whose `partitions` are `PartitionResponse` tuples); every batch
    /// written is completed here, its memory summed into what is returned to free, and removed
    /// from `incomplete` (the accumulator's set). `duplicate_code` is `DUPLICATE_SEQUENCE_NUMBER`'s
    /// (a success with no offset); `tm` the transaction manager when idempotence is on. Returns
    /// `complete::Completed`: the decisions for Python, and what the counters need. With
    /// `per_batch`, only the matching: every batch comes back with its answer.
    #[allow(clippy::too_many_arguments)] // the response and the producer's parts it touches
    #[pyo3(signature = (batches, response, now, duplicate_code, tm, incomplete, per_batch = false, counters = None))]
    fn complete<'py>(
        slf: &Bound<'py, Self>,
        batches: Vec<Bound<'py, ProducerBatch>>,
        response: &Bound<'py, PyAny>,
        now: f64,
        duplicate_code: i64,
        tm: Option<&Bound<'py, PyAny>>,
        incomplete: &Bound<'py, PySet>,
        per_batch: bool,
        counters: Option<&Bound<'py, RequestCounters>>,
    ) -> PyResult<crate::complete::Completed<'py>> {
        guarded("RecordQueues.complete", || {
            crate::complete::complete(slf.py(), batches, response, now, duplicate_code, tm, incomplete, per_batch, counters, unmuter(slf))
        })
    }

    /// The answers of one read completed together (`complete` for each pair of `requests`, the
    /// requests' batches, and `responses`, in order): one call for the answers of a read, as the
    /// connection hands them over (`ProduceToken`). Returns `(decisions, freed, records,
    /// fold_due, errors)`: `decisions` flat `(batch, answer or None, response)` triples, in the
    /// responses' order; `freed`, `records` and `fold_due` summed; and `errors`, what each
    /// completion that failed raised (a bug), each pair completed on its own as it was when each
    /// answer had its own call.
    #[allow(clippy::too_many_arguments, clippy::type_complexity)] // the answers and the producer's parts they touch
    #[pyo3(signature = (requests, responses, now, duplicate_code, tm, incomplete, counters = None))]
    fn complete_all<'py>(
        slf: &Bound<'py, Self>,
        requests: Vec<Vec<Bound<'py, ProducerBatch>>>,
        responses: Vec<Bound<'py, PyAny>>,
        now: f64,
        duplicate_code: i64,
        tm: Option<&Bound<'py, PyAny>>,
        incomplete: &Bound<'py, PySet>,
        counters: Option<&Bound<'py, RequestCounters>>,
    ) -> PyResult<(Bound<'py, PyList>, i64, i64, bool, Bound<'py, PyList>)> {
        guarded("RecordQueues.complete_all", || {
            let py = slf.py();
            if requests.len() != responses.len() {
                return Err(pyo3::exceptions::PyValueError::new_err("RecordQueues.complete_all: one response per request"));
            }
            let unmute = unmuter(slf);
            let (decisions, errors) = (PyList::empty(py), PyList::empty(py));
            let (mut freed, mut records, mut due) = (0, 0, false);
            for (batches, response) in requests.into_iter().zip(&responses) {
                match crate::complete::complete(py, batches, response, now, duplicate_code, tm, incomplete, false, counters, unmute) {
                    Ok((these, f, r, d)) => {
                        for item in these.iter() {
                            let (batch, answer): (Bound<'py, PyAny>, Bound<'py, PyAny>) = item.extract()?;
                            decisions.append((batch, answer, response))?;
                        }
                        freed += f;
                        records += r;
                        due |= d;
                    }
                    Err(error) => errors.append(error.into_value(py))?,
                }
            }
            Ok((decisions, freed, records, due, errors))
        })
    }

    // -- the sender's scans ------------------------------------------------------------
    /// Which leaders have a sendable batch at `now` (Java's rule: full, linger expired, or
    /// `force`: memory exhausted, a flush or a close; never while its first batch backs off),
    /// and how long until one might. Returns `(ready nodes, next delay, topics whose leader is
    /// unknown, awaited, idle topic ids)`: `awaited` is flat `[node, ms left, ...]` of first
    /// batches someone awaits that are not ready by Java's rule (only when `awaited_early`: the
    /// accumulator makes their node ready when its connection is idle, else counts the delay);
    /// the idle topics were found with no queued batch and are no longer active.
    #[allow(clippy::type_complexity)] // the scan's one answer, as the accumulator unpacks it
    fn ready<'py>(
        &mut self,
        py: Python<'py>,
        now: f64,
        linger_ms: f64,
        batch_size: usize,
        force: bool,
        awaited_early: bool,
    ) -> PyResult<(Bound<'py, PySet>, f64, Bound<'py, PySet>, Vec<f64>, Vec<usize>)> {
        guarded("RecordQueues.ready", || {
            let mut ready: Vec<i64> = Vec::new();
            let unknown = PySet::empty(py)?;
            let mut next_delay = f64::INFINITY;
            let mut candidates = Vec::new();
            let mut idle = Vec::new();
            for &topic in &self.active {
                let mut queued = false;
                for &index in &self.topics[topic].parts {
                    let part = &self.parts[index];
                    let Some(first) = part.batches.front() else { continue };
                    queued = true;
                    if part.leader < 0 {
                        unknown.add(self.topics[topic].name.bind(py))?;
                        continue;
                    }
                    if part.muted || ready.contains(&part.leader) {
                        continue;
                    }
                    let batch = first.borrow(py);
                    let (sendable, backoff, left) = head_state(py, part, &batch, now, linger_ms, batch_size, force);
                    if sendable {
                        ready.push(part.leader);
                    } else if awaited_early && !backoff && awaited(py, &batch) {
                        candidates.push(part.leader as f64);
                        candidates.push(left);
                    } else {
                        next_delay = next_delay.min(left.max(0.0));
                    }
                }
                if !queued {
                    idle.push(topic);
                }
            }
            if !idle.is_empty() {
                for &topic in &idle {
                    self.topics[topic].active = false;
                }
                let topics = &self.topics;
                self.active.retain(|&t| topics[t].active);
            }
            Ok((PySet::new(py, ready)?, next_delay, unknown, candidates, idle))
        })
    }

    /// Takes up to `max_size` bytes of batches for one request to `node`, at most one per
    /// partition, starting one partition later than last time so none starves: Java's
    /// `drainBatchesForOneNode`. A partition is passed over while muted or its first batch backs
    /// off, or when `tm` (the transaction manager, idempotence on) says its first batch must wait
    /// (`drainable`: asked once for all the partitions' first batches); a batch taken is settled
    /// (its memory charged) and marked in flight, its partition muted when `guarantee_order`, and
    /// the batches taken are numbered by `tm` (`assign_sequences`, once). Two calls into Python
    /// per request with idempotence, none without. Returns `(batches, bytes to charge the pool)`,
    /// or None when `node` leads no active partition.
    #[pyo3(signature = (node, max_size, now, tm, guarantee_order))]
    fn drain<'py>(
        &mut self,
        py: Python<'py>,
        node: i64,
        max_size: usize,
        now: f64,
        tm: Option<&Bound<'py, PyAny>>,
        guarantee_order: bool,
    ) -> PyResult<Option<(Bound<'py, PyList>, i64)>> {
        guarded("RecordQueues.drain", || {
            let led = self.led_by(node);
            if led.is_empty() {
                return Ok(None);
            }
            let start = self.drain_index.get(&node).copied().unwrap_or(0) % led.len();
            self.drain_index.insert(node, start + 1);
            let heads = self.heads(py, &led, start, now);
            let taken = PyList::empty(py);
            if heads.is_empty() {
                return Ok(Some((taken, 0)));
            }
            let drainable: Option<Vec<bool>> = match tm {
                None => None,
                Some(tm) => Some(tm.call_method1(intern!(py, "drainable"), (heads.iter().map(|(_, b)| b.bind(py)).collect::<Vec<_>>(),))?.extract()?),
            };
            let (mut size, mut charge) = (0usize, 0i64);
            for (at, (index, batch)) in heads.into_iter().enumerate() {
                let bound = batch.bind(py);
                let batch_size = bound.borrow().builder.bind(py).borrow().wire_size(py);
                if !taken.is_empty() && size + batch_size > max_size {
                    break; // the request is full; the rest waits for the next drain
                }
                if drainable.as_ref().is_some_and(|d| !d.get(at).copied().unwrap_or(false)) {
                    continue;
                }
                let part = &mut self.parts[index];
                part.batches.pop_front();
                part.muted |= guarantee_order;
                let mut this = bound.borrow_mut();
                charge += this.settle_now(py);
                this.in_flight = true; // Java's `drained`
                this.queue_index = Some(index);
                drop(this);
                size += batch_size;
                taken.append(bound)?;
            }
            if let Some(tm) = tm {
                if !taken.is_empty() {
                    tm.call_method1(intern!(py, "assign_sequences"), (&taken,))?;
                }
            }
            Ok(Some((taken, charge)))
        })
    }

    /// The sender's next request to `node` in the same pass, after one it wrote: `drain`, if the
    /// node is still ready by `ready`'s rule (one of its partitions' first batches may go, by
    /// `head_state`), else nothing. Returns `(batches or None, bytes to charge the pool, ms until
    /// one of its first batches may go)`: the last is `inf` when it drained, and counts, as
    /// `ready` does, only partitions that are not muted. One call a request where the pass used to
    /// scan every partition again (`ready`) and drain (measured in `benchmarks/README.md`,
    /// "The pass's next request").
    #[allow(clippy::too_many_arguments)] // drain's arguments and ready's rule
    #[pyo3(signature = (node, max_size, now, tm, guarantee_order, linger_ms, batch_size, force))]
    fn drain_next<'py>(
        &mut self,
        py: Python<'py>,
        node: i64,
        max_size: usize,
        now: f64,
        tm: Option<&Bound<'py, PyAny>>,
        guarantee_order: bool,
        linger_ms: f64,
        batch_size: usize,
        force: bool,
    ) -> PyResult<(Option<Bound<'py, PyList>>, i64, f64)> {
        guarded("RecordQueues.drain_next", || {
            let mut delay = f64::INFINITY;
            for index in self.led_by(node) {
                let part = &self.parts[index];
                let Some(first) = part.batches.front() else { continue };
                if part.muted {
                    continue;
                }
                let (sendable, _, left) = head_state(py, part, &first.borrow(py), now, linger_ms, batch_size, force);
                if sendable {
                    return Ok(match self.drain(py, node, max_size, now, tm, guarantee_order)? {
                        Some((taken, charge)) => (Some(taken), charge, f64::INFINITY),
                        None => (None, 0, f64::INFINITY),
                    });
                }
                delay = delay.min(left.max(0.0));
            }
            Ok((None, 0, delay))
        })
    }

    /// Pops the queued batches past their delivery deadline at `now`, oldest first per partition
    /// (in-flight ones are the sender's).
    fn expired(&mut self, py: Python<'_>, now: f64) -> PyResult<Vec<Py<ProducerBatch>>> {
        guarded("RecordQueues.expired", || {
            let mut expired = Vec::new();
            for &topic in &self.active {
                for &index in &self.topics[topic].parts {
                    let batches = &mut self.parts[index].batches;
                    while batches.front().is_some_and(|b| now >= b.borrow(py).delivery_deadline_ms) {
                        expired.extend(batches.pop_front());
                    }
                }
            }
            Ok(expired)
        })
    }

    /// Milliseconds until the first queued batch reaches its delivery deadline (0 if one has).
    fn next_expiry_delay(&self, py: Python<'_>, now: f64) -> PyResult<f64> {
        guarded("RecordQueues.next_expiry_delay", || {
            let mut delay = f64::INFINITY;
            for &topic in &self.active {
                for &index in &self.topics[topic].parts {
                    if let Some(first) = self.parts[index].batches.front() {
                        delay = delay.min(first.borrow(py).delivery_deadline_ms - now);
                    }
                }
            }
            Ok(delay.max(0.0))
        })
    }

    /// Pops every queued batch of every topic (a forced close, an aborted transaction).
    fn abort_all(&mut self) -> PyResult<Vec<Py<ProducerBatch>>> {
        guarded("RecordQueues.abort_all", || Ok(self.parts.iter_mut().flat_map(|p| p.batches.drain(..)).collect()))
    }

    fn __traverse__(&self, visit: pyo3::PyVisit<'_>) -> Result<(), pyo3::PyTraverseError> {
        for topic in &self.topics {
            visit.call(&topic.name)?;
        }
        for part in &self.parts {
            for batch in &part.batches {
                visit.call(batch)?;
            }
        }
        if let Some((callback, _)) = &self.last_charge {
            visit.call(callback)?;
        }
        visit.call(&self.topic_ids)?;
        if let Some(lane) = &self.lane {
            // The budget holds no Python object: nothing to visit there.
            for object in [&lane.lifecycle, &lane.config, &lane.clock, &lane.event_loop, &lane.log, &lane.wakeup] {
                visit.call(object)?;
            }
            visit.call(&lane.incomplete)?;
        }
        Ok(())
    }

    fn __clear__(&mut self) -> PyResult<()> {
        guarded("RecordQueues.__clear__", || {
            for part in &mut self.parts {
                part.batches.clear();
            }
            self.last_charge = None;
            self.lane = None;
            Ok(())
        })
    }
}

/// Milliseconds since the epoch, as `time.time_ns() // 1_000_000` reads them; None before 1970.
fn wall_clock_ms() -> Option<i64> {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).ok()?;
    i64::try_from(since.as_millis()).ok()
}

/// A Produce request's batches (a drain's, or what is left of them) as the request carries them,
/// and what the sender keeps of the request, in one pass at `now_ms`:
/// `(batches, topic_data, deadline, fold_due)`. `topic_data` is a `ProduceTopicData`: the encoder
/// reads it without lists, tuples or views, and to anything else it is `[(topic, [(partition,
/// records), ...]), ...]`. One entry per topic in the order the topics first appear (as Java
/// writes it), each batch built (stamped with its sequence and epoch, compressed once), or, uncompressed and
/// of `SPLICE_THRESHOLD` bytes or more, sent in place as `(header, section)` (`for_request`: no
/// copy, no read of its records on the event loop's thread); `batches` reordered
/// to line up with the request's partitions, the order the broker answers in; `deadline` the
/// earliest delivery deadline among them (the sender's in-flight expiry, per request). The
/// request's statistics (Java's `updateProduceRequestMetrics`) go into `counters` when given
/// (the producer's metrics'); `fold_due` says that the metrics should fold them now.
/// One crossing per request: the per-batch loops the sender had in Python (`_group_by_topic`,
/// `records()` per batch, the in-flight tracking's deadline, the statistics).
#[pyfunction]
#[pyo3(signature = (batches, now_ms, counters = None))]
pub fn produce_topic_data<'py>(
    py: Python<'py>,
    batches: Vec<Bound<'py, ProducerBatch>>,
    now_ms: f64,
    counters: Option<&Bound<'py, RequestCounters>>,
) -> PyResult<(Bound<'py, PyList>, Bound<'py, ProduceTopicData>, f64, bool)> {
    guarded("produce_topic_data", || {
        // The topics in order of first appearance, each with its batches (usually one topic).
        let mut groups: Vec<(Bound<'py, PyAny>, Vec<&Bound<'py, ProducerBatch>>)> = Vec::new();
        for batch in &batches {
            let topic = batch.borrow().topic.bind(py).clone();
            let found = groups.iter().position(|(t, _)| t.is(&topic) || t.eq(&topic).unwrap_or(false));
            match found {
                Some(at) => groups[at].1.push(batch),
                None => groups.push((topic, vec![batch])),
            }
        }
        let ordered = PyList::empty(py);
        let mut topics = Vec::with_capacity(groups.len());
        let mut deadline = f64::INFINITY;
        let mut counters = counters.map(|c| c.borrow_mut());
        let (due, mut request) = match counters.as_mut() {
            Some(c) => {
                let (due, request) = c.begin_request(now_ms);
                (due, Some(request))
            }
            None => (false, None),
        };
        for (topic, group) in groups {
            let mut partitions = Vec::with_capacity(group.len());
            for batch in group {
                let this = batch.borrow();
                let partition = i32::try_from(this.partition)
                    .map_err(|_| pyo3::exceptions::PyValueError::new_err(format!("partition {} does not fit a Produce request", this.partition)))?;
                partitions.push((partition, this.for_request(py)?));
                deadline = deadline.min(this.delivery_deadline_ms);
                if let (Some(c), Some(request)) = (counters.as_mut(), request.as_mut()) {
                    c.add_sent_batch(py, request, &this)?;
                }
                ordered.append(batch)?;
            }
            topics.push((topic.unbind(), partitions));
        }
        if let (Some(c), Some(request)) = (counters.as_mut(), request) {
            c.end_request(request);
        }
        Ok((ordered, Bound::new(py, ProduceTopicData { topics })?, deadline, due))
    })
}
