//! Column views: a binary, integer or headers column's slots read through raw pointers into
//! the Arrow buffers, each checked once against its buffers when it is made.
//!
//! Every buffer a row will read is checked once per column when a batch is imported (`Batch::new`):
//! each array's counts, lengths and offsets, each offset against what it indexes, each view against
//! its buffer's size. The per-row readers (`BinView::get`, `IntView::get`, `HeadersView::range`)
//! then read without checks. What no consumer can check is what the interface does not carry: the
//! size of a buffer. A buffer must hold what its array's length (and, for binary data, its last
//! offset) says, as the C Data Interface asks of every producer.

use std::ptr;

use super::ffi::FfiArray;
use super::schema::BinKind;
use super::ArrowError;

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
pub(super) struct BinView {
    validity: Validity,
    offset: usize,
    data: BinData,
}

impl BinView {
    /// SAFETY contract: `i` < the array's length; the owning batch is alive for `'a`; the view
    /// was made by `bin_view` (its offsets and views checked against its buffers).
    #[inline]
    pub(super) unsafe fn get<'a>(self, i: usize) -> Option<&'a [u8]> {
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

pub(super) fn malformed(what: String) -> ArrowError {
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
pub(super) unsafe fn check_node(array: &FfiArray, what: &str, buffers: std::ops::RangeInclusive<i64>, children: i64) -> Result<(), ArrowError> {
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
pub(super) unsafe fn bin_view(array: &FfiArray, kind: BinKind, what: &str) -> Result<BinView, ArrowError> {
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
pub(super) struct IntView {
    validity: Validity,
    offset: usize,
    width: usize,
    data: *const u8,
}

impl IntView {
    /// SAFETY contract: as `BinView::get`.
    #[inline]
    pub(super) unsafe fn get(self, i: usize) -> Option<i64> {
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
pub(super) unsafe fn int_view(array: &FfiArray, width: usize, what: &str) -> Result<IntView, ArrowError> {
    check_node(array, what, 2..=2, 0)?;
    let data = buffer(array, 1);
    if data.is_null() && !slots(array).is_empty() {
        return Err(malformed(format!("{what}: a NULL data buffer")));
    }
    Ok(IntView { validity: Validity::of(array, what)?, offset: array.offset as usize, width, data })
}

#[derive(Clone, Copy)]
pub(super) struct HeadersView {
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
    pub(super) unsafe fn range(self, i: usize) -> std::ops::Range<usize> {
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
    pub(super) unsafe fn entry<'a>(self, j: usize) -> Result<(&'a [u8], Option<&'a [u8]>), ()> {
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
pub(super) unsafe fn headers_view(array: &FfiArray, large: bool, key: BinKind, value: BinKind) -> Result<HeadersView, ArrowError> {
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
}
