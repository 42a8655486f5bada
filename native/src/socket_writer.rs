//! A connection's socket written by a thread of its own, so that large requests leave the event
//! loop's thread (issue #42, "a second core where it pays").
//!
//! Why: writing a Produce request to its socket is the largest single cost of the event loop's
//! thread for records of 10 KB (about a fifth of it: `docs/design/native-batches.md`). The
//! kernel's copy of each request into the socket happens on whichever thread calls `send()`;
//! librdkafka makes that call on its broker threads, asyncio on the loop's. Here the loop hands a
//! request's chunks over as buffer views (no copy: the objects stay alive and unchanged while
//! viewed) and a thread that never takes the GIL writes them, in order. Views the thread is done
//! with are released by the loop's thread, with the GIL, at its next call (`write`, `close`,
//! `abort`): the thread never attaches to Python. Measured with `benchmarks/socket_writer.py`:
//! the figures are beside `WRITER_THREAD_MIN_BYTES` (aioproducer/network/connection.py).
//!
//! What stays with the loop: when to write, framing and correlation (the sans-I/O connection),
//! reading, and every decision about a failure. The thread's only decision is to stop: on an
//! error it records it and shuts the socket down, which the loop's reader sees as the connection
//! lost; `error` says why.
//!
//! Unix only (a file descriptor, `poll`): elsewhere the connection writes through its transport.

use std::collections::VecDeque;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread;

use pyo3::buffer::PyBuffer;
use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::guarded;

/// How long one `poll` waits for the socket to take more bytes before the thread looks at its
/// abort flag again (an abort also shuts the socket down, which ends the wait at once).
const POLL_MS: i32 = 1000;

/// A chunk of a frame as the thread reads it: Python buffer views in the module, vectors in
/// the crate's tests (which run without Python).
trait Chunk: Send {
    fn bytes(&self) -> &[u8];
}

impl Chunk for PyBuffer<u8> {
    fn bytes(&self) -> &[u8] {
        // SAFETY: the view is held (not released) for as long as `self` lives, and the thread
        // reads it only while it holds the frame; the loop's thread releases it after the frame
        // moved to `done`. While a view is held its exporter (bytes, bytearray, or a memoryview
        // of either) keeps the memory allocated and does not resize it, and nothing in the
        // producer writes to a frame's chunks once handed over. `write` checked the view is
        // C-contiguous, so `len_bytes` bytes from `buf_ptr` are its data.
        unsafe { std::slice::from_raw_parts(self.buf_ptr() as *const u8, self.len_bytes()) }
    }
}

/// A chunk as the module's thread holds it: a `bytes` object read in place, or a buffer view of
/// anything else (a batch's section).
///
/// Why `bytes` apart: a view is a `Py_buffer` allocated, filled by its exporter and released
/// (with the GIL) for each chunk, and most of a request's chunks are `bytes` (its framing and each
/// batch's header): views were 2.7 % of the loop's samples with 10 KB records (py-spy, the peers'
/// layout, 2026-12-04). A `bytes` object's data never moves or changes while it lives.
enum PyChunk {
    /// The object, kept alive until the loop's thread releases the frame, and its data's address
    /// and length (an address, not a pointer, so that the chunk may cross to the thread).
    Bytes {
        _object: Py<PyBytes>,
        address: usize,
        len: usize,
    },
    View(PyBuffer<u8>),
}

impl Chunk for PyChunk {
    fn bytes(&self) -> &[u8] {
        match self {
            // SAFETY: `address` and `len` are the data of the `bytes` object held in `_object`,
            // which lives as long as `self`: CPython never moves or changes a `bytes` object's
            // data while it lives.
            PyChunk::Bytes { address, len, .. } => unsafe { std::slice::from_raw_parts(*address as *const u8, *len) },
            PyChunk::View(view) => view.bytes(),
        }
    }
}

/// One request's chunks, in order.
struct Frame<C> {
    chunks: Vec<C>,
    len: usize,
}

struct Queue<C> {
    frames: VecDeque<Frame<C>>,
    /// Frames the thread is done with (written, or dropped by an abort or an error), for the
    /// loop's thread to release with the GIL (a view's release needs it).
    done: Vec<Frame<C>>,
    /// Set by `close` (write what is queued, then stop) and `abort` (stop now).
    closing: bool,
    /// The thread is asleep on `wake` (written by the thread): only then does a write wake it,
    /// since a wake-up is a system call even with nobody waiting (about 1 µs of the loop's thread).
    asleep: bool,
}

