//! `Producer.send_arrow`'s data plane: Arrow record batches in, records appended to the open
//! batches' builders, with no Python object per row.
//!
//! The Arrow C Data Interface (ArrowSchema, ArrowArray, ArrowArrayStream) is read here by hand,
//! from the spec's C structs, instead of through arrow-rs: the few layouts the sink takes
//! (binary and string, large and view; ints; timestamps; a list of key/value structs) are a
//! few hundred lines, and arrow-array would add minutes to a cold build (see the README).
//!
//! Ownership: data arrives in PyCapsules (`__arrow_c_stream__`, `__arrow_c_array__`). Each C
//! struct is moved out of its capsule (the capsule's copy is marked released, so its
//! destructor does nothing) into a Box owned here, whose `Drop` calls the producer's
//! `release` callback exactly once. Columns are raw views into the buffers of the batch that
//! owns them, read only while that batch is alive (they live in the same `Batch`).
//!
//! The work is split so that Python runs per batch, never per row: `ArrowRecords::new`
//! imports and checks the schema (nothing queued yet); `plan` checks every row (partition
//! range, record size, timestamps, header keys) and groups the row indices by partition,
//! stably; the accumulator then asks `append_rows` to fill an open batch's builder with the
//! next rows of one group until it is full.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyCapsule, PyCapsuleMethods, PyTuple};

use crate::batch_builder::{size_upper_bound as upper_bound, Header, PyRecordBatchBuilder};
use crate::murmur::partition_for_key;
use crate::{bug, guarded, test_panic_after_rows};

/// Rows grouped by partition together (see `Rows::plan`): about 200 KB of 100 B rows, so that a
/// chunk's rows stay in cache while each partition's group is appended. Measured on 1M keyed
/// 100 B rows over 6 partitions (append only): 140 ns a row unchunked, 80 with 8192, 75 with 2048.
const PLAN_CHUNK: usize = 2048;

// ------------------------------------------------------------------ the C Data Interface structs

#[repr(C)]
pub struct FfiSchema {
    format: *const c_char,
    name: *const c_char,
    metadata: *const c_char,
    flags: i64,
    n_children: i64,
    children: *mut *mut FfiSchema,
    dictionary: *mut FfiSchema,
    release: Option<unsafe extern "C" fn(*mut FfiSchema)>,
    private_data: *mut c_void,
}

#[repr(C)]
pub struct FfiArray {
    length: i64,
    null_count: i64,
    offset: i64,
    n_buffers: i64,
    n_children: i64,
    buffers: *mut *const c_void,
    children: *mut *mut FfiArray,
    dictionary: *mut FfiArray,
    release: Option<unsafe extern "C" fn(*mut FfiArray)>,
    private_data: *mut c_void,
}

#[repr(C)]
pub struct FfiStream {
    get_schema: Option<unsafe extern "C" fn(*mut FfiStream, *mut FfiSchema) -> c_int>,
    get_next: Option<unsafe extern "C" fn(*mut FfiStream, *mut FfiArray) -> c_int>,
    get_last_error: Option<unsafe extern "C" fn(*mut FfiStream) -> *const c_char>,
    release: Option<unsafe extern "C" fn(*mut FfiStream)>,
    private_data: *mut c_void,
}

impl FfiSchema {
    fn empty() -> Self {
        FfiSchema {
            format: ptr::null(),
            name: ptr::null(),
            metadata: ptr::null(),
            flags: 0,
            n_children: 0,
            children: ptr::null_mut(),
            dictionary: ptr::null_mut(),
            release: None,
            private_data: ptr::null_mut(),
        }
    }
}

impl FfiArray {
    fn empty() -> Self {
        FfiArray {
            length: 0,
            null_count: 0,
            offset: 0,
            n_buffers: 0,
            n_children: 0,
            buffers: ptr::null_mut(),
            children: ptr::null_mut(),
            dictionary: ptr::null_mut(),
            release: None,
            private_data: ptr::null_mut(),
        }
    }
}

/// An ArrowSchema this module owns: released once, when dropped.
struct OwnedSchema(Box<FfiSchema>);

impl Drop for OwnedSchema {
    fn drop(&mut self) {
        if let Some(release) = self.0.release {
            // SAFETY: the struct was moved to us from its producer and not released yet; the
            // callback sees its own pointer still set (producers return early on a NULL one) and
            // marks the struct released; we clear it too, so it can never run twice.
            unsafe { release(&mut *self.0) };
            self.0.release = None;
        }
    }
}

/// An ArrowArray this module owns: released once, when dropped.
struct OwnedArray(Box<FfiArray>);

impl Drop for OwnedArray {
    fn drop(&mut self) {
        if let Some(release) = self.0.release {
            // SAFETY: as for OwnedSchema: moved to us, released exactly once here.
            unsafe { release(&mut *self.0) };
            self.0.release = None;
        }
    }
}

/// An ArrowArrayStream this module owns: released once, when dropped.
struct OwnedStream(Box<FfiStream>);

impl Drop for OwnedStream {
    fn drop(&mut self) {
        if let Some(release) = self.0.release {
            // SAFETY: as for OwnedSchema: moved to us, released exactly once here.
            unsafe { release(&mut *self.0) };
            self.0.release = None;
        }
    }
}

/// Moves the C struct out of a capsule named `name`, leaving the capsule's copy released
/// (all zero: `release` NULL), as the PyCapsule interface asks of a consumer.
fn take_from_capsule<T>(capsule: &Bound<'_, PyAny>, name: &CStr, empty: T) -> PyResult<Box<T>> {
    let capsule = capsule.cast::<PyCapsule>().map_err(|_| PyTypeError::new_err(format!("send_arrow: expected a PyCapsule named {name:?}")))?;
    let pointer = capsule.pointer_checked(Some(name))?.cast::<T>();
    let mut owned = Box::new(empty);
    // SAFETY: the capsule's name says it holds a `T` (an Arrow C struct), valid and ours to move
    // while we hold the GIL and run no Python code; swapping leaves it an empty, released struct.
    unsafe { ptr::swap(pointer.as_ptr(), &mut *owned) };
    Ok(owned)
}

// ------------------------------------------------------------------ errors (no Python types: Rust tests link)

/// Why data is refused; each becomes its Python exception in `to_py`.
#[derive(Debug, PartialEq, Eq)]
pub enum ArrowError {
    /// A column of a type the sink cannot take: TypeError.
    Type(String),
    /// Missing, unknown or duplicate columns, malformed data: ValueError.
    Columns(String),
    /// A row the producer would refuse: InvalidRecordError.
    Row(String),
    /// A row larger than max.request.size or buffer.memory: RecordTooLargeError.
    TooLarge(String),
}

