//! Finds libllm, in this order:
//!   1. `$LLM_LIB_DIR` (a directory holding libllm.so): links it, with an rpath for this crate's own
//!      tests and examples. An explicit choice, so it comes first; an application depending on this
//!      crate gets no rpath from here (Cargo passes a dependency's link args to no one else), so it
//!      runs with LD_LIBRARY_PATH or its own rpath.
//!   2. pkg-config's `llm` (the libllm-dev package, or PKG_CONFIG_PATH): links the installed
//!      library, which ld.so finds by itself in a system directory (an rpath is added for others).
//!   3. Otherwise builds the C++ core with CMake (the repository two levels up) into OUT_DIR and links
//!      it statically, with its private dependencies (spdlog, fmt, PCRE2, libstdc++): the binary
//!      needs no libllm at run time. `LLM_STATIC=1` forces this step.
//! Needs no crates: pkg-config and cmake are run as programs.
use std::env;
use std::path::PathBuf;
use std::process::Command;

fn main() {
    for var in ["LLM_LIB_DIR", "LLM_STATIC", "PKG_CONFIG_PATH"] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    println!("cargo:rerun-if-changed=build.rs");
    let force_static = env::var("LLM_STATIC").map(|v| v == "1").unwrap_or(false);
    if !force_static {
        if let Some(dir) = env::var_os("LLM_LIB_DIR").map(PathBuf::from) {
            let dir = dir.canonicalize().unwrap_or(dir);
            link_shared(&[dir]);
            return;
        }
        if let Some(dirs) = pkg_config_dirs() {
            link_shared(&dirs);
            return;
        }
    }
    build_static();
}

fn link_shared(dirs: &[PathBuf]) {
    for dir in dirs {
        println!("cargo:rustc-link-search=native={}", dir.display());
        println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir.display());
    }
    if let Some(dir) = dirs.first() {
        println!("cargo:lib_dir={}", dir.display());
    }
    println!("cargo:rustc-link-lib=dylib=llm");
}

/// The -L directories of `pkg-config --libs llm` (possibly none: a system directory), or None when
/// pkg-config or llm.pc is absent.
fn pkg_config_dirs() -> Option<Vec<PathBuf>> {
    let out = Command::new("pkg-config").args(["--libs", "llm"]).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let libs = String::from_utf8(out.stdout).ok()?;
    Some(libs.split_whitespace().filter_map(|f| f.strip_prefix("-L")).map(PathBuf::from).collect())
}

fn build_static() {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let root = manifest.join("../..");
    if !root.join("CMakeLists.txt").exists() {
        panic!(
            "libllm not found: LLM_LIB_DIR is unset, pkg-config knows no `llm` (install libllm-dev), and \
             the C++ sources are not at {} to build",
            root.display()
        );
    }
    for dir in ["lib", "include", "cmake"] {
        println!("cargo:rerun-if-changed={}", root.join(dir).display());
    }
    println!("cargo:rerun-if-changed={}", root.join("CMakeLists.txt").display());
    let build = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR")).join("cmake");
    let jobs = env::var("NUM_JOBS").unwrap_or_else(|_| "2".into());
    run(Command::new("cmake").arg("-S").arg(&root).arg("-B").arg(&build).args([
        "-DCMAKE_BUILD_TYPE=Release",
        "-DLLM_BUILD_SHARED=OFF",
        "-DLLM_BUILD_TESTS=OFF",
        "-DLLM_BUILD_EXAMPLES=OFF",
    ]));
    run(Command::new("cmake").arg("--build").arg(&build).args(["--target", "llm", "-j", &jobs]));
    println!("cargo:rustc-link-search=native={}", build.join("lib").display());
    println!("cargo:rustc-link-lib=static=llm");
    println!("cargo:lib_dir={}", build.join("lib").display());
    // libllm.a's private dependencies (as llm.pc's Requires.private / Libs.private in a static build).
    let deps = Command::new("pkg-config").args(["--libs", "spdlog", "libpcre2-8"]).output();
    let deps = match deps {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).into_owned(),
        _ => "-lspdlog -lfmt -lpcre2-8".to_string(),
    };
    for flag in deps.split_whitespace() {
        if let Some(dir) = flag.strip_prefix("-L") {
            println!("cargo:rustc-link-search=native={dir}");
        } else if let Some(lib) = flag.strip_prefix("-l") {
            println!("cargo:rustc-link-lib=dylib={lib}");
        }
    }
    if !deps.contains("-lfmt") {
        println!("cargo:rustc-link-lib=dylib=fmt"); // spdlog's compiled build uses fmt's library
    }
    println!("cargo:rustc-link-lib=dylib=stdc++");
    println!("cargo:rustc-link-lib=dylib=pthread");
}

fn run(cmd: &mut Command) {
    let status = cmd.status().unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e} (is cmake installed?)"));
    assert!(status.success(), "{cmd:?} failed: {status}");
}
