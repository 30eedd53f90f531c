mod bpf_skel;
fn main() {}