impl ArrowError {
    fn to_py(&self, py: Python<'_>) -> PyErr {
        let (class, message) = match self {
            ArrowError::Type(m) => return PyTypeError::new_err(m.clone()),
            ArrowError::Columns(m) => return PyValueError::new_err(m.clone()),
            ArrowError::Row(m) => ("InvalidRecordError", m),
            ArrowError::TooLarge(m) => ("RecordTooLargeError", m),
        };
        match py.import("aioproducer.errors").and_then(|m| m.getattr(class)).and_then(|c| c.call1((message.clone(),))) {
            Ok(exc) => PyErr::from_value(exc),
            Err(e) => e,
        }
    }
}

// ------------------------------------------------------------------ schema

/// Layout of a binary-like column (value, key, header key or value).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BinKind {
    Small,
    Large,
    View,
}

fn bin_kind(format: &str, utf8_only: bool) -> Option<BinKind> {
    match format {
        "u" => Some(BinKind::Small),
        "U" => Some(BinKind::Large),
        "vu" => Some(BinKind::View),
        "z" if !utf8_only => Some(BinKind::Small),
        "Z" if !utf8_only => Some(BinKind::Large),
        "vz" if !utf8_only => Some(BinKind::View),
        _ => None,
    }
}

/// A readable Arrow type name for an error message.
fn type_name(format: &str) -> String {
    let name = match format {
        "n" => "null",
        "b" => "bool",
        "c" => "int8",
        "C" => "uint8",
        "s" => "int16",
        "S" => "uint16",
        "i" => "int32",
        "I" => "uint32",
        "l" => "int64",
        "L" => "uint64",
        "e" => "float16",
        "f" => "float32",
        "g" => "float64",
        "z" => "binary",
        "Z" => "large_binary",
        "vz" => "binary_view",
        "u" => "string",
        "U" => "large_string",
        "vu" => "string_view",
        "tdD" => "date32",
        "tdm" => "date64",
        "+l" => "list",
        "+L" => "large_list",
        "+s" => "struct",
        "+m" => "map",
        _ => return format!("Arrow format {format:?}"),
    };
    name.to_string()
}

/// Schema node, read while validating (children and dictionary included).
struct Node<'a> {
    format: &'a str,
    name: &'a str,
    children: Vec<&'a FfiSchema>,
    dictionary: bool,
}

/// SAFETY contract: `schema` is a valid, unreleased ArrowSchema (its strings NUL-terminated UTF-8
/// or not, children pointers valid), alive while the returned node is used.
unsafe fn node(schema: &FfiSchema) -> Node<'_> {
    let text = |p: *const c_char| if p.is_null() { "" } else { CStr::from_ptr(p).to_str().unwrap_or("?") };
    let children = (0..schema.n_children.max(0) as usize).map(|i| &**schema.children.add(i)).collect();
    Node { format: text(schema.format), name: text(schema.name), children, dictionary: !schema.dictionary.is_null() }
}

/// What each sink column is, from the schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Column {
    Value(BinKind),
    Key(BinKind),
    /// Width in bytes of a signed integer.
    Partition(usize),
    /// Timestamp: (multiply, divide) to milliseconds; (1, 1) for int64 milliseconds.
    Timestamp(i64, i64),
    /// (large list, key kind, value kind).
    Headers(bool, BinKind, BinKind),
}

impl Column {
    fn name(self) -> &'static str {
        match self {
            Column::Value(_) => "value",
            Column::Key(_) => "key",
            Column::Partition(_) => "partition",
            Column::Timestamp(..) => "timestamp",
            Column::Headers(..) => "headers",
        }
    }
}

const COLUMNS: &str = "value (required), key, partition, headers, timestamp";

fn refuse(column: &str, format: &str, wanted: &str) -> ArrowError {
    ArrowError::Type(format!("send_arrow: column {column:?} has type {}; it must be {wanted}", type_name(format)))
}

fn check_column(n: &Node<'_>) -> Result<Column, ArrowError> {
    let column = n.name;
    if n.dictionary {
        return Err(ArrowError::Type(format!(
            "send_arrow: column {column:?} is dictionary-encoded (indices {}); decode it first (pyarrow: .dictionary_decode(), polars: cast to String)",
            type_name(n.format)
        )));
    }
    let binary = "binary, large_binary, binary_view, string, large_string or string_view";
    match column {
        "value" => bin_kind(n.format, false).map(Column::Value).ok_or_else(|| refuse(column, n.format, binary)),
        "key" => bin_kind(n.format, false).map(Column::Key).ok_or_else(|| refuse(column, n.format, binary)),
        "partition" => match n.format {
            "c" => Ok(Column::Partition(1)),
            "s" => Ok(Column::Partition(2)),
            "i" => Ok(Column::Partition(4)),
            "l" => Ok(Column::Partition(8)),
            f => Err(refuse(column, f, "int8, int16, int32 or int64")),
        },
        "timestamp" => {
            let wanted = "timestamp (any unit, any time zone) or int64 (milliseconds since the epoch)";
            match n.format {
                "l" => Ok(Column::Timestamp(1, 1)),
                f if f.starts_with("tss:") => Ok(Column::Timestamp(1000, 1)),
                f if f.starts_with("tsm:") => Ok(Column::Timestamp(1, 1)),
                f if f.starts_with("tsu:") => Ok(Column::Timestamp(1, 1000)),
                f if f.starts_with("tsn:") => Ok(Column::Timestamp(1, 1_000_000)),
                f => Err(refuse(column, f, wanted)),
            }
        }
        "headers" => check_headers(n),
        other => Err(ArrowError::Columns(format!(
            "send_arrow: unknown column {other:?}; the columns are {COLUMNS} (as Spark's Kafka sink names them): select or rename them"
        ))),
    }
}

fn check_headers(n: &Node<'_>) -> Result<Column, ArrowError> {
    let wanted = "list<struct<key: string, value: binary>> (list or large_list; key string, large_string or string_view; value binary-like)";
    let bad = || refuse("headers", n.format, wanted);
    let large = match n.format {
        "+l" => false,
        "+L" => true,
        _ => return Err(bad()),
    };
    // SAFETY: children of a valid schema are valid schemas (the C Data Interface's contract).
    let item = unsafe { node(n.children.first().ok_or_else(bad)?) };
    if item.format != "+s" || item.dictionary || item.children.len() != 2 {
        return Err(bad());
    }
    // SAFETY: as above.
    let (k, v) = unsafe { (node(item.children[0]), node(item.children[1])) };
    if k.name != "key" || v.name != "value" || k.dictionary || v.dictionary {
        return Err(bad());
    }
    let key = bin_kind(k.format, true)
        .ok_or_else(|| ArrowError::Type(format!("send_arrow: column \"headers\": its key field has type {}; it must be a string type", type_name(k.format))))?;
    let value = bin_kind(v.format, false)
        .ok_or_else(|| ArrowError::Type(format!("send_arrow: column \"headers\": its value field has type {}; it must be binary-like", type_name(v.format))))?;
    Ok(Column::Headers(large, key, value))
}

