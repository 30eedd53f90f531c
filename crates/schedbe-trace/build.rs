fn main() {
    scx_cargo::BpfBuilder::new()
        .unwrap()
        .enable_intf("src/bpf/trace_intf.h", "trace_intf.rs")
        .enable_skel("src/bpf/trace.bpf.c", "trace")
        .build()
        .unwrap();
}
