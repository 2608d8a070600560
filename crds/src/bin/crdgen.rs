//! Writes the CRD manifests generated from the Rust types.
//!
//! Usage: `cargo run -p crds --bin crdgen` (writes crds/manifests/ and charts/netbench/files/crds/),
//! or `crdgen --stdout` to print them.
use std::path::{Path, PathBuf};

fn main() -> std::io::Result<()> {
    let files = crds::manifests::render();
    if std::env::args().any(|a| a == "--stdout") {
        for (_, yaml) in files {
            print!("---\n{yaml}");
        }
        return Ok(());
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for dir in [
        root.join("crds/manifests"),
        root.join("charts/netbench/files/crds"),
    ] {
        std::fs::create_dir_all(&dir)?;
        for (name, yaml) in &files {
            let path: PathBuf = dir.join(name);
            std::fs::write(&path, yaml)?;
            eprintln!("wrote {}", path.display());
        }
    }
    Ok(())
}