impl<C> Default for Queue<C> {
    fn default() -> Self {
        Self { frames: VecDeque::new(), done: Vec::new(), closing: false, asleep: false }
    }
}

/// What the loop's thread and the writer thread share. Each field has one writer: `queue` and
/// `handed` the loop (through `write`, `close`, `abort`), `written` and `error` the thread.
struct Shared<C> {
    queue: Mutex<Queue<C>>,
    wake: Condvar,
    /// Frames handed over (written by `write` only).
    handed: AtomicU64,
    /// Frames written whole (written by the thread only): `handed == written` is idle.
    written: AtomicU64,
    /// Bytes handed over and not yet written (`write` adds, the thread subtracts).
    pending_bytes: AtomicU64,
    /// Set by `abort`: the thread stops at its next look, whatever is queued.
    aborted: AtomicBool,
    /// Why the thread stopped early (set once, by the thread).
    error: Mutex<Option<String>>,
    /// Set by the thread as it ends, its descriptor closed.
    stopped: AtomicBool,
}

impl<C> Shared<C> {
    fn new() -> Self {
        Self {
            queue: Mutex::new(Queue::default()),
            wake: Condvar::new(),
            handed: AtomicU64::new(0),
            written: AtomicU64::new(0),
            pending_bytes: AtomicU64::new(0),
            aborted: AtomicBool::new(false),
            error: Mutex::new(None),
            stopped: AtomicBool::new(false),
        }
    }
}

/// A socket's writer thread. `SocketWriter(fd)` takes ownership of `fd` (a duplicate the caller
/// made of the connection's socket, so that the two close independently) and starts the thread.
#[pyclass(module = "aioproducer._native", frozen)]
pub struct SocketWriter {
    shared: Arc<Shared<PyChunk>>,
}

#[pymethods]
impl SocketWriter {
    #[new]
    fn new(fd: RawFd) -> PyResult<Self> {
        guarded("SocketWriter.__new__", || {
            if fd < 0 {
                return Err(PyValueError::new_err(format!("SocketWriter: fd must be a file descriptor >= 0, got {fd}")));
            }
            // SAFETY: the caller hands over a descriptor it just duplicated and will not use or
            // close again (network/connection.py: os.dup), so this OwnedFd is its only owner.
            let owned = unsafe { OwnedFd::from_raw_fd(fd) };
            let shared = Arc::new(Shared::new());
            let theirs = Arc::clone(&shared);
            thread::Builder::new()
                .name("aioproducer-socket-writer".into())
                .spawn(move || run(&theirs, owned))
                .map_err(|e| PyOSError::new_err(format!("SocketWriter: cannot start its thread: {e}")))?;
            Ok(Self { shared })
        })
    }

    /// Queue one request's bytes, given as chunks (bytes-like objects), for the thread to write
    /// after every frame queued before it; returns the bytes queued now. Refused once closed.
    ///
    /// Cost on the loop's thread: a reference per `bytes` chunk and a buffer view per other chunk
    /// (no copy), and a wake-up of the thread when it sleeps.
    fn write(&self, chunks: Vec<Bound<'_, PyAny>>) -> PyResult<u64> {
        guarded("SocketWriter.write", || {
            let mut views = Vec::with_capacity(chunks.len());
            let mut len = 0;
            for chunk in &chunks {
                if let Ok(bytes) = chunk.cast::<PyBytes>() {
                    let data = bytes.as_bytes();
                    len += data.len();
                    views.push(PyChunk::Bytes { address: data.as_ptr() as usize, len: data.len(), _object: bytes.clone().unbind() });
                    continue;
                }
                let view = PyBuffer::<u8>::get(chunk)?;
                if !view.is_c_contiguous() {
                    return Err(PyValueError::new_err("SocketWriter.write: every chunk must be a contiguous buffer"));
                }
                len += view.len_bytes();
                views.push(PyChunk::View(view));
            }
            let shared = &self.shared;
            let (released, asleep, pending) = {
                let mut queue = shared.queue.lock().unwrap_or_else(PoisonError::into_inner);
                if queue.closing {
                    return Err(PyOSError::new_err("SocketWriter: closed"));
                }
                // Counted before the thread can see the frame: it subtracts and counts it written after.
                shared.handed.fetch_add(1, Ordering::Release);
                let pending = shared.pending_bytes.fetch_add(len as u64, Ordering::AcqRel) + len as u64;
                queue.frames.push_back(Frame { chunks: views, len });
                (std::mem::take(&mut queue.done), queue.asleep, pending)
            };
            if asleep {
                shared.wake.notify_one();
            }
            drop(released); // released here, on the loop's thread, holding the GIL
            Ok(pending)
        })
    }