/// The sink columns of a record batch schema, in the schema's child order.
fn check_schema(schema: &FfiSchema) -> Result<Vec<Column>, ArrowError> {
    // SAFETY: the schema was just imported from its producer and is alive.
    let top = unsafe { node(schema) };
    if top.format != "+s" {
        return Err(ArrowError::Type(format!("send_arrow: data must be a table or record batch (an Arrow struct), not {}", type_name(top.format))));
    }
    let mut columns = Vec::with_capacity(top.children.len());
    let mut names: Vec<&str> = Vec::new();
    for child in &top.children {
        // SAFETY: children of a valid schema are valid.
        let n = unsafe { node(child) };
        if names.contains(&n.name) {
            return Err(ArrowError::Columns(format!("send_arrow: column {:?} appears twice", n.name)));
        }
        names.push(n.name);
        columns.push(check_column(&n)?);
    }
    if !columns.iter().any(|c| matches!(c, Column::Value(_))) {
        return Err(ArrowError::Columns(format!("send_arrow: no \"value\" column (found {names:?}); the columns are {COLUMNS}")));
    }
    Ok(columns)
}

// ------------------------------------------------------------------ array views
//
// Every buffer a row will read is checked once per column when a batch is imported (`Batch::new`):
// each array's counts, lengths and offsets, each offset against what it indexes, each view against
// its buffer's size. The per-row readers (`BinView::get`, `IntView::get`, `HeadersView::range`)
// then read without checks. What no consumer can check is what the interface does not carry: the
// size of a buffer. A buffer must hold what its array's length (and, for binary data, its last
// offset) says, as the C Data Interface asks of every producer.

/// The `i`-th value at `p`, whatever `p`'s alignment: the C Data Interface recommends aligned
/// buffers but does not promise them. On x86-64 and aarch64 this is the aligned load's instruction.
/// SAFETY contract: `p` points to at least `i + 1` values of `T`.
#[inline(always)]
unsafe fn read_at<T: Copy>(p: *const T, i: usize) -> T {
    p.add(i).read_unaligned()
}

/// A validity bitmap (null: every slot valid).
#[derive(Clone, Copy)]
struct Validity(*const u8);

impl Validity {
    /// The array's bitmap (buffer 0). Err: a null count with no bitmap to say which slots are null.
    /// SAFETY contract: `array` passed `check_node`.
    unsafe fn of(array: &FfiArray, what: &str) -> Result<Validity, ArrowError> {
        let bitmap = buffer(array, 0);
        if bitmap.is_null() && array.null_count > 0 {
            return Err(malformed(format!("{what}: a null count of {} without a validity bitmap", array.null_count)));
        }
        Ok(Validity(bitmap))
    }

    /// SAFETY contract: `i` is within the array's offset + length.
    #[inline]
    unsafe fn valid(self, i: usize) -> bool {
        self.0.is_null() || (*self.0.add(i >> 3) >> (i & 7)) & 1 == 1
    }
}

#[derive(Clone, Copy)]
enum BinData {
    Small(*const i32, *const u8),
    Large(*const i64, *const u8),
    /// (16-byte views, the variadic data buffers).
    View(*const u8, *const *const u8),
}

/// A binary-like array: `get(i)` for the i-th slot of its parent (its own offset added).
#[derive(Clone, Copy)]
struct BinView {
    validity: Validity,
    offset: usize,
    data: BinData,
}

impl BinView {
    /// SAFETY contract: `i` < the array's length; the owning batch is alive for `'a`; the view
    /// was made by `bin_view` (its offsets and views checked against its buffers).
    #[inline]
    unsafe fn get<'a>(self, i: usize) -> Option<&'a [u8]> {
        let i = i + self.offset;
        if !self.validity.valid(i) {
            return None;
        }
        // `wrapping_add`: a data buffer may be dangling when every value is empty (see `bin_view`).
        Some(match self.data {
            BinData::Small(offsets, data) => {
                let (start, end) = (read_at(offsets, i) as usize, read_at(offsets, i + 1) as usize);
                std::slice::from_raw_parts(data.wrapping_add(start), end - start)
            }
            BinData::Large(offsets, data) => {
                let (start, end) = (read_at(offsets, i) as usize, read_at(offsets, i + 1) as usize);
                std::slice::from_raw_parts(data.wrapping_add(start), end - start)
            }
            BinData::View(views, buffers) => {
                let view = views.add(i * 16);
                let len = i32::from_le_bytes(*(view as *const [u8; 4])) as usize;
                if len <= 12 {
                    std::slice::from_raw_parts(view.add(4), len)
                } else {
                    let index = i32::from_le_bytes(*(view.add(8) as *const [u8; 4])) as usize;
                    let start = i32::from_le_bytes(*(view.add(12) as *const [u8; 4])) as usize;
                    std::slice::from_raw_parts((*buffers.add(index)).add(start), len)
                }
            }
        })
    }
}

/// Column-wise SAFETY contract for every view below: built from a valid ArrowArray whose
/// buffers stay alive with the `Batch` holding both.
unsafe fn buffer(array: &FfiArray, i: usize) -> *const u8 {
    *array.buffers.add(i) as *const u8
}

fn malformed(what: String) -> ArrowError {
    ArrowError::Columns(format!("send_arrow: malformed Arrow data: {what}"))
}

/// The slots an array covers, `offset..offset + length`, once `check_node` passed.
fn slots(array: &FfiArray) -> std::ops::Range<usize> {
    array.offset as usize..(array.offset + array.length) as usize
}

/// Checks what any array must hold before a buffer of it is read: a length and an offset of 0 or
/// more, `buffers` buffers and `children` children that are there (non-NULL pointers), no
/// dictionary. `what` names it in the error (a column, or a part of one).
///
/// SAFETY contract: `array` is a struct exported through the C Data Interface (its pointers,
/// where not NULL, point to as many buffers and children as its counts say).
unsafe fn check_node(array: &FfiArray, what: &str, buffers: std::ops::RangeInclusive<i64>, children: i64) -> Result<(), ArrowError> {
    if array.length < 0 || array.offset < 0 || array.offset.checked_add(array.length).is_none() {
        return Err(malformed(format!("{what}: a negative or too large length or offset (length {}, offset {})", array.length, array.offset)));
    }
    if array.n_buffers > 0 && array.buffers.is_null() {
        return Err(malformed(format!("{what}: {} buffers at a NULL pointer", array.n_buffers)));
    }
    if !buffers.contains(&array.n_buffers) {
        let wanted = match (*buffers.start(), *buffers.end()) {
            (least, i64::MAX) => format!("{least} or more"),
            (least, _) => least.to_string(),
        };
        return Err(malformed(format!("{what}: {} buffers where its type has {wanted}", array.n_buffers)));
    }
    if array.n_children != children {
        return Err(malformed(format!("{what}: {} children where its type has {children}", array.n_children)));
    }
    if children > 0 && (array.children.is_null() || (0..children as usize).any(|i| (*array.children.add(i)).is_null())) {
        return Err(malformed(format!("{what}: a NULL child")));
    }
    if !array.dictionary.is_null() {
        return Err(malformed(format!("{what}: a dictionary where the schema has none")));
    }
    Ok(())
}

