//! Records a fingerprint of the crate's sources in the module (`_native.SOURCE_HASH`), so a test
//! can tell that the extension in use was built from the sources in the tree: with an editable
//! install, a Rust edit takes effect only after `pip install -e .` runs cargo again.

use std::fs;
use std::path::Path;

/// 64-bit FNV-1a: no dependency, and the Python side (tests/unit/test_native_build.py) computes
/// the same in three lines.
fn fnv1a(hash: u64, data: &[u8]) -> u64 {
    data.iter().fold(hash, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3))
}

fn main() {
    let mut files: Vec<_> = fs::read_dir("src")
        .expect("native/src")
        .map(|entry| entry.expect("native/src entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "rs"))
        .collect();
    files.sort();
    files.push(Path::new("Cargo.toml").to_path_buf());
    let mut hash = 0xcbf2_9ce4_8422_2325u64;
    for path in &files {
        let name = path.file_name().expect("file name").to_string_lossy().into_owned();
        hash = fnv1a(hash, name.as_bytes());
        hash = fnv1a(hash, &fs::read(path).expect("readable source"));
        println!("cargo:rerun-if-changed={}", path.display());
    }
    println!("cargo:rerun-if-changed=src");
    println!("cargo:rustc-env=AIOPRODUCER_SOURCE_HASH={hash:016x}");
}
