//! The schema's check: which sink column each child of a record batch's schema is, refused with
//! the column's name when the sink cannot take it. Nothing here reads data.

use std::ffi::{c_char, CStr};

use super::ffi::FfiSchema;
use super::ArrowError;

/// Layout of a binary-like column (value, key, header key or value).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum BinKind {
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
pub(super) enum Column {
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
    pub(super) fn name(self) -> &'static str {
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
pub(super) fn check_schema(schema: &FfiSchema) -> Result<Vec<Column>, ArrowError> {
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

#[cfg(test)]
mod tests {
    use super::*;

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