/// Checks offsets `first..=last` (read by `at`): 0 or more, never decreasing. Returns the first and
/// the last: the range of what they index.
fn check_offsets(what: &str, indices: std::ops::RangeInclusive<usize>, at: impl Fn(usize) -> i64) -> Result<(i64, i64), ArrowError> {
    let first = at(*indices.start());
    if first < 0 {
        return Err(malformed(format!("{what}: a negative offset ({first})")));
    }
    let mut last = first;
    for i in indices {
        let offset = at(i);
        if offset < last {
            return Err(malformed(format!("{what}: offsets that decrease ({last} then {offset})")));
        }
        last = offset;
    }
    Ok((first, last))
}

/// The offsets buffer (buffer 1) of `array`, checked: (pointer, first, last). NULL only when the
/// array has no slot (nothing reads it then).
/// SAFETY contract: `array` passed `check_node` with 2 or more buffers; `T` is its offset type.
unsafe fn offsets<T: Copy + Into<i64>>(array: &FfiArray, what: &str) -> Result<(*const T, i64, i64), ArrowError> {
    let offsets = buffer(array, 1) as *const T;
    let slots = slots(array);
    if slots.is_empty() {
        return Ok((offsets, 0, 0));
    }
    if offsets.is_null() {
        return Err(malformed(format!("{what}: a NULL offsets buffer")));
    }
    let (first, last) = check_offsets(what, slots.start..=slots.end, |i| read_at(offsets, i).into())?;
    Ok((offsets, first, last))
}

/// A binary column's view, its offsets or views checked against its buffers (`check_views`).
/// SAFETY contract: `array` is valid and matches `kind` (checked against the schema).
unsafe fn bin_view(array: &FfiArray, kind: BinKind, what: &str) -> Result<BinView, ArrowError> {
    let buffers = if kind == BinKind::View { 3..=i64::MAX } else { 3..=3 };
    check_node(array, what, buffers, 0)?;
    let validity = Validity::of(array, what)?;
    let data_of = |first: i64, last: i64| {
        let data = buffer(array, 2);
        match (data.is_null(), first == last) {
            (false, _) => Ok(data),
            (true, true) => Ok(ptr::NonNull::<u8>::dangling().as_ptr() as *const u8), // every value empty: no byte is read
            (true, false) => Err(malformed(format!("{what}: a NULL data buffer for {} bytes", last - first))),
        }
    };
    let data = match kind {
        BinKind::Small => {
            let (offsets, first, last) = offsets::<i32>(array, what)?;
            BinData::Small(offsets, data_of(first, last)?)
        }
        BinKind::Large => {
            let (offsets, first, last) = offsets::<i64>(array, what)?;
            BinData::Large(offsets, data_of(first, last)?)
        }
        BinKind::View => BinData::View(buffer(array, 1), array.buffers.add(2) as *const *const u8),
    };
    let view = BinView { validity, offset: array.offset as usize, data };
    if kind == BinKind::View {
        check_views(array, &view, what)?;
    }
    Ok(view)
}

/// Refuses a view array whose views would read outside its buffers: checked once per column at
/// import, so `BinView::get` reads without checks (about 1 ns a slot here). A view that is not
/// inline must name one of the variadic buffers and lie within the size the exporter gave for it
/// (the last buffer of a view array: their int64 sizes). Null slots are not read, so not checked.
///
/// SAFETY contract: as `bin_view`'s, with `view` made from `array`.
unsafe fn check_views(array: &FfiArray, view: &BinView, what: &str) -> Result<(), ArrowError> {
    let BinData::View(views, buffers) = view.data else { return Ok(()) };
    let slots = slots(array);
    if slots.is_empty() {
        return Ok(());
    }
    let variadic = array.n_buffers as usize - 3;
    let size_buffer = buffer(array, array.n_buffers as usize - 1) as *const i64;
    if views.is_null() || (variadic > 0 && size_buffer.is_null()) {
        return Err(malformed(format!("{what}: a NULL views or sizes buffer")));
    }
    let sizes: Vec<i64> = (0..variadic).map(|k| read_at(size_buffer, k)).collect();
    if let Some(k) = (0..variadic).find(|&k| sizes[k] < 0 || (sizes[k] > 0 && (*buffers.add(k)).is_null())) {
        return Err(malformed(format!("{what}: data buffer {k} is NULL or of size {}", sizes[k])));
    }
    for i in slots {
        if !view.validity.valid(i) {
            continue;
        }
        let slot = views.add(i * 16);
        let len = i32::from_le_bytes(*(slot as *const [u8; 4]));
        if len < 0 {
            return Err(malformed(format!("{what}: a view of negative length")));
        }
        if len <= 12 {
            continue;
        }
        let index = i32::from_le_bytes(*(slot.add(8) as *const [u8; 4]));
        let start = i32::from_le_bytes(*(slot.add(12) as *const [u8; 4]));
        let within =
            usize::try_from(index).ok().filter(|index| *index < variadic).is_some_and(|index| start >= 0 && i64::from(start) + i64::from(len) <= sizes[index]);
        if !within {
            return Err(malformed(format!("{what}: a view outside its data buffers")));
        }
    }
    Ok(())
}

#[derive(Clone, Copy)]
struct IntView {
    validity: Validity,
    offset: usize,
    width: usize,
    data: *const u8,
}

impl IntView {
    /// SAFETY contract: as `BinView::get`.
    #[inline]
    unsafe fn get(self, i: usize) -> Option<i64> {
        let i = i + self.offset;
        if !self.validity.valid(i) {
            return None;
        }
        let p = self.data.add(i * self.width);
        Some(match self.width {
            1 => *(p as *const i8) as i64,
            2 => read_at(p as *const i16, 0) as i64,
            4 => read_at(p as *const i32, 0) as i64,
            _ => read_at(p as *const i64, 0),
        })
    }
}

/// SAFETY contract: `array` is valid, of a fixed-width type `width` bytes wide.
unsafe fn int_view(array: &FfiArray, width: usize, what: &str) -> Result<IntView, ArrowError> {
    check_node(array, what, 2..=2, 0)?;
    let data = buffer(array, 1);
    if data.is_null() && !slots(array).is_empty() {
        return Err(malformed(format!("{what}: a NULL data buffer")));
    }
    Ok(IntView { validity: Validity::of(array, what)?, offset: array.offset as usize, width, data })
}

#[derive(Clone, Copy)]
struct HeadersView {
    validity: Validity,
    offset: usize,
    /// List offsets: i32 or i64.
    offsets: *const u8,
    large: bool,
    entries: Validity,
    entries_offset: usize,
    key: BinView,
    value: BinView,
}