    /// Whether every frame handed over has been written (the loop may write through its own
    /// transport again without overtaking one).
    #[getter]
    fn idle(&self) -> PyResult<bool> {
        guarded("SocketWriter.idle", || {
            let shared = &self.shared;
            Ok(shared.written.load(Ordering::Acquire) == shared.handed.load(Ordering::Acquire))
        })
    }

    /// Bytes handed over and not written yet.
    #[getter]
    fn pending_bytes(&self) -> PyResult<u64> {
        guarded("SocketWriter.pending_bytes", || Ok(self.shared.pending_bytes.load(Ordering::Acquire)))
    }

    /// Why the thread stopped before it was closed (a socket error), or None.
    #[getter]
    fn error(&self) -> PyResult<Option<String>> {
        guarded("SocketWriter.error", || Ok(self.shared.error.lock().unwrap_or_else(PoisonError::into_inner).clone()))
    }

    /// Whether the thread has ended (closed, aborted or failed) and closed its descriptor.
    #[getter]
    fn stopped(&self) -> PyResult<bool> {
        guarded("SocketWriter.stopped", || Ok(self.shared.stopped.load(Ordering::Acquire)))
    }

    /// Write what is queued, then stop and close the descriptor (a graceful close).
    fn close(&self) -> PyResult<()> {
        guarded("SocketWriter.close", || {
            let released = {
                let mut queue = self.shared.queue.lock().unwrap_or_else(PoisonError::into_inner);
                queue.closing = true;
                std::mem::take(&mut queue.done)
            };
            drop(released);
            self.shared.wake.notify_one();
            Ok(())
        })
    }

    /// Stop now: drop what is queued and, given the connection's own descriptor (`fd` >= 0, still
    /// open), shut the socket down, which ends a write in progress at once; without it the thread
    /// stops at its next look at the abort flag (within `POLL_MS`).
    fn abort(&self, fd: RawFd) -> PyResult<()> {
        guarded("SocketWriter.abort", || {
            let shared = &self.shared;
            shared.aborted.store(true, Ordering::Release);
            let released = {
                let mut queue = shared.queue.lock().unwrap_or_else(PoisonError::into_inner);
                queue.closing = true;
                let mut released = std::mem::take(&mut queue.done);
                released.extend(queue.frames.drain(..));
                released
            };
            drop(released);
            if fd >= 0 {
                shutdown(fd);
            }
            shared.wake.notify_one();
            Ok(())
        })
    }
}

/// The thread: take every queued frame, write them whole, until closed, aborted or failed. It
/// never drops a frame (a view's release needs the GIL): each goes to `done` for the loop's thread.
fn run<C: Chunk>(shared: &Shared<C>, fd: OwnedFd) {
    while let Some(frames) = next_frames(shared) {
        let outcome = if shared.aborted.load(Ordering::Acquire) { Err(String::new()) } else { write_frames(fd.as_raw_fd(), &frames, &shared.aborted) };
        let (count, len) = (frames.len() as u64, frames.iter().map(|f| f.len as u64).sum::<u64>());
        shared.queue.lock().unwrap_or_else(PoisonError::into_inner).done.extend(frames);
        if let Err(error) = outcome {
            if !shared.aborted.load(Ordering::Acquire) {
                *shared.error.lock().unwrap_or_else(PoisonError::into_inner) = Some(error);
                shutdown(fd.as_raw_fd()); // the loop's reader sees the connection end
            }
            break;
        }
        shared.pending_bytes.fetch_sub(len, Ordering::AcqRel);
        shared.written.fetch_add(count, Ordering::Release);
    }
    drop(fd); // closed once the last frame queued before a graceful close is written
    shared.stopped.store(true, Ordering::Release);
}

