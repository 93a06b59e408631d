//! Finds libllm: $LLM_LIB_DIR (the directory holding libllm.so), else the repository's build tree
//! (../../build/lib relative to this crate), else the system's linker path. Adds an rpath so test
//! and example binaries run without LD_LIBRARY_PATH.
use std::env;
use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-env-changed=LLM_LIB_DIR");
    println!("cargo:rerun-if-changed=build.rs");
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let dir = env::var_os("LLM_LIB_DIR").map(PathBuf::from).or_else(|| {
        let tree = manifest.join("../../build/lib");
        tree.join("libllm.so").exists().then_some(tree)
    });
    if let Some(dir) = dir {
        let dir = dir.canonicalize().unwrap_or(dir);
        println!("cargo:rustc-link-search=native={}", dir.display());
        println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir.display());
        println!("cargo:lib_dir={}", dir.display());
    }
    println!("cargo:rustc-link-lib=dylib=llm");
}
