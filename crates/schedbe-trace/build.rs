fn main() {
    // The shared LC/BE rules (tier.bpf.h) live in the schedbe-cgroup crate.
    // Resolve the directory from this crate's manifest so the build does not
    // depend on the working directory clang is started from.
    let manifest = std::env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR");
    let tier_dir = std::path::Path::new(&manifest).join("../schedbe-cgroup/bpf");
    let tier_dir = tier_dir.canonicalize().unwrap_or(tier_dir);
    // BpfBuilder only watches the sources' own directory.
    println!(
        "cargo:rerun-if-changed={}",
        tier_dir.join("tier.bpf.h").display()
    );

    scx_cargo::BpfBuilder::new()
        .unwrap()
        .add_include_path(tier_dir.to_str().expect("UTF-8 path"))
        .enable_intf("src/bpf/trace_intf.h", "trace_intf.rs")
        .enable_skel("src/bpf/trace.bpf.c", "trace")
        .build()
        .unwrap();
}
