//! Records a fingerprint of the crate's sources in the module (`_native.SOURCE_HASH`), so a test
//! can tell that the extension in use was built from the sources in the tree: with an editable
//! install, a Rust edit takes effect only after `pip install -e .` runs cargo again.

use std::fs;
use std::path::{Path, PathBuf};

/// 64-bit FNV-1a: no dependency, and the Python side (tests/unit/test_native_build.py) computes
/// the same in three lines.
fn fnv1a(hash: u64, data: &[u8]) -> u64 {
    data.iter().fold(hash, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3))
}

/// Every `.rs` file under `dir`, subdirectories included (a module directory such as `src/arrow/`).
fn rust_files(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).expect("readable source directory") {
        let path = entry.expect("source directory entry").path();
        if path.is_dir() {
            rust_files(&path, found);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            found.push(path);
        }
    }
}

/// Each source's path relative to `src/`, `/`-separated (`arrow/mod.rs`), sorted by it: the
/// order and the names the Python side computes too, on any platform, whatever the file system's
/// listing order. A flat `src/` hashes as it did when only its file names were hashed.
fn sources() -> Vec<(String, PathBuf)> {
    let mut files = Vec::new();
    rust_files(Path::new("src"), &mut files);
    let mut named: Vec<(String, PathBuf)> = files
        .into_iter()
        .map(|path| {
            let relative = path.strip_prefix("src").expect("under src");
            let name = relative.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect::<Vec<_>>().join("/");
            (name, path)
        })
        .collect();
    named.sort();
    named.push(("Cargo.toml".to_string(), PathBuf::from("Cargo.toml")));
    named
}

fn main() {
    let mut hash = 0xcbf2_9ce4_8422_2325u64;
    for (name, path) in sources() {
        hash = fnv1a(hash, name.as_bytes());
        hash = fnv1a(hash, &fs::read(&path).expect("readable source"));
        println!("cargo:rerun-if-changed={}", path.display());
    }
    // A directory is scanned whole, subdirectories included: a file added anywhere under src/
    // runs this again (each file above only covers the files that exist now).
    println!("cargo:rerun-if-changed=src");
    println!("cargo:rustc-env=AIOPRODUCER_SOURCE_HASH={hash:016x}");
}