impl HeadersView {
    /// The row's header entries as struct positions (empty for a null list).
    /// SAFETY contract: as `BinView::get`.
    #[inline]
    unsafe fn range(self, i: usize) -> std::ops::Range<usize> {
        let i = i + self.offset;
        if !self.validity.valid(i) {
            return 0..0;
        }
        if self.large {
            let o = self.offsets as *const i64;
            read_at(o, i) as usize..read_at(o, i + 1) as usize
        } else {
            let o = self.offsets as *const i32;
            read_at(o, i) as usize..read_at(o, i + 1) as usize
        }
    }

    /// Entry `j` (a struct position): Err(()) for a null entry or a null key.
    /// SAFETY contract: `j` comes from `range`.
    #[inline]
    unsafe fn entry<'a>(self, j: usize) -> Result<(&'a [u8], Option<&'a [u8]>), ()> {
        let j = j + self.entries_offset;
        if !self.entries.valid(j) {
            return Err(());
        }
        let key = self.key.get(j).ok_or(())?;
        Ok((key, self.value.get(j)))
    }
}

/// The headers column: a list whose offsets must index its struct's entries (no further than the
/// struct's length, never decreasing), a struct whose key and value fields cover its entries.
/// SAFETY contract: `array` is a valid list array of the checked header layout.
unsafe fn headers_view(array: &FfiArray, large: bool, key: BinKind, value: BinKind) -> Result<HeadersView, ArrowError> {
    let what = "column \"headers\"";
    check_node(array, what, 2..=2, 1)?;
    let entries = &**array.children;
    let entries_what = "column \"headers\": its struct";
    check_node(entries, entries_what, 1..=1, 2)?;
    let (keys, values) = (&**entries.children, &**entries.children.add(1));
    let count = entries.length;
    let last = if large { offsets::<i64>(array, what)?.2 } else { offsets::<i32>(array, what)?.2 };
    if last > count {
        return Err(malformed(format!("{what}: list offsets past the {count} entries of its struct (up to {last})")));
    }
    for (field, name) in [(keys, "key"), (values, "value")] {
        if field.length < entries.offset + count {
            return Err(malformed(format!("{what}: its {name} field is shorter ({}) than its struct ({count})", field.length)));
        }
    }
    Ok(HeadersView {
        validity: Validity::of(array, what)?,
        offset: array.offset as usize,
        offsets: buffer(array, 1),
        large,
        entries: Validity::of(entries, entries_what)?,
        entries_offset: entries.offset as usize,
        key: bin_view(keys, key, "column \"headers\": its key field")?,
        value: bin_view(values, value, "column \"headers\": its value field")?,
    })
}

/// One imported record batch and its column views (raw pointers into `_array`'s buffers).
struct Batch {
    rows: usize,
    /// The struct array's own offset: row `r` is slot `offset + r` of each column.
    offset: usize,
    value: BinView,
    key: Option<BinView>,
    partition: Option<IntView>,
    /// (view, multiply, divide) to milliseconds.
    timestamp: Option<(IntView, i64, i64)>,
    headers: Option<HeadersView>,
    /// Declared last: dropped (released) after the views, which nothing reads by then anyway.
    _array: OwnedArray,
}

impl Batch {
    /// Every column's buffers checked (see the section's comment), then its views.
    /// SAFETY contract: `array` was exported with a schema that `check_schema` turned into `columns`.
    unsafe fn new(array: OwnedArray, columns: &[Column]) -> Result<Batch, ArrowError> {
        let a = &*array.0;
        check_node(a, "the record batch", 0..=i64::MAX, columns.len() as i64)?;
        let mut value = None;
        let (mut key, mut partition, mut timestamp, mut headers) = (None, None, None, None);
        for (i, column) in columns.iter().enumerate() {
            let child = &**a.children.add(i);
            let what = format!("column {:?}", column.name());
            if child.length < a.offset + a.length {
                return Err(malformed(format!("{what}: shorter ({}) than its record batch ({})", child.length, a.offset + a.length)));
            }
            match *column {
                Column::Value(kind) => value = Some(bin_view(child, kind, &what)?),
                Column::Key(kind) => key = Some(bin_view(child, kind, &what)?),
                Column::Partition(width) => partition = Some(int_view(child, width, &what)?),
                Column::Timestamp(mul, div) => timestamp = Some((int_view(child, 8, &what)?, mul, div)),
                Column::Headers(large, k, v) => headers = Some(headers_view(child, large, k, v)?),
            }
        }
        Ok(Batch {
            rows: a.length as usize,
            offset: a.offset as usize,
            value: value.ok_or_else(|| malformed("no value column".into()))?,
            key,
            partition,
            timestamp,
            headers,
            _array: array,
        })
    }
}

// ------------------------------------------------------------------ the rows, planned and appended

/// Rows in Arrow memory: what `plan` and `append_rows` read. Pure Rust (tests link it).
struct Rows {
    batches: Vec<Batch>,
    /// Global index of each batch's first row.
    starts: Vec<usize>,
    total: usize,
    ignore_keys: bool,
    /// Create time of rows with a null (or no) timestamp: the call's time.
    now_ms: i64,
    /// Row positions grouped by partition: (batch << 32) | row.
    order: Vec<u64>,
}

// SAFETY: `Rows` holds raw pointers into Arrow buffers that its batches own (moved in from the
// producer, released only when the batch drops) and never writes through them: the data is
// immutable, as the C Data Interface asks of both sides. Every access goes through the
// `ArrowRecords` pyclass, whose borrow flag (under the interpreter lock) rules out two at once.
// Sending it to another thread can only mean that Python frees the object there, with the
// interpreter lock held, which is how every PyCapsule of the interface is released too: the
// producer's `release` callback must already work there. Without these, pyo3 refused to drop
// the rows on a thread other than the one that made them, and leaked the Arrow data.
unsafe impl Send for Rows {}
unsafe impl Sync for Rows {}

/// A row's record, borrowed from Arrow memory.
struct Row<'a> {
    key: Option<&'a [u8]>,
    value: Option<&'a [u8]>,
    partition: Option<i64>,
    timestamp: Result<i64, String>,
}

impl Rows {
    fn global(&self, packed: u64) -> usize {
        self.starts[(packed >> 32) as usize] + (packed & 0xffff_ffff) as usize
    }

