fn main() {
    // tier.bpf.h (the LC/BE rules) is shared with the tracer.
    let shared = concat!(env!("CARGO_MANIFEST_DIR"), "/../schedbe-cgroup/bpf");
    println!("cargo:rerun-if-changed={shared}/tier.bpf.h");
    // One skeleton per policy: SCHED_BE (main.bpf.c), Akita, LLF.
    scx_cargo::BpfBuilder::new()
        .unwrap()
        .add_include_path(shared)
        .enable_intf("src/bpf/intf.h", "bpf_intf.rs")
        .enable_skel("src/bpf/main.bpf.c", "bpf")
        .build()
        .unwrap();
    scx_cargo::BpfBuilder::new()
        .unwrap()
        .add_include_path(shared)
        .enable_intf("src/bpf/akita_intf.h", "akita_intf.rs")
        .enable_skel("src/bpf/akita.bpf.c", "akita")
        .build()
        .unwrap();
    scx_cargo::BpfBuilder::new()
        .unwrap()
        .add_include_path(shared)
        .enable_intf("src/bpf/llf_intf.h", "llf_intf.rs")
        .enable_skel("src/bpf/llf.bpf.c", "llf")
        .build()
        .unwrap();
}