/// Every queued frame, oldest first, waiting for one; None once closed with nothing left.
fn next_frames<C>(shared: &Shared<C>) -> Option<Vec<Frame<C>>> {
    let mut queue = shared.queue.lock().unwrap_or_else(PoisonError::into_inner);
    loop {
        if !queue.frames.is_empty() {
            return Some(queue.frames.drain(..).collect());
        }
        if queue.closing {
            return None;
        }
        queue.asleep = true;
        queue = shared.wake.wait(queue).unwrap_or_else(PoisonError::into_inner);
        queue.asleep = false;
    }
}

/// The most chunks one `sendmsg` carries (Linux's `IOV_MAX` is 1024).
const MAX_IOVECS: usize = 512;

/// Every chunk of `frames`, in order, many to a `sendmsg`, waiting with `poll` while the socket is
/// full (the descriptor is non-blocking: asyncio set it so, and the duplicate shares that flag).
///
/// Why gathered: a request sent in place is a dozen chunks (framing, each batch's 61-byte header,
/// its section), and a `send` each made a TCP segment each on a socket with `TCP_NODELAY`, every
/// one through the whole loopback path: the thread cost the process more than the loop's own
/// `writev` (20,000 x 10 KB records: 49.5 µs of CPU a record through the thread from 64 KB,
/// 31.8 on the loop alone, 2026-12-04). One call per `MAX_IOVECS` chunks of every frame queued is
/// what the loop's pass does (`BrokerConnection._write_direct`).
fn write_frames<C: Chunk>(fd: RawFd, frames: &[Frame<C>], aborted: &AtomicBool) -> Result<(), String> {
    let pieces: Vec<&[u8]> = frames.iter().flat_map(|f| f.chunks.iter().map(Chunk::bytes)).filter(|b| !b.is_empty()).collect();
    let (mut first, mut offset) = (0, 0); // the first piece not written whole, and how much of it is
    while first < pieces.len() {
        let batch = &pieces[first..pieces.len().min(first + MAX_IOVECS)];
        let mut iov: Vec<libc::iovec> = batch
            .iter()
            .enumerate()
            .map(|(i, piece)| {
                let rest = if i == 0 { &piece[offset..] } else { piece };
                libc::iovec { iov_base: rest.as_ptr() as *mut libc::c_void, iov_len: rest.len() }
            })
            .collect();
        // SAFETY: a zeroed msghdr is valid (no name, no control data); its iov points at `iov`,
        // whose entries point into the live slices of `pieces`, all alive for the call; `fd` is
        // the descriptor this thread owns, open until `run` returns.
        let sent = unsafe {
            let mut message: libc::msghdr = std::mem::zeroed();
            message.msg_iov = iov.as_mut_ptr();
            message.msg_iovlen = iov.len() as _;
            libc::sendmsg(fd, &message, SEND_FLAGS)
        };
        if sent > 0 {
            let mut left = sent as usize;
            while left > 0 {
                let rest = pieces[first].len() - offset;
                if left < rest {
                    offset += left;
                    break;
                }
                left -= rest;
                first += 1;
                offset = 0;
            }
            continue;
        }
        let error = std::io::Error::last_os_error();
        match error.kind() {
            _ if sent == 0 => wait_writable(fd, aborted)?,
            std::io::ErrorKind::WouldBlock => wait_writable(fd, aborted)?,
            std::io::ErrorKind::Interrupted => {}
            _ => return Err(format!("writing to the socket failed: {error}")),
        }
    }
    Ok(())
}

/// Wait until the socket takes more bytes (or is shut down, or the writer is aborted).
fn wait_writable(fd: RawFd, aborted: &AtomicBool) -> Result<(), String> {
    loop {
        if aborted.load(Ordering::Acquire) {
            return Err("aborted".into());
        }
        let mut poll = libc::pollfd { fd, events: libc::POLLOUT, revents: 0 };
        // SAFETY: one valid pollfd, owned by this frame, for the duration of the call.
        let ready = unsafe { libc::poll(&mut poll, 1, POLL_MS) };
        if ready > 0 {
            return Ok(()); // writable, or an error the next send reports
        }
        if ready < 0 && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            return Err(format!("waiting for the socket failed: {}", std::io::Error::last_os_error()));
        }
    }
}

/// Shut both directions of the socket down: a write in progress fails, the peer and the loop's
/// reader see the end. Errors are ignored (the socket may be gone already).
fn shutdown(fd: RawFd) {
    // SAFETY: shutdown takes a descriptor number and touches no memory. Callers pass a descriptor
    // they know is open and is this connection's socket: the thread its own, `abort` the
    // connection's (network/connection.py passes it only while its transport holds it).
    unsafe {
        libc::shutdown(fd, libc::SHUT_RDWR);
    }
}