    /// Row `r` of batch `b`, its headers into `headers` (cleared first).
    /// Err: a null header entry or header key (the message names the row).
    fn row<'a>(&'a self, b: usize, r: usize, headers: &mut Vec<(&'a [u8], Option<&'a [u8]>)>) -> Result<Row<'a>, String> {
        let batch = &self.batches[b];
        let i = batch.offset + r;
        headers.clear();
        // SAFETY: r < batch.rows and every column was checked to cover offset + length rows;
        // the batch (and its buffers) lives as long as `self`.
        unsafe {
            if let Some(h) = batch.headers {
                for j in h.range(i) {
                    let entry = h.entry(j).map_err(|_| format!("row {} has a null header or header key", self.starts[b] + r))?;
                    headers.push(entry);
                }
            }
            let timestamp = match batch.timestamp.and_then(|(v, mul, div)| v.get(i).map(|t| (t, mul, div))) {
                None => Ok(self.now_ms),
                Some((t, mul, div)) => match t.checked_mul(mul).map(|t| t.div_euclid(div)) {
                    Some(ms) if ms >= 0 => Ok(ms),
                    // send()'s words for the same refusal (Kafka has no timestamps before 1970).
                    Some(ms) => Err(format!("row {}: invalid timestamp_ms {ms}: it must be an integer in 0..2**63-1 (ms since the epoch)", self.starts[b] + r)),
                    None => Err(format!("row {}: timestamp {t} does not fit int64 milliseconds", self.starts[b] + r)),
                },
            };
            Ok(Row { key: batch.key.and_then(|k| k.get(i)), value: batch.value.get(i), partition: batch.partition.and_then(|p| p.get(i)), timestamp })
        }
    }

    /// Checks every row, then groups them by partition, chunk by chunk of `PLAN_CHUNK` rows:
    /// `(partition or -1 for the sticky partition, start, stop)` over `order`, in row order of
    /// the chunks, keyed groups in partition order then the keyless one within a chunk. So each
    /// partition's rows keep their order, and appending a group reads rows from one chunk's
    /// memory: grouping the whole data at once made each partition's pass touch every cache
    /// line of it (see `PLAN_CHUNK`; one partition: 40 ns a row). Nothing is appended, so an
    /// error queues nothing.
    fn plan(&mut self, num_partitions: u32, max_record_size: usize, topic: &str) -> Result<Vec<(i64, usize, usize)>, ArrowError> {
        let n = num_partitions as usize;
        let mut buckets: Vec<Vec<u64>> = vec![Vec::new(); n + 1]; // n: keyless
        let mut order = Vec::with_capacity(self.total);
        let mut groups = Vec::new();
        let mut headers = Vec::new();
        for b in 0..self.batches.len() {
            let rows = self.batches[b].rows;
            for chunk in (0..rows).step_by(PLAN_CHUNK) {
                for r in chunk..rows.min(chunk + PLAN_CHUNK) {
                    let bucket = self.check_row(b, r, num_partitions, max_record_size, topic, &mut headers)?;
                    buckets[bucket as usize].push(((b as u64) << 32) | r as u64);
                }
                for (bucket, rows) in buckets.iter_mut().enumerate() {
                    if !rows.is_empty() {
                        groups.push((if bucket == n { -1 } else { bucket as i64 }, order.len(), order.len() + rows.len()));
                        order.append(rows);
                    }
                }
            }
        }
        self.order = order;
        Ok(groups)
    }

    /// Checks row `r` of batch `b` as `plan` does: its partition bucket (`num_partitions` for keyless).
    fn check_row<'a>(
        &'a self,
        b: usize,
        r: usize,
        num_partitions: u32,
        max_record_size: usize,
        topic: &str,
        headers: &mut Vec<(&'a [u8], Option<&'a [u8]>)>,
    ) -> Result<u32, ArrowError> {
        let row = self.row(b, r, headers).map_err(ArrowError::Row)?;
        let global = self.starts[b] + r;
        row.timestamp.clone().map_err(ArrowError::Row)?;
        let size = upper_bound(row.key, row.value, headers);
        if size > max_record_size {
            return Err(ArrowError::TooLarge(format!(
                "row {global} is {size} bytes when serialized, larger than the largest record allowed ({max_record_size}: max.request.size or buffer.memory)"
            )));
        }
        Ok(match (row.partition, row.key) {
            (Some(p), _) if p < 0 || p >= num_partitions as i64 => {
                return Err(ArrowError::Row(format!("row {global} has partition {p}; topic {topic:?} has partitions 0..{}", num_partitions as i64 - 1)))
            }
            (Some(p), _) => p as u32,
            (None, Some(key)) if !self.ignore_keys => partition_for_key(key, num_partitions),
            _ => num_partitions,
        })
    }

    /// Appends the rows at `order[start..stop]` while `append` takes them (returns >= 0):
    /// how many it took. Rows were checked by `plan`.
    fn append_rows(&self, start: usize, stop: usize, mut append: impl FnMut(i64, Option<&[u8]>, Option<&[u8]>, &[(&[u8], Option<&[u8]>)]) -> i64) -> usize {
        let mut headers = Vec::new();
        for pos in start..stop {
            let packed = self.order[pos];
            let Ok(row) = self.row((packed >> 32) as usize, (packed & 0xffff_ffff) as usize, &mut headers) else {
                return pos - start; // unreachable: plan checked every row
            };
            if append(row.timestamp.unwrap_or(self.now_ms), row.key, row.value, &headers) < 0 {
                return pos - start;
            }
        }
        stop - start
    }

    /// Keys and values bytes of `order[start..stop]` (the sticky partitioner's count).
    fn payload_bytes(&self, start: usize, stop: usize) -> usize {
        let mut headers = Vec::new();
        self.order[start..stop]
            .iter()
            .filter_map(|&p| self.row((p >> 32) as usize, (p & 0xffff_ffff) as usize, &mut headers).ok())
            .map(|row| row.key.map_or(0, <[u8]>::len) + row.value.map_or(0, <[u8]>::len))
            .sum()
    }
}

// ------------------------------------------------------------------ Python

/// `send_arrow`'s rows: imported and checked at construction, planned, then appended batch by
/// batch through the accumulator; released (`release_data`) once queued. See the module docs.
///
/// Used on the event loop's thread, as every batch builder is; freed on whatever thread Python
/// frees it (see `Rows`' `Send`), its Arrow data released there.
#[pyclass(name = "ArrowRecords", module = "aioproducer._native")]
pub struct ArrowRecords {
    rows: Rows,
    /// Per-row outcome when asked for: the record's offset, -1 failed or unknown, -2 pending
    /// (or never queued, if the call failed part-way: reported as -1).
    offsets: Option<Vec<i64>>,
    /// Planned rows appended to batches so far (`append_rows`).
    appended: usize,
    /// A panic in `append_rows` after rows of its run went in, raised by the next call.
    deferred: Option<PyErr>,
}

