//! One imported record batch: its columns' views, made from the schema's columns once every
//! buffer a row will read was checked (`view`).

use super::ffi::OwnedArray;
use super::schema::Column;
use super::view::{bin_view, check_node, headers_view, int_view, malformed, BinView, HeadersView, IntView};
use super::ArrowError;

/// One imported record batch and its column views (raw pointers into `_array`'s buffers).
pub(super) struct Batch {
    pub(super) rows: usize,
    /// The struct array's own offset: row `r` is slot `offset + r` of each column.
    pub(super) offset: usize,
    pub(super) value: BinView,
    pub(super) key: Option<BinView>,
    pub(super) partition: Option<IntView>,
    /// (view, multiply, divide) to milliseconds.
    pub(super) timestamp: Option<(IntView, i64, i64)>,
    pub(super) headers: Option<HeadersView>,
    /// Declared last: dropped (released) after the views, which nothing reads by then anyway.
    _array: OwnedArray,
}

impl Batch {
    /// Every column's buffers checked (see `view`'s module docs), then its views.
    /// SAFETY contract: `array` was exported with a schema that `check_schema` turned into `columns`.
    pub(super) unsafe fn new(array: OwnedArray, columns: &[Column]) -> Result<Batch, ArrowError> {
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