#[cfg(target_os = "linux")]
const SEND_FLAGS: libc::c_int = libc::MSG_NOSIGNAL;
#[cfg(not(target_os = "linux"))]
const SEND_FLAGS: libc::c_int = 0; // CPython ignores SIGPIPE: a broken pipe is an EPIPE error

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::os::unix::net::UnixStream;

    impl Chunk for Vec<u8> {
        fn bytes(&self) -> &[u8] {
            self
        }
    }

    fn writer_over(stream: UnixStream) -> (Arc<Shared<Vec<u8>>>, thread::JoinHandle<()>) {
        stream.set_nonblocking(true).unwrap();
        let shared = Arc::new(Shared::new());
        let theirs = Arc::clone(&shared);
        let fd = OwnedFd::from(stream);
        (shared, thread::spawn(move || run(&theirs, fd)))
    }

    fn queue(shared: &Shared<Vec<u8>>, frame: Vec<u8>) {
        let len = frame.len();
        shared.queue.lock().unwrap().frames.push_back(Frame { chunks: vec![frame[..len / 2].to_vec(), frame[len / 2..].to_vec()], len });
        shared.handed.fetch_add(1, Ordering::Release);
        shared.wake.notify_one();
    }

    #[test]
    fn frames_arrive_whole_and_in_order_through_a_full_socket() {
        let (ours, mut peer) = UnixStream::pair().unwrap();
        let (shared, thread) = writer_over(ours);
        let frames: Vec<Vec<u8>> = (0..50u8).map(|i| vec![i; 64 * 1024 + usize::from(i)]).collect();
        for frame in &frames {
            queue(&shared, frame.clone());
        }
        shared.queue.lock().unwrap().closing = true;
        shared.wake.notify_one();
        let mut received = Vec::new();
        peer.read_to_end(&mut received).unwrap(); // ends when the thread closes its descriptor
        thread.join().unwrap();
        assert_eq!(received, frames.concat());
        assert_eq!(shared.written.load(Ordering::Acquire), 50);
        assert!(shared.stopped.load(Ordering::Acquire));
        assert!(shared.error.lock().unwrap().is_none());
    }

    #[test]
    fn many_small_chunks_of_frames_queued_together_arrive_whole_and_in_order() {
        // More chunks than one sendmsg carries (MAX_IOVECS), an empty one among them, a few
        // larger than the socket's buffer, and a peer that reads only once everything is queued:
        // writes end mid-chunk, several times within one, and go on from there.
        let section_len = |i: u32| if i % 100 == 7 { 700_000 } else { (i * 37 % 9_000) as usize };
        let (ours, mut peer) = UnixStream::pair().unwrap();
        let (shared, thread) = writer_over(ours);
        let frames: Vec<Vec<Vec<u8>>> =
            (0..400u32).map(|i| vec![vec![(i % 251) as u8; 61], Vec::new(), (0..section_len(i)).map(|j| (j % 253) as u8).collect()]).collect();
        {
            let mut queue = shared.queue.lock().unwrap();
            for chunks in &frames {
                let len = chunks.iter().map(Vec::len).sum();
                queue.frames.push_back(Frame { chunks: chunks.clone(), len });
                shared.handed.fetch_add(1, Ordering::Release);
            }
            queue.closing = true;
        }
        shared.wake.notify_one();
        let mut received = Vec::new();
        peer.read_to_end(&mut received).unwrap();
        thread.join().unwrap();
        assert_eq!(received, frames.concat().concat());
        assert_eq!(shared.written.load(Ordering::Acquire), 400);
        assert!(shared.error.lock().unwrap().is_none());
    }

    #[test]
    fn a_peer_gone_is_an_error_and_stops_the_thread() {
        let (ours, peer) = UnixStream::pair().unwrap();
        drop(peer);
        let (shared, thread) = writer_over(ours);
        queue(&shared, vec![1; 1024]);
        thread.join().unwrap();
        assert!(shared.error.lock().unwrap().as_deref().unwrap_or("").contains("writing to the socket failed"));
        assert_eq!(shared.written.load(Ordering::Acquire), 0);
    }
}