/// Imports `data` (`__arrow_c_stream__`, else `__arrow_c_array__`): its checked columns and batches.
fn import(data: &Bound<'_, PyAny>) -> PyResult<(Vec<Column>, Vec<Batch>)> {
    let py = data.py();
    if data.hasattr("__arrow_c_stream__")? {
        let capsule = data.call_method0("__arrow_c_stream__")?;
        let stream = OwnedStream(take_from_capsule(
            &capsule,
            c"arrow_array_stream",
            FfiStream { get_schema: None, get_next: None, get_last_error: None, release: None, private_data: ptr::null_mut() },
        )?);
        return read_stream(py, stream);
    }
    if data.hasattr("__arrow_c_array__")? {
        let pair = data.call_method0("__arrow_c_array__")?;
        let pair = pair.cast::<PyTuple>().map_err(|_| PyTypeError::new_err("send_arrow: __arrow_c_array__ did not return a pair"))?;
        let schema = OwnedSchema(take_from_capsule(&pair.get_item(0)?, c"arrow_schema", FfiSchema::empty())?);
        let array = OwnedArray(take_from_capsule(&pair.get_item(1)?, c"arrow_array", FfiArray::empty())?);
        let columns = check_schema(&schema.0).map_err(|e| e.to_py(py))?;
        // SAFETY: the array was exported with this schema.
        let batch = unsafe { Batch::new(array, &columns) }.map_err(|e| e.to_py(py))?;
        return Ok((columns, vec![batch]));
    }
    Err(PyTypeError::new_err(format!(
        "send_arrow: data must be Arrow data (a pyarrow Table or RecordBatch, a polars DataFrame, any object with \
         __arrow_c_stream__ or __arrow_c_array__), not {}",
        data.get_type().name()?
    )))
}

fn stream_error(stream: &mut FfiStream, code: c_int) -> PyErr {
    let message = match stream.get_last_error {
        // SAFETY: the stream is valid and unreleased; the message lives until its next call.
        Some(f) => unsafe {
            let p = f(stream);
            if p.is_null() {
                String::new()
            } else {
                CStr::from_ptr(p).to_string_lossy().into_owned()
            }
        },
        None => String::new(),
    };
    PyValueError::new_err(format!("send_arrow: reading the Arrow stream failed (error {code}): {message}"))
}

fn read_stream(py: Python<'_>, mut stream: OwnedStream) -> PyResult<(Vec<Column>, Vec<Batch>)> {
    let s = &mut *stream.0;
    let (Some(get_schema), Some(get_next)) = (s.get_schema, s.get_next) else {
        return Err(PyValueError::new_err("send_arrow: the Arrow stream is released or incomplete"));
    };
    let mut schema = OwnedSchema(Box::new(FfiSchema::empty()));
    // SAFETY: a valid stream, and an empty schema struct for it to fill.
    let code = unsafe { get_schema(s, &mut *schema.0) };
    if code != 0 {
        return Err(stream_error(s, code));
    }
    let columns = check_schema(&schema.0).map_err(|e| e.to_py(py))?;
    let mut batches = Vec::new();
    loop {
        let mut array = OwnedArray(Box::new(FfiArray::empty()));
        // SAFETY: as above; a released (NULL release) result marks the end of the stream.
        let code = unsafe { get_next(s, &mut *array.0) };
        if code != 0 {
            return Err(stream_error(s, code));
        }
        if array.0.release.is_none() {
            break;
        }
        // SAFETY: the stream's arrays follow its schema.
        batches.push(unsafe { Batch::new(array, &columns) }.map_err(|e| e.to_py(py))?);
    }
    Ok((columns, batches))
}

#[pymethods]
impl ArrowRecords {
    /// Import and check `data`'s schema and buffers (TypeError/ValueError naming the column); nothing is queued.
    #[new]
    #[pyo3(signature = (data, *, ignore_keys = false, now_ms = 0, row_outcomes = false))]
    fn new(data: &Bound<'_, PyAny>, ignore_keys: bool, now_ms: i64, row_outcomes: bool) -> PyResult<Self> {
        guarded("ArrowRecords.__new__", || {
            let (_, batches) = import(data)?;
            let mut starts = Vec::with_capacity(batches.len());
            let mut total = 0usize;
            for batch in &batches {
                starts.push(total);
                total += batch.rows;
            }
            if batches.len() > u32::MAX as usize || batches.iter().any(|b| b.rows > u32::MAX as usize) {
                return Err(PyValueError::new_err("send_arrow: more than 2**32 rows in one record batch"));
            }
            Ok(ArrowRecords {
                rows: Rows { batches, starts, total, ignore_keys, now_ms, order: Vec::new() },
                offsets: row_outcomes.then(|| vec![-2; total]),
                appended: 0,
                deferred: None,
            })
        })
    }

    /// Rows in all.
    fn __len__(&self) -> PyResult<usize> {
        guarded("ArrowRecords.__len__", || Ok(self.rows.total))
    }

    /// Check every row and group them by partition: `[(partition or -1, start, stop)]` over
    /// the planned order, chunk by chunk (`Rows::plan`): a partition's groups in row order.
    /// InvalidRecordError / RecordTooLargeError naming the row; nothing is queued then.
    fn plan(&mut self, py: Python<'_>, num_partitions: u32, max_record_size: usize, topic: &str) -> PyResult<Vec<(i64, usize, usize)>> {
        guarded("ArrowRecords.plan", || self.rows.plan(num_partitions, max_record_size, topic).map_err(|e| e.to_py(py)))
    }

    /// Append the planned rows `start..stop` to `builder` while it has room: how many went in
    /// (0: full, closed, or being compressed). Rows go in in planned order, so `appended` is the
    /// count of rows queued, and rows `order[..appended]` are they.
    ///
    /// A panic (a bug) after some rows of the run went in returns those rows, so that the batch
    /// reports them as it reports any run, and is raised by the next call (`append_rows` or
    /// `reservation`: the accumulator makes one, the run being short): every row in a batch is
    /// counted in `appended`, and a failed call hands back a delivery of exactly those rows.
    fn append_rows(&mut self, builder: &Bound<'_, PyRecordBatchBuilder>, start: usize, stop: usize) -> PyResult<usize> {
        guarded("ArrowRecords.append_rows", || {
            self.raise_deferred()?;
            let mut builder = builder.try_borrow_mut()?;
            let mut count = 0;
            let panic_after = test_panic_after_rows("ArrowRecords.append_rows");
            let run = catch_unwind(AssertUnwindSafe(|| self.append_run(&mut builder, start, stop, &mut count, panic_after)));
            self.appended += count;
            match run {
                Ok(_) => Ok(count),
                Err(payload) if count == 0 => Err(bug("ArrowRecords.append_rows", payload.as_ref())),
                Err(payload) => {
                    self.deferred = Some(bug("ArrowRecords.append_rows", payload.as_ref()));
                    Ok(count)
                }
            }
        })
    }

    /// Planned rows appended so far (positions `0..appended`): what a call that failed part-way queued.
    #[getter]
    fn appended(&self) -> PyResult<usize> {
        guarded("ArrowRecords.appended", || Ok(self.appended))
    }

