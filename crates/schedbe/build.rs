fn main() {
    // tier.bpf.h (the LC/BE rules) is shared with the tracer.
    let shared = concat!(env!("CARGO_MANIFEST_DIR"), "/../schedbe-cgroup/bpf");
    println!("cargo:rerun-if-changed={shared}/tier.bpf.h");
    // BpfBuilder watches only the folder of each policy's source; the
    // shared parts are in src/bpf/common.
    println!("cargo:rerun-if-changed=src/bpf");
    // One skeleton per policy, each built from its own folder of src/bpf
    // (src/bpf/common holds what they share). The generated names are the
    // ones the Rust side includes: bpf_intf.rs and bpf_skel.rs for SCHED_BE.
    scx_cargo::BpfBuilder::new()
        .unwrap()
        .add_include_path(shared)
        // SCHED_BE's RT/DL takeovers evacuate lazily (common/rt_takeover.bpf.h).
        .add_cflag("-DRT_LAZY_EVACUATION=1")
        .enable_intf("src/bpf/sched_be/intf.h", "bpf_intf.rs")
        .enable_skel("src/bpf/sched_be/sched_be.bpf.c", "bpf")
        .build()
        .unwrap();
    scx_cargo::BpfBuilder::new()
        .unwrap()
        .add_include_path(shared)
        .enable_intf("src/bpf/akita/intf.h", "akita_intf.rs")
        .enable_skel("src/bpf/akita/akita.bpf.c", "akita")
        .build()
        .unwrap();
    scx_cargo::BpfBuilder::new()
        .unwrap()
        .add_include_path(shared)
        .enable_intf("src/bpf/llf/intf.h", "llf_intf.rs")
        .enable_skel("src/bpf/llf/llf.bpf.c", "llf")
        .build()
        .unwrap();
}
