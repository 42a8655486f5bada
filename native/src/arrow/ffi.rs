//! The Arrow C Data Interface's structs (ArrowSchema, ArrowArray, ArrowArrayStream), from the
//! spec's C declarations, and their owners: each struct moved out of its PyCapsule into a Box
//! whose `Drop` calls the producer's `release` callback exactly once.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::ptr;

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyCapsuleMethods};

#[repr(C)]
pub(super) struct FfiSchema {
    pub(super) format: *const c_char,
    pub(super) name: *const c_char,
    metadata: *const c_char,
    flags: i64,
    pub(super) n_children: i64,
    pub(super) children: *mut *mut FfiSchema,
    pub(super) dictionary: *mut FfiSchema,
    release: Option<unsafe extern "C" fn(*mut FfiSchema)>,
    private_data: *mut c_void,
}

#[repr(C)]
pub(super) struct FfiArray {
    pub(super) length: i64,
    pub(super) null_count: i64,
    pub(super) offset: i64,
    pub(super) n_buffers: i64,
    pub(super) n_children: i64,
    pub(super) buffers: *mut *const c_void,
    pub(super) children: *mut *mut FfiArray,
    pub(super) dictionary: *mut FfiArray,
    pub(super) release: Option<unsafe extern "C" fn(*mut FfiArray)>,
    private_data: *mut c_void,
}

#[repr(C)]
pub(super) struct FfiStream {
    pub(super) get_schema: Option<unsafe extern "C" fn(*mut FfiStream, *mut FfiSchema) -> c_int>,
    pub(super) get_next: Option<unsafe extern "C" fn(*mut FfiStream, *mut FfiArray) -> c_int>,
    pub(super) get_last_error: Option<unsafe extern "C" fn(*mut FfiStream) -> *const c_char>,
    pub(super) release: Option<unsafe extern "C" fn(*mut FfiStream)>,
    pub(super) private_data: *mut c_void,
}

impl FfiSchema {
    pub(super) fn empty() -> Self {
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
    pub(super) fn empty() -> Self {
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
pub(super) struct OwnedSchema(pub(super) Box<FfiSchema>);

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
pub(super) struct OwnedArray(pub(super) Box<FfiArray>);

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
pub(super) struct OwnedStream(pub(super) Box<FfiStream>);

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
pub(super) fn take_from_capsule<T>(capsule: &Bound<'_, PyAny>, name: &CStr, empty: T) -> PyResult<Box<T>> {
    let capsule = capsule.cast::<PyCapsule>().map_err(|_| PyTypeError::new_err(format!("send_arrow: expected a PyCapsule named {name:?}")))?;
    let pointer = capsule.pointer_checked(Some(name))?.cast::<T>();
    let mut owned = Box::new(empty);
    // SAFETY: the capsule's name says it holds a `T` (an Arrow C struct), valid and ours to move
    // while we hold the GIL and run no Python code; swapping leaves it an empty, released struct.
    unsafe { ptr::swap(pointer.as_ptr(), &mut *owned) };
    Ok(owned)
}