    /// Keys' and values' bytes of the planned rows `start..stop` (the sticky partitioner's count).
    fn payload_bytes(&self, start: usize, stop: usize) -> PyResult<usize> {
        guarded("ArrowRecords.payload_bytes", || Ok(self.rows.payload_bytes(start, stop)))
    }

    /// What a new batch for the planned row at `pos` reserves: `batch_size`, or its upper bound if larger.
    fn reservation(&mut self, pos: usize, batch_size: usize) -> PyResult<usize> {
        guarded("ArrowRecords.reservation", || {
            self.raise_deferred()?;
            let mut headers = Vec::new();
            let packed = self.rows.order[pos];
            Ok(match self.rows.row((packed >> 32) as usize, (packed & 0xffff_ffff) as usize, &mut headers) {
                Ok(row) => upper_bound(row.key, row.value, &headers).max(batch_size),
                Err(_) => batch_size,
            })
        })
    }

    /// The row index (in the data as given) of the planned position `pos`.
    fn row_index(&self, pos: usize) -> PyResult<usize> {
        guarded("ArrowRecords.row_index", || Ok(self.rows.global(self.rows.order[pos])))
    }

    /// Release the Arrow data (every batch's release callback, once): the rows are queued.
    fn release_data(&mut self) -> PyResult<()> {
        guarded("ArrowRecords.release_data", || {
            self.rows.batches.clear();
            Ok(())
        })
    }

    /// Record the outcome of the planned rows `start..start + count`: offsets from `base_offset`
    /// (-1: unknown or failed). A no-op unless per-row outcomes were asked for.
    fn set_offsets(&mut self, start: usize, count: usize, base_offset: i64) -> PyResult<()> {
        guarded("ArrowRecords.set_offsets", || {
            if let Some(offsets) = self.offsets.as_mut() {
                for k in 0..count {
                    let row = self.rows.global(self.rows.order[start + k]);
                    offsets[row] = if base_offset >= 0 { base_offset + k as i64 } else { -1 };
                }
            }
            Ok(())
        })
    }

    /// Per-row offsets (native-endian int64, one per row; -1 failed, unknown or never queued), or None.
    fn offsets<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyBytes>>> {
        guarded("ArrowRecords.offsets", || {
            Ok(self.offsets.as_ref().map(|o| {
                let bytes: Vec<u8> = o.iter().flat_map(|v| v.max(&-1).to_ne_bytes()).collect();
                PyBytes::new(py, &bytes)
            }))
        })
    }
}

impl ArrowRecords {
    /// `append_rows`' run, counting in `count` the rows that went in as they go in; with
    /// `panic_after` (tests only: `_panic_for_test`), a panic once that many went in.
    fn append_run(&self, builder: &mut PyRecordBatchBuilder, start: usize, stop: usize, count: &mut usize, panic_after: Option<usize>) -> usize {
        fn counted(builder: &mut PyRecordBatchBuilder, count: &mut usize, ts: i64, key: Option<&[u8]>, value: Option<&[u8]>, headers: &[Header<'_>]) -> i64 {
            let delta = builder.append_record(ts, key, value, headers);
            *count += usize::from(delta >= 0);
            delta
        }
        match panic_after {
            None => self.rows.append_rows(start, stop, |ts, key, value, headers| counted(builder, count, ts, key, value, headers)),
            Some(after) => self.rows.append_rows(start, stop, |ts, key, value, headers| {
                assert!(*count != after, "a deliberate panic in ArrowRecords.append_rows after {after} rows, armed by _panic_for_test");
                counted(builder, count, ts, key, value, headers)
            }),
        }
    }

    /// Raises the panic `append_rows` deferred, once.
    fn raise_deferred(&mut self) -> PyResult<()> {
        self.deferred.take().map_or(Ok(()), Err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view_of(values: &[&[u8]]) -> (Vec<u8>, Vec<u8>) {
        let mut views = Vec::new();
        let mut data = Vec::new();
        for v in values {
            views.extend_from_slice(&(v.len() as i32).to_le_bytes());
            if v.len() <= 12 {
                let mut inline = [0u8; 12];
                inline[..v.len()].copy_from_slice(v);
                views.extend_from_slice(&inline);
            } else {
                views.extend_from_slice(&v[..4]);
                views.extend_from_slice(&0i32.to_le_bytes());
                views.extend_from_slice(&(data.len() as i32).to_le_bytes());
                data.extend_from_slice(v);
            }
        }
        (views, data)
    }

    #[test]
    fn views_inline_and_out_of_line() {
        let values: [&[u8]; 3] = [b"short", b"a value longer than twelve", b""];
        let (views, data) = view_of(&values);
        let buffers = [data.as_ptr()];
        let bitmap = [0b101u8]; // slot 1 null
        let view = BinView { validity: Validity(bitmap.as_ptr()), offset: 0, data: BinData::View(views.as_ptr(), buffers.as_ptr()) };
        // SAFETY: the buffers above outlive the view, and every index is within its 3 slots.
        unsafe {
            assert_eq!(view.get(0), Some(&b"short"[..]));
            assert_eq!(view.get(1), None);
            assert_eq!(view.get(2), Some(&b""[..]));
        }
        let all = BinView { validity: Validity(ptr::null()), offset: 1, data: BinData::View(views.as_ptr(), buffers.as_ptr()) };
        // SAFETY: as above; offset 1 reads slot 1.
        unsafe { assert_eq!(all.get(0), Some(&b"a value longer than twelve"[..])) };
    }

    #[test]
    fn offsets_with_array_offset() {
        let offsets = [0i32, 1, 3, 6];
        let data = b"abbccc";
        let view = BinView { validity: Validity(ptr::null()), offset: 1, data: BinData::Small(offsets.as_ptr(), data.as_ptr()) };
        // SAFETY: indices within the 3 slots after the offset of 1.
        unsafe {
            assert_eq!(view.get(0), Some(&b"bb"[..]));
            assert_eq!(view.get(1), Some(&b"ccc"[..]));
        }
    }

    #[test]
    fn upper_bound_matches_the_python_formula() {
        // 61 + 21 + key (1 + 3) + value (null: 1) + 1 header count + header (1 + 1, 1 + 2).
        assert_eq!(upper_bound(Some(b"abc"), None, &[(b"h", Some(b"vv"))]), 61 + 21 + 4 + 1 + 1 + 2 + 3);
    }

    #[test]
    fn unknown_and_dictionary_columns_are_named() {
        let n = Node { format: "u", name: "topic", children: vec![], dictionary: false };
        assert!(matches!(check_column(&n), Err(ArrowError::Columns(m)) if m.contains("\"topic\"")));
        let n = Node { format: "i", name: "key", children: vec![], dictionary: true };
        assert!(matches!(check_column(&n), Err(ArrowError::Type(m)) if m.contains("dictionary")));
        let n = Node { format: "g", name: "partition", children: vec![], dictionary: false };
        assert!(matches!(check_column(&n), Err(ArrowError::Type(m)) if m.contains("float64")));
    }
}
